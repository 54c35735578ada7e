//! An ELF file's USDT notes, as `list` and tracing read them, and each
//! site's argument spec. No input may panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use styx_usdt::argspec::parse_spec;
use styx_usdt::note::parse_probe_table;

fuzz_target!(|data: &[u8]| {
    if let Ok(table) = parse_probe_table(data) {
        for site in &table.sites {
            let _ = parse_spec(&site.args);
        }
    }
});
