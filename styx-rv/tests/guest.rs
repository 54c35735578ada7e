//! The guest computes its known answers, and the counting machine's counts
//! (which the end-to-end tests hold the tracer's events to) agree with an
//! independent count: the same image on rrs-lib's own `VecMemory`, each
//! instruction classified from its word, with no styx-rv bus or loop.

use rrs_lib::instruction_executor::{InstructionException, InstructionExecutor};
use rrs_lib::memories::VecMemory;
use rrs_lib::HartState;
use styx_rv::asm::{OPCODE_LOAD, OPCODE_STORE};
use styx_rv::bus::{HALT_PORT, RAM_SIZE};
use styx_rv::guest::{self, Answers, ENTRY, RESULT_CHECKSUM, RESULT_PRIMES};
use styx_rv::{Counts, Machine};

#[test]
fn the_guest_finds_the_564_primes_below_4096_and_sorts_its_table() {
    let expected = Answers::expected();
    // π(4096) = 564, a known figure that does not depend on the host's sieve.
    assert_eq!(expected.primes, 564);
    let plain = Machine::<false>::new().unwrap().run().unwrap();
    let counted = Machine::<true>::new().unwrap().run().unwrap();
    assert_eq!((plain.answers, counted.answers), (expected, expected));
    assert_eq!(plain.counts.instructions, counted.counts.instructions);
    // The uncounted machine counts instructions only (for its speed line).
    assert_eq!(
        plain.counts,
        Counts {
            instructions: plain.counts.instructions,
            ..Counts::default()
        }
    );
}

/// The guest run on rrs-lib's plain memory until its store to the halt
/// port faults there, counted by decoding each executed instruction.
fn reference_counts() -> (Counts, Answers) {
    let image = guest::image().unwrap();
    let mut words = vec![0u32; (RAM_SIZE / 4) as usize];
    for (i, word) in image.chunks(4).enumerate() {
        words[ENTRY as usize / 4 + i] = u32::from_le_bytes(word.try_into().unwrap());
    }
    let mut memory = VecMemory::new(words);
    let mut hart = HartState::new();
    hart.pc = ENTRY;
    let mut counts = Counts::default();
    let mut executor = InstructionExecutor {
        mem: &mut memory,
        hart_state: &mut hart,
    };
    loop {
        let pc = executor.hart_state.pc;
        let insn = executor.mem.mem[(pc / 4) as usize];
        let before = executor.hart_state.registers;
        let outcome = executor.step();
        counts.instructions += 1;
        counts.mem_reads += 1; // the fetch
        match insn & 0x7f {
            OPCODE_LOAD => counts.mem_reads += 1,
            OPCODE_STORE => counts.mem_writes += 1,
            _ => {}
        }
        if outcome == Err(InstructionException::StoreAccessFault(HALT_PORT)) {
            break;
        }
        outcome.unwrap();
        counts.reg_writes += before
            .iter()
            .zip(&executor.hart_state.registers)
            .filter(|(old, new)| old != new)
            .count() as u64;
        if executor.hart_state.pc != pc + 4 {
            counts.branches += 1;
        }
    }
    let answers = Answers {
        primes: memory.mem[(RESULT_PRIMES / 4) as usize],
        checksum: memory.mem[(RESULT_CHECKSUM / 4) as usize],
    };
    (counts, answers)
}

#[test]
fn the_counting_machine_counts_what_an_independent_count_finds() {
    let (reference, answers) = reference_counts();
    assert_eq!(answers, Answers::expected());
    let mut machine = Machine::<true>::new().unwrap();
    for _ in 0..2 {
        // Each run starts afresh: the same counts every time.
        assert_eq!(machine.run().unwrap().counts, reference);
    }
    // The guest does real work of each kind.
    assert!(reference.instructions > 100_000, "{reference:?}");
    assert!(
        reference.mem_reads > reference.instructions,
        "{reference:?}"
    );
    assert!(reference.mem_writes > 10_000, "{reference:?}");
    assert!(reference.branches > 10_000, "{reference:?}");
}
