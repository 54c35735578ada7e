//! An argument spec string: parsed, and when it parses, compiled into what
//! the eBPF program reads. Neither may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use styx_usdt::argspec::parse_spec;
use styx_usdt::compile::compile;

fuzz_target!(|data: &[u8]| {
    let spec = String::from_utf8_lossy(data);
    if let Ok(args) = parse_spec(&spec) {
        let _ = compile(&args, &mut |name| Ok(name.len() as u64 * 0x1000));
    }
});
