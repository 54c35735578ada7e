//! Prints `styx_probe.h` as the event catalogue makes it:
//! `cargo run -p styx-probe-c --example header > styx-probe-c/include/styx_probe.h`.

fn main() {
    print!("{}", styx_probe_c::header());
}
