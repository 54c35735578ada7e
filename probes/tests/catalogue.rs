//! The probes this crate compiles are the ones styx-common's event
//! catalogue lists: one note per event type, with the argument spec the
//! eBPF programs read. Adding an event type to one side only fails here.

use styx_common::{Branch, BranchKind, EventKind, InterruptKind};
use styx_usdt::note::read_probe_table;
use styx_usdt::select::expected_spec;

/// Puts one site of every probe into this test binary (detached, the
/// closures never run).
#[inline(never)]
fn every_probe() {
    styx_probe::insn_fetch!(|| (1u64, 2u64));
    styx_probe::insn_exec!(|| (1u64, 2u64));
    styx_probe::block!(|| (1u64, 2u64));
    styx_probe::mem_read!(|| (1u64, 2u64, 3u8));
    styx_probe::mem_write!(|| (1u64, 2u64, 3u8));
    styx_probe::reg_read!(|| (1u64, 2u64, 3u64));
    styx_probe::reg_write!(|| (1u64, 2u64, 3u64, 4u64));
    styx_probe::branch!(|| (1u64, 2u64, Branch::from(BranchKind::Jump)));
    styx_probe::interrupt!(|| (InterruptKind::Entry, 1u64, 2u64, 3u64));
    styx_probe::control!(|| (1u64, 2u64, 3u64));
    styx_probe::span_begin!(|| ("cat", "name", 1));
    styx_probe::span_end!(|| ("cat", "name", 1));
    styx_probe::marker!(|| "text");
}

#[cfg(not(feature = "disabled"))]
#[test]
fn every_catalogued_event_has_its_probe_and_no_other() {
    every_probe();
    let exe = std::env::current_exe().unwrap();
    let table = read_probe_table(&exe).expect("reading this test's own notes");
    let styx: Vec<_> = table
        .sites
        .iter()
        .filter(|s| s.provider == "styx")
        .collect();
    for &kind in EventKind::ALL.iter().filter(|&&k| k != EventKind::Usdt) {
        let sites: Vec<_> = styx
            .iter()
            .filter(|s| s.name == kind.probe_name())
            .collect();
        assert!(!sites.is_empty(), "no styx:{} probe", kind.probe_name());
        for site in sites {
            assert_eq!(site.args, expected_spec(kind), "styx:{}", site.name);
            assert_ne!(site.semaphore, 0, "styx:{} has no semaphore", site.name);
        }
    }
    for site in &styx {
        assert!(
            EventKind::from_probe_name(&site.name).is_some_and(|k| k != EventKind::Usdt),
            "styx:{} is not in the event catalogue",
            site.name
        );
    }
}

/// Every batched type has one batch-enable site whose semaphore is the high
/// half of the type's word (the per-event sites' address + 2); per-event
/// types have none; one flush site takes (head, start, len).
#[cfg(not(feature = "disabled"))]
#[test]
fn batch_sites_match_the_catalogue() {
    use styx_common::batch::{BATCHED_HALF_OFFSET, BATCH_PROVIDER, FLUSH_PROBE};
    use styx_common::Delivery;
    every_probe();
    let exe = std::env::current_exe().unwrap();
    let table = read_probe_table(&exe).expect("reading this test's own notes");
    let batch: Vec<_> = table
        .sites
        .iter()
        .filter(|s| s.provider == BATCH_PROVIDER)
        .collect();
    for &kind in EventKind::ALL.iter().filter(|&&k| k != EventKind::Usdt) {
        let enable: Vec<_> = batch
            .iter()
            .filter(|s| s.name == kind.probe_name())
            .collect();
        let per_event = table
            .sites
            .iter()
            .find(|s| s.provider == "styx" && s.name == kind.probe_name())
            .expect("a per-event site");
        match kind.delivery() {
            Delivery::Batched => {
                assert_eq!(enable.len(), 1, "styx_batch:{}", kind.probe_name());
                assert_eq!(
                    enable[0].semaphore,
                    per_event.semaphore + BATCHED_HALF_OFFSET,
                    "styx_batch:{} raises another word's high half",
                    kind.probe_name()
                );
            }
            Delivery::PerEvent => assert!(enable.is_empty(), "styx_batch:{}", kind.probe_name()),
        }
    }
    let flush: Vec<_> = batch.iter().filter(|s| s.name == FLUSH_PROBE).collect();
    assert_eq!(flush.len(), 1);
    assert_eq!(flush[0].args, "8@%rdi 8@%rsi 8@%rdx 8@%rcx 8@%r8 8@%r9");
    assert_eq!(
        batch.len(),
        1 + EventKind::ALL
            .iter()
            .filter(|k| k.delivery() == Delivery::Batched)
            .count()
    );
}
