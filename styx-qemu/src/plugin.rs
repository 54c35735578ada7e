//! Installing into QEMU, instrumenting each translated block for the event
//! types tracers hold, and retranslating when that set changes.
//!
//! Nothing runs per instruction or per block while no tracer is attached:
//! not even the translation callback is registered then
//! ([`register_globals`] says why), and what is left is the system call
//! callbacks (twice per guest system call), each a few loads of semaphore
//! words.
//!
//! QEMU API v1 instruments a block when it is translated, so a change in
//! what tracers hold needs the code cache translated again:
//! `qemu_plugin_reset` flushes it (at QEMU's next safe point, all vCPUs
//! stopped) and unregisters the plugin's callbacks, which [`reset_done`]
//! registers again. Called from a non-vCPU thread it would unregister
//! without flushing, so the change is noticed where a vCPU thread runs
//! plugin code anyway: at each translation (while anything is traced)
//! and at each guest system call's entry and return. A guest that makes
//! no system call (a hot loop) keeps its instrumentation, or the lack of
//! it, until it does one; noticing it sooner would take a callback in
//! every block, the cost this avoids.

use crate::records::{self, Block, Insn, Translation};
use crate::wanted::Wanted;
use core::ffi::{c_uint, c_void};
use qemu_plugin::sys::{
    qemu_plugin_cb_flags, qemu_plugin_end_code, qemu_plugin_entry_code, qemu_plugin_id_t,
    qemu_plugin_insn_data, qemu_plugin_insn_size, qemu_plugin_insn_vaddr, qemu_plugin_mem_rw,
    qemu_plugin_path_to_binary, qemu_plugin_register_atexit_cb, qemu_plugin_register_flush_cb,
    qemu_plugin_register_vcpu_insn_exec_cb, qemu_plugin_register_vcpu_mem_cb,
    qemu_plugin_register_vcpu_syscall_cb, qemu_plugin_register_vcpu_syscall_ret_cb,
    qemu_plugin_register_vcpu_tb_exec_cb, qemu_plugin_register_vcpu_tb_trans_cb, qemu_plugin_reset,
    qemu_plugin_start_code, qemu_plugin_tb, qemu_plugin_tb_get_insn, qemu_plugin_tb_n_insns,
    qemu_plugin_tb_vaddr,
};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;
use styx_common::guest_marker::{Program, QemuGuest};
use styx_common::MARKER_TEXT_MAX;

/// The event types the code cache has been translated for since its last
/// flush.
static CACHED: AtomicU8 = AtomicU8::new(0);

/// Whether a change in what tracers hold retranslates (the plugin's
/// `retranslate=off` turns it off: then the set at each block's
/// translation stays its set).
static RETRANSLATE: AtomicBool = AtomicBool::new(true);

/// Whether the translation callback stays registered while nobody
/// traces: in system mode, where no guest system call reaches plugins and
/// translations are what notices a tracer coming.
static ALWAYS_TRANSLATING: AtomicBool = AtomicBool::new(false);

/// The guest as QEMU names it (`target_name`: x86_64, aarch64, …).
static TARGET: OnceLock<String> = OnceLock::new();

const NO_REGS: qemu_plugin_cb_flags = qemu_plugin_cb_flags::QEMU_PLUGIN_CB_NO_REGS;

/// Called from `qemu_plugin_install`; `system`: QEMU emulates a whole
/// machine (no guest system calls reach plugins).
pub fn install(id: qemu_plugin_id_t, target: &str, retranslate: bool, system: bool) {
    let _ = TARGET.set(target.to_string());
    RETRANSLATE.store(retranslate, Ordering::Relaxed);
    ALWAYS_TRANSLATING.store(system || !retranslate, Ordering::Relaxed);
    let wanted = Wanted::now();
    CACHED.store(wanted.bits(), Ordering::Relaxed);
    register_globals(id, wanted);
}

/// The callbacks that are not a block's (a reset unregisters them all),
/// for translating with `wanted`. With nothing wanted not even the
/// translation callback: while one is registered QEMU's translator works
/// every block through its plugin hooks, which measured ~1.5% of a
/// CPU-bound guest's time with nothing registered per block; a tracer
/// coming is noticed at the next system call instead (as it would be for
/// code already translated), unless retranslation is off or QEMU runs a
/// whole machine ([`ALWAYS_TRANSLATING`]).
fn register_globals(id: qemu_plugin_id_t, wanted: Wanted) {
    let translating = !wanted.is_empty() || ALWAYS_TRANSLATING.load(Ordering::Relaxed);
    // SAFETY: QEMU's registration calls with our plugin id and functions
    // of the types it expects.
    unsafe {
        if translating {
            qemu_plugin_register_vcpu_tb_trans_cb(id, Some(translate));
        }
        qemu_plugin_register_vcpu_syscall_cb(id, Some(syscall));
        qemu_plugin_register_vcpu_syscall_ret_cb(id, Some(syscall_ret));
        qemu_plugin_register_flush_cb(id, Some(flushed));
        qemu_plugin_register_atexit_cb(id, Some(exiting), core::ptr::null_mut());
    }
}

/// Asks for a retranslation if what tracers hold is not what the code
/// cache was translated for. Runs on a vCPU thread, which is what makes
/// the reset flush (see the module's comment).
fn follow(id: qemu_plugin_id_t, wanted: Wanted) {
    if wanted.bits() != CACHED.load(Ordering::Relaxed) && RETRANSLATE.load(Ordering::Relaxed) {
        // QEMU ignores a second request while one is under way.
        // SAFETY: our plugin id and a function of the expected type.
        unsafe { qemu_plugin_reset(id, Some(reset_done)) };
    }
}

/// The code cache is flushed and our callbacks are gone: translate from
/// now on for what tracers hold now.
unsafe extern "C" fn reset_done(id: qemu_plugin_id_t) {
    ANNOUNCED.store(false, Ordering::Relaxed);
    let wanted = Wanted::now();
    CACHED.store(wanted.bits(), Ordering::Relaxed);
    register_globals(id, wanted);
}

/// QEMU flushed its code cache (ours or its own, when full): no block
/// translated before runs again, so their records can go.
unsafe extern "C" fn flushed(_id: qemu_plugin_id_t) {
    records::forget_all();
}

/// A guest system call (user mode): fired as the plugin's own `syscall`
/// event, and a chance to notice a tracer that came or went while the
/// guest ran code already translated.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn syscall(
    id: qemu_plugin_id_t,
    _vcpu: c_uint,
    num: i64,
    a1: u64,
    a2: u64,
    a3: u64,
    a4: u64,
    a5: u64,
    a6: u64,
    _a7: u64,
    _a8: u64,
) {
    crate::fire::syscall_entry(num, [a1, a2, a3, a4, a5, a6]);
    follow(id, Wanted::now());
}

/// A guest system call returned: the plugin's `syscall_ret` event, and
/// again a chance to notice a tracer: one that attached while the guest
/// waited in this call (for input, a signal, a child) is noticed here,
/// before the guest runs on.
unsafe extern "C" fn syscall_ret(id: qemu_plugin_id_t, _vcpu: c_uint, num: i64, ret: i64) {
    crate::fire::syscall_return(num, ret);
    follow(id, Wanted::now());
}

/// The guest is exiting. In user mode QEMU then ends the process with the
/// `exit_group` system call itself, so the C library's exit handlers
/// (where styx-probe hands over what threads still hold) never run: hand
/// it over here.
unsafe extern "C" fn exiting(_id: qemu_plugin_id_t, _userdata: *mut c_void) {
    styx_probe::flush_all();
}

/// Whether the guest's description was fired since the code cache was
/// last translated anew: a tracer that comes later (`--pid`, after a
/// reset) gets it too.
static ANNOUNCED: AtomicBool = AtomicBool::new(false);

/// Fires the guest's description (`styx_common::guest_marker`: the
/// target and, in user mode, the program's file and where it is loaded)
/// at the first translation while markers are traced, and again after
/// each retranslation. Once per attach, so its cost does not matter: the
/// program headers are read from the file then.
fn announce() {
    if ANNOUNCED.load(Ordering::Relaxed) || !styx_probe::enabled(styx_probe::EventKind::Marker) {
        return;
    }
    ANNOUNCED.store(true, Ordering::Relaxed);
    styx_probe::marker!(|| {
        let arch = TARGET.get().map_or("?", String::as_str);
        // SAFETY: QEMU's queries; the path is a NUL-terminated string QEMU
        // keeps, or NULL in system mode.
        let (path, start_code, entry) = unsafe {
            let path = qemu_plugin_path_to_binary();
            let path = (!path.is_null()).then(|| {
                core::ffi::CStr::from_ptr(path)
                    .to_string_lossy()
                    .into_owned()
            });
            (path, qemu_plugin_start_code(), qemu_plugin_entry_code())
        };
        let program = path.as_deref().map(|path| {
            // Without its program headers, the code's range (API v1's).
            // SAFETY: a query of QEMU's.
            let (base, end) = crate::image::loaded_span(path, start_code)
                .unwrap_or((start_code, unsafe { qemu_plugin_end_code() }));
            (base, end, entry, path)
        });
        // Absolute: whoever reads the capture does not know QEMU's
        // working directory.
        let absolute = path.as_deref().and_then(|p| std::fs::canonicalize(p).ok());
        let absolute = absolute.as_deref().map(|p| p.to_string_lossy());
        let guest = QemuGuest {
            arch,
            program: program.map(|(base, end, entry, path)| Program {
                base,
                end,
                entry,
                path: absolute.as_deref().unwrap_or(path),
            }),
        };
        let mut text = [0u8; MARKER_TEXT_MAX];
        let len = guest.write(&mut text);
        String::from_utf8_lossy(&text[..len]).into_owned()
    });
}

/// A block was translated: keep its records and register the callbacks of
/// the types tracers hold, or none.
unsafe extern "C" fn translate(id: qemu_plugin_id_t, tb: *mut qemu_plugin_tb) {
    announce();
    let wanted = Wanted::now();
    follow(id, wanted);
    if wanted.is_empty() {
        return;
    }
    // SAFETY: `tb` is the block QEMU is translating, valid for this call;
    // its instructions likewise.
    unsafe {
        let count = qemu_plugin_tb_n_insns(tb);
        let insns: Box<[Insn]> = (0..count)
            .map(|i| {
                let insn = qemu_plugin_tb_get_insn(tb, i);
                let len = qemu_plugin_insn_size(insn);
                let data = qemu_plugin_insn_data(insn) as *const u8;
                let mut bytes = [0u8; 8];
                core::ptr::copy_nonoverlapping(data, bytes.as_mut_ptr(), len.min(8));
                Insn {
                    pc: qemu_plugin_insn_vaddr(insn),
                    bytes: u64::from_le_bytes(bytes),
                    len: len.min(u8::MAX as usize) as u8,
                }
            })
            .collect();
        let size: usize = insns.iter().map(|insn| insn.len as usize).sum();
        let kept = records::keep(Translation {
            block: Block {
                pc: qemu_plugin_tb_vaddr(tb),
                // A block is at most two guest pages.
                size: size.min(u16::MAX as usize) as u16,
            },
            insns,
        });
        if wanted.has(Wanted::BLOCK) {
            let block = &kept.block as *const Block as *mut c_void;
            qemu_plugin_register_vcpu_tb_exec_cb(tb, Some(crate::fire::block), NO_REGS, block);
        }
        for (i, record) in kept.insns.iter().enumerate() {
            let insn = qemu_plugin_tb_get_insn(tb, i);
            let record = record as *const Insn as *mut c_void;
            if wanted.has(Wanted::INSN_EXEC) {
                let fire = Some(crate::fire::insn_exec as _);
                qemu_plugin_register_vcpu_insn_exec_cb(insn, fire, NO_REGS, record);
            }
            if wanted.has(Wanted::MEM_READ) || wanted.has(Wanted::MEM_WRITE) {
                // Both directions: QEMU 7.2 does not filter by the one
                // asked for (`fire::mem`).
                let fire = Some(crate::fire::mem as _);
                let rw = qemu_plugin_mem_rw::QEMU_PLUGIN_MEM_RW;
                qemu_plugin_register_vcpu_mem_cb(insn, fire, NO_REGS, rw, record);
            }
        }
    }
}
