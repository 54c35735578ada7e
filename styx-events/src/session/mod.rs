//! What a session is about, which every format starts from: the header
//! (who was traced, clocks, probes; a capture stores it), the emulator's
//! guest description, other providers' probes, names for the traced
//! process's code addresses, each event type's fields (the catalogue's
//! and declared ones alike), walked by one schema, and how each field
//! type reads.

pub mod code;
pub mod declared;
pub mod fields;
pub mod guest;
pub mod header;
pub mod reading;
pub mod schema;
pub mod usdt;
