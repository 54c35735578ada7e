//! styx-qemu: a QEMU TCG plugin that fires styx events for whatever guest
//! QEMU runs, through styx-probe's batched delivery, so that styx-loader
//! traces it like any emulator with styx probes:
//!
//! ```sh
//! styx-loader --binary target/release/libstyx_qemu.so -o jsonl --output t.jsonl &
//! qemu-x86_64 -plugin target/release/libstyx_qemu.so ./prog
//! ```
//!
//! Plugin API v1 (QEMU 7.2, the oldest the `qemu-plugin` crate's
//! pre-generated bindings cover that Debian ships) gives, per executed
//! translation block, `block(pc, size)`; per executed instruction,
//! `insn_exec(pc, bytes, len)`; per memory access, `mem_read`/`mem_write`
//! `(pc, addr, 0)` with the access's size and no value (v1 has none).
//! Registers, memory values and conditional callbacks come with later
//! versions. Guest system calls (user mode) are event types of the
//! plugin's own: `styx_qemu:syscall(num, a1..a6)` and
//! `styx_qemu:syscall_ret(num, ret)` (`--probes 'styx_qemu:*'`). Each
//! event comes from the vCPU's thread (the guest thread's, in user mode).
//!
//! While no tracer is attached nothing is registered per block or per
//! instruction (`plugin.rs` says how changes retranslate). Arguments:
//! `-plugin libstyx_qemu.so,retranslate=off` keeps each block's
//! instrumentation as it was when translated (see the README for why one
//! may want that on QEMU 7.2); `wait=SECONDS` holds the guest back at the
//! start until a tracer holds one of the types (at most that long), for
//! `styx-loader -- qemu-… -plugin …,wait=5`, whose loader finds the plugin
//! only once QEMU has loaded it.

mod fire;
mod image;
mod plugin;
mod records;
mod wanted;

use qemu_plugin::install::{Args, Info, Value};
use qemu_plugin::plugin::{HasCallbacks, Register};
use qemu_plugin::PluginId;

/// The plugin as the `qemu-plugin` crate installs it (it exports
/// `qemu_plugin_install` and `qemu_plugin_version`).
struct Styx;

impl HasCallbacks for Styx {}

impl Register for Styx {
    /// Registers our own callbacks only: the crate's defaults would take a
    /// lock around every one of them.
    fn register_default(
        &mut self,
        id: PluginId,
        args: &Args,
        info: &Info,
    ) -> qemu_plugin::Result<()> {
        let retranslate = match args.parsed.get("retranslate") {
            None => true,
            Some(Value::Bool(on)) => *on,
            Some(other) => {
                eprintln!("styx-qemu: retranslate={other:?}: expected on or off; keeping on");
                true
            }
        };
        match args.parsed.get("wait") {
            None => {}
            Some(Value::Integer(seconds)) if *seconds >= 0 => {
                wanted::wait_for_tracer(std::time::Duration::from_secs(*seconds as u64))
            }
            Some(other) => {
                eprintln!("styx-qemu: wait={other:?}: expected whole seconds; not waiting")
            }
        }
        plugin::install(id, &info.target_name, retranslate, info.system.is_some());
        Ok(())
    }
}

qemu_plugin::register!(Styx);
