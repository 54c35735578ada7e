//! The demo programs really compute what they claim, on the emulator, with
//! the timer interrupting them throughout.

use styx_demo::bus::TIMER_PERIOD;
use styx_demo::programs::{self, FIB_TABLE, SORT_ARRAY, SQUARES_TABLE, TICKS};
use styx_demo::{Machine, RunResult};

fn word(machine: &Machine, address: u16) -> u16 {
    let bus = machine.bus();
    u16::from_le_bytes([bus.peek(address), bus.peek(address + 1)])
}

/// Every timer tick was taken as an IRQ and counted by the handler.
fn assert_interrupted(machine: &Machine, result: &RunResult) {
    let ticks = result.instructions / u64::from(TIMER_PERIOD);
    assert!(result.irqs > 0, "no IRQ taken");
    assert!(
        result.irqs.abs_diff(ticks) <= 1,
        "{} IRQs for {ticks} ticks",
        result.irqs
    );
    assert_eq!(u64::from(machine.bus().peek(TICKS)), result.irqs % 256);
}

#[test]
fn sieve_prints_the_primes_below_256() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::SIEVE).unwrap();
    let primes: Vec<u8> = (2u16..256)
        .filter(|n| (2..*n).all(|d| n % d != 0))
        .map(|n| n as u8)
        .collect();
    assert_eq!(result.output, primes);
    assert_eq!(result.exit_code, 0);
    assert_interrupted(&machine, &result);
}

#[test]
fn sort_sorts_its_input_and_prints_it() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::SORT).unwrap();
    assert_eq!(result.exit_code, 0);
    let mut expected = programs::sort_input()[0].1.clone();
    assert!(!expected.is_sorted(), "the input must need sorting");
    expected.sort_unstable();
    let in_ram: Vec<u8> = (0..64)
        .map(|i| machine.bus().peek(SORT_ARRAY + i))
        .collect();
    assert_eq!(in_ram, expected);
    assert_eq!(result.output, expected);
    assert_interrupted(&machine, &result);
}

#[test]
fn fib_fills_the_table_until_16_bits_overflow() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::FIB).unwrap();
    let fib: Vec<u16> = (0..=24)
        .scan((0u16, 1u16), |(a, b), _| {
            let f = *a;
            (*a, *b) = (*b, a.wrapping_add(*b));
            Some(f)
        })
        .collect();
    for (n, &f) in fib.iter().enumerate() {
        assert_eq!(word(&machine, FIB_TABLE + 2 * n as u16), f, "F({n})");
    }
    // F(25) = 75025 does not fit: 24 is the last index stored.
    assert_eq!(result.exit_code, 24);
    let low_bytes: Vec<u8> = fib[2..].iter().map(|f| *f as u8).collect();
    assert_eq!(result.output, low_bytes);
}

#[test]
fn squares_multiplies_every_byte_by_itself() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::SQUARES).unwrap();
    assert_eq!(result.exit_code, 0);
    for n in 0..256u16 {
        assert_eq!(word(&machine, SQUARES_TABLE + 2 * n), n * n, "{n}²");
    }
    let low_bytes: Vec<u8> = (0..256u16).map(|n| (n * n) as u8).collect();
    assert_eq!(result.output, low_bytes);
    assert_interrupted(&machine, &result);
}

#[test]
fn runs_repeat_identically_whatever_ran_before() {
    let mut machine = Machine::new();
    let first: Vec<RunResult> = programs::ALL
        .iter()
        .map(|p| machine.run(p).unwrap())
        .collect();
    for _ in 0..2 {
        for (program, expected) in programs::ALL.iter().zip(&first) {
            assert_eq!(&machine.run(program).unwrap(), expected, "{}", program.name);
        }
    }
    let fresh = Machine::new().run(&programs::SORT).unwrap();
    assert_eq!(fresh, first[1]);
}
