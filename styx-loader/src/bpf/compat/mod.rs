//! What aya 0.14 cannot do yet, done by hand on aya-obj's generated kernel
//! types: attaching with a kernel-managed USDT semaphore (`ref_ctr_offset`),
//! `uprobe_multi` links (Linux 6.6+), and loading programs with the attach
//! type those links need. Every `bpf(2)` and `perf_event_open(2)` call styx
//! makes itself goes through [`syscall`], with a zeroed `bpf_attr` or
//! `perf_event_attr` from `aya_obj::generated` filled in: no kernel struct or
//! constant is laid out here by hand. Delete this module once aya releases
//! uprobe_multi with ref_ctr support.

pub mod multi_programs;
pub mod perf_link;
mod syscall;
pub mod uprobe_multi;
