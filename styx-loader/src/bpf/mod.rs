//! The kernel side: load styx's eBPF object ([`load`]), attach its
//! programs to probe sites ([`attach`]); [`compat`] holds what aya 0.14
//! cannot do yet. Built with the `trace` feature only.

#[cfg(feature = "trace")]
pub mod attach;
#[cfg(feature = "trace")]
mod compat;
#[cfg(feature = "trace")]
pub mod load;

/// How sites are attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AttachMode {
    /// One `uprobe_multi` link per program and file (Linux 6.6+): attaches
    /// and detaches any number of sites at once.
    Multi,
    /// One perf-event link per site, as bpftrace does: the kernel needs
    /// ~0.1 s per site to detach them.
    PerSite,
}
