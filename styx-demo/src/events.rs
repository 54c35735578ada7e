//! How the emulator fires its per-instruction events: [`fire!`] calls the
//! styx probe, and in this crate's unit tests also records the event, so the
//! instrumentation can be checked without attaching a tracer.

/// Fires the styx probe `$probe` with the given arguments, evaluated only
/// while a tracer is attached. Arguments must be plain, side-effect-free
/// expressions: unit tests evaluate them a second time to record them.
macro_rules! fire {
    ($probe:ident, $($arg:expr),+ $(,)?) => {{
        #[cfg(test)]
        $crate::events::recorder::record(
            stringify!($probe),
            &[$($crate::events::recorder::Arg::arg($arg)),+],
        );
        styx_probe::$probe!(|| ($($arg),+));
    }};
}
pub(crate) use fire;

/// Whether to run the instrumented step: a tracer is attached to some styx
/// probe (or, in unit tests, events are being recorded).
#[inline(always)]
pub(crate) fn tracing() -> bool {
    #[cfg(test)]
    if recorder::recording() {
        return true;
    }
    styx_probe::any_enabled()
}

/// A per-thread event log for unit tests (tests run on their own threads).
#[cfg(test)]
pub(crate) mod recorder {
    use std::cell::RefCell;
    use styx_probe::{Branch, InterruptKind};

    /// One recorded event: the probe's name and its arguments as the tracer
    /// would receive them (mem accesses without the size).
    pub type Event = (&'static str, Vec<u64>);

    thread_local! {
        static LOG: RefCell<Option<Vec<Event>>> = const { RefCell::new(None) };
    }

    /// A probe argument as the tracer sees it.
    pub trait Arg {
        fn arg(self) -> u64;
    }

    macro_rules! unsigned {
        ($($t:ty),*) => {$(
            impl Arg for $t {
                fn arg(self) -> u64 {
                    self.into()
                }
            }
        )*};
    }
    unsigned!(u8, u16, u64);

    impl Arg for Branch {
        fn arg(self) -> u64 {
            self.encode()
        }
    }

    impl Arg for InterruptKind {
        fn arg(self) -> u64 {
            self as u64
        }
    }

    pub fn record(probe: &'static str, args: &[u64]) {
        LOG.with_borrow_mut(|log| {
            if let Some(log) = log {
                log.push((probe, args.to_vec()));
            }
        });
    }

    pub fn recording() -> bool {
        LOG.with_borrow(Option::is_some)
    }

    /// Runs `f` and returns every event this thread fired meanwhile.
    pub fn capture(f: impl FnOnce()) -> Vec<Event> {
        LOG.set(Some(Vec::new()));
        f();
        LOG.take().unwrap_or_default()
    }
}
