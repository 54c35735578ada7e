//! An ELF file's USDT notes, as `list` and tracing read them, each site's
//! argument spec, guest descriptions (also the input itself as one), and
//! its functions with their return sites (`list --functions`). No input may
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use styx_events::Guest;
use styx_usdt::argspec::parse_spec;
use styx_usdt::functions::{parse_functions, Matcher};
use styx_usdt::note::parse_probe_table;

fuzz_target!(|data: &[u8]| {
    let _ = Guest::decode(data);
    if let Ok(every) = Matcher::new(&[".".to_string()], &[]) {
        let _ = parse_functions(data, &every);
    }
    if let Ok(table) = parse_probe_table(data) {
        for site in &table.sites {
            let _ = parse_spec(&site.args);
        }
        for desc in &table.guest_notes {
            let _ = Guest::decode(desc);
        }
    }
});
