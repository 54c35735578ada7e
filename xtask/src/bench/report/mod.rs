//! BENCHMARKS.md: the method, the machine, the targets and every table,
//! written from a run's results and from facts measured or defined
//! elsewhere (the machine's CPUs and kernel, styx's batch size and event
//! types), never written in by hand.

pub(crate) mod cases;
mod figures;
mod stream;
mod targets;

use super::machine::Machine;
use super::{Plan, Results};
use std::fmt::Write;
use std::time::Duration;
use styx_common::batch::{BATCH_BYTES, MARK_EVERY_BYTES};
use styx_common::item::{event_tag, write_declared, Layout};
use styx_common::EventKind;

/// What the prose says that is not one of the run's figures: the machine,
/// as measured, and styx's batch geometry, from styx-common. (The event
/// types' count is the demo's, [`super::demo::styx_event_types`].)
pub struct Facts<'a> {
    pub machine: &'a Machine,
    /// A batch buffer's size in KiB.
    pub batch_kib: usize,
    /// The benchmark's `mem_read`s in a full batch, and from one time mark
    /// to the next.
    pub reads_per_batch: usize,
    pub reads_per_mark: usize,
    /// Bytes of a batch item of styx-bench's `mem_read`s: `nop1`'s and
    /// `nop1-narrow`'s.
    pub read_item_bytes: usize,
    pub narrow_read_item_bytes: usize,
    /// Bytes of a batch item of styx-bench's declared `bench_tick` (a
    /// 16-bit pc and address, an 8-bit value).
    pub declared_item_bytes: usize,
}

/// Bytes of a batch item of a `mem_read` whose pc, address, value and size
/// are `widths` bytes wide.
fn mem_read_item_bytes(widths: &[usize; 4]) -> usize {
    Layout::of(event_tag(EventKind::MemRead, widths)).map_or(1, Layout::bytes)
}

impl Facts<'_> {
    pub fn new(machine: &Machine) -> Facts<'_> {
        // styx-bench's: a u64 pc and address (`nop1-narrow`: u16), a u8
        // value, and its size.
        let read = mem_read_item_bytes(&[8, 8, 1, 1]);
        Facts {
            machine,
            batch_kib: BATCH_BYTES >> 10,
            reads_per_batch: BATCH_BYTES / read,
            reads_per_mark: MARK_EVERY_BYTES as usize / read,
            read_item_bytes: read,
            narrow_read_item_bytes: mem_read_item_bytes(&[2, 2, 1, 1]),
            declared_item_bytes: write_declared(1, &[0; 3], &[2, 2, 1], &mut [0; _]),
        }
    }

    /// "this 2-vCPU machine".
    pub fn this_machine(&self) -> String {
        let virtual_cpu = if self.machine.virtual_machine {
            "v"
        } else {
            ""
        };
        format!("this {}-{virtual_cpu}CPU machine", self.machine.cpus)
    }

    /// [`Facts::reads_per_batch`] to the nearest hundred: a batch's head
    /// and time marks take some of it.
    pub fn reads_per_batch_roughly(&self) -> usize {
        (self.reads_per_batch + 50) / 100 * 100
    }
}

pub fn render(machine: &Machine, plan: &Plan, results: &Results, took: Duration) -> String {
    let facts = Facts::new(machine);
    let r = results;
    let mut md = String::new();
    header(&mut md, &facts, plan, r, took);
    targets::write(&mut md, r, &facts);
    cases::method(&mut md, plan, r, &facts);
    cases::demo(&mut md, plan, r);
    stream::per_event(&mut md, &r.stream, r.breakdown.as_ref(), &facts);
    stream::widths(&mut md, &r.stream, &facts);
    stream::files(&mut md, &r.stream);
    stream::detached(&mut md, &r.stream, &r.site);
    stream::seeds(&mut md, &r.stream);
    cases::consumers(&mut md, plan, r);
    cases::questions(&mut md, plan, r);
    stream::encoding(&mut md, &r.stream);
    cases::functions(&mut md, plan, r);
    cases::workload(&mut md, plan, r);
    cases::qemu(&mut md, plan.rounds, &r.qemu);
    cases::c_probes(&mut md, plan, &r.c);
    let _ = writeln!(
        md,
        "## Machine\n\n- {}\n- Linux {}\n- {}\n- {}\n",
        machine_line(machine),
        machine.kernel,
        machine.rustc,
        machine.bpftrace
    );
    md
}

/// The title, when and where the run was, and what else the CPUs did.
fn header(md: &mut String, facts: &Facts, plan: &Plan, r: &Results, took: Duration) {
    let machine = facts.machine;
    let command = if plan.quick {
        "sudo cargo xtask bench --quick"
    } else {
        "sudo cargo xtask bench"
    };
    let _ = writeln!(md, "# styx benchmarks\n");
    let _ = writeln!(
        md,
        "Measured {} by `{command}` ({} rounds, {:.0} s) on {}, Linux {}. \
         Every figure is the median over the rounds, with the lowest and highest in \
         parentheses; ratios are medians of per-round ratios.\n",
        machine.date,
        plan.rounds,
        took.as_secs_f64(),
        machine_line(machine),
        machine.kernel,
    );
    let cpu = &r.cpu;
    let available = cpu.wall * machine.cpus as f64;
    let others = (cpu.busy - cpu.ours).max(0.0);
    let _ = writeln!(
        md,
        "The machine is shared. Over the run its {} CPUs were busy {:.0} s of {:.0} s: the \
         benchmark's own processes {:.0} s, everything else {:.1} s ({:.1}% of the CPUs: \
         other processes, and kernel threads, among them the writeback of the benchmark's \
         file captures); the hypervisor took {:.1} s more (steal).\n",
        machine.cpus,
        cpu.busy,
        available,
        cpu.ours,
        others,
        100.0 * others / available.max(1e-9),
        cpu.steal,
    );
}

fn machine_line(m: &Machine) -> String {
    format!(
        "{} × {} ({:.1} GiB{})",
        m.cpus,
        m.cpu,
        m.memory_gib,
        if m.virtual_machine {
            ", a virtual machine"
        } else {
            ""
        }
    )
}
