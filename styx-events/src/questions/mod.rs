//! What a run asks of its events beyond writing them: which to keep
//! (`--filter`, `--sample`; of a capture, a window and types: `cut`), how many of each key (`top`), which calls
//! they make (`--functions`), and the newest of them when something
//! happens (the flight recorder).

pub mod calls;
pub mod cut;
pub mod filter;
pub mod flight;
pub mod top;
