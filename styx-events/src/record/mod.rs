//! Records as they come from the ring: one event's record decoded in place,
//! a batch record split into its events, and the batches a stopping
//! process's threads still hold, read from its memory. Depends on nothing
//! else in the crate.

pub mod batch;
pub mod batch_items;
pub mod event;
pub mod partial;
