//! The demo programs really compute what they claim, on the emulator.

use styx_demo::programs::{self, FIB_TABLE, SORT_ARRAY, TICKS};
use styx_demo::Machine;

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
}

#[test]
fn sort_sorts_its_input() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::SORT).unwrap();
    assert_eq!(result.exit_code, 0);
    let sorted: Vec<u8> = (0..64)
        .map(|i| machine.cpu.memory.peek(SORT_ARRAY + i))
        .collect();
    let mut expected = programs::sort_input()[0].1.clone();
    assert!(!expected.is_sorted(), "the input must need sorting");
    expected.sort_unstable();
    assert_eq!(sorted, expected);
    // 36k instructions: the timer interrupted it many times and it survived.
    assert!(machine.cpu.memory.peek(TICKS) > 50);
}

#[test]
fn fib_fills_the_table_until_16_bits_overflow() {
    let mut machine = Machine::new();
    let result = machine.run(&programs::FIB).unwrap();
    let (mut a, mut b) = (0u16, 1u16);
    for n in 0..=24u16 {
        let lo = machine.cpu.memory.peek(FIB_TABLE + 2 * n);
        let hi = machine.cpu.memory.peek(FIB_TABLE + 2 * n + 1);
        assert_eq!(u16::from_le_bytes([lo, hi]), a, "F({n})");
        (a, b) = (b, a.wrapping_add(b));
    }
    assert_eq!(result.output, (1..=23).collect::<Vec<u8>>());
    assert_eq!(result.exit_code, 23);
}

#[test]
fn programs_run_again_after_each_other() {
    let mut machine = Machine::new();
    for _ in 0..2 {
        for program in programs::ALL {
            machine.run(program).unwrap();
        }
    }
    assert_eq!(machine.run(&programs::SIEVE).unwrap().output.len(), 54);
}
