//! The guest program, written here for the [`asm`](crate::asm) encoder: a
//! prime sieve (bytes), a pseudo-random table sorted by insertion sort
//! (halfwords, a call per element, a stack frame), and an FNV-1a checksum of
//! the sorted table (bytes, multiplies). Its answers land in RAM at
//! [`RESULT_PRIMES`] and [`RESULT_CHECKSUM`]; [`Answers::expected`] computes
//! them on the host, independently, to check every run.

use crate::asm::{AsmError, Assembler};
use crate::bus::{HALT_PORT, RAM_SIZE};
use crate::registers::*;

/// Where the program is loaded and starts.
pub const ENTRY: u32 = 0x0000;
/// The sieve's flags, a byte per number below [`SIEVE_LIMIT`].
pub const SIEVE_FLAGS: u32 = 0x4000;
pub const SIEVE_LIMIT: u32 = 4096;
/// The table sorted: [`TABLE_LEN`] halfwords.
pub const TABLE: u32 = 0x6000;
pub const TABLE_LEN: u32 = 200;
/// The table's pseudo-random generator: `x = x * A + C`, each entry `x >> 16`.
pub const LCG_SEED: u32 = 2024;
pub const LCG_A: u32 = 1_103_515_245;
pub const LCG_C: u32 = 12345;
/// FNV-1a (32-bit) parameters.
pub const FNV_OFFSET: u32 = 0x811c_9dc5;
pub const FNV_PRIME: u32 = 0x0100_0193;
/// The word the number of primes below [`SIEVE_LIMIT`] is stored to.
pub const RESULT_PRIMES: u32 = 0x7000;
/// The word the checksum of the sorted table is stored to.
pub const RESULT_CHECKSUM: u32 = 0x7004;
/// The stack grows down from the top of RAM.
pub const STACK_TOP: u32 = RAM_SIZE;

/// What a run computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Answers {
    pub primes: u32,
    pub checksum: u32,
}

impl Answers {
    /// The answers, computed on the host the plain way.
    pub fn expected() -> Answers {
        let limit = SIEVE_LIMIT as usize;
        let mut composite = vec![false; limit];
        let mut primes = 0;
        for n in 2..limit {
            if !composite[n] {
                primes += 1;
                (n * n..limit).step_by(n).for_each(|m| composite[m] = true);
            }
        }
        let mut x = LCG_SEED;
        let mut table: Vec<u16> = (0..TABLE_LEN)
            .map(|_| {
                x = x.wrapping_mul(LCG_A).wrapping_add(LCG_C);
                (x >> 16) as u16
            })
            .collect();
        table.sort_unstable();
        let checksum = table
            .iter()
            .flat_map(|h| h.to_le_bytes())
            .fold(FNV_OFFSET, |hash, byte| {
                (hash ^ u32::from(byte)).wrapping_mul(FNV_PRIME)
            });
        Answers { primes, checksum }
    }
}

/// The program's bytes, to load at [`ENTRY`]. Longer than 80 lines: it is
/// the guest program's listing, an instruction a line, read top to bottom.
pub fn image() -> Result<Vec<u8>, AsmError> {
    let mut a = Assembler::new(ENTRY);

    // main: each part in turn, its answers stored, then halt with exit code 0.
    a.li(SP, STACK_TOP);
    a.call("sieve");
    a.li(T0, RESULT_PRIMES);
    a.sw(A0, 0, T0);
    a.call("fill");
    a.call("sort");
    a.call("checksum");
    a.li(T0, RESULT_CHECKSUM);
    a.sw(A0, 0, T0);
    a.li(T0, HALT_PORT);
    a.sw(ZERO, 0, T0);
    a.label("hang");
    a.j("hang");

    // sieve() -> a0: the number of primes below SIEVE_LIMIT.
    a.label("sieve");
    a.li(T0, SIEVE_FLAGS);
    a.li(T1, SIEVE_LIMIT);
    a.li(T5, 1);
    a.mv(T2, ZERO);
    a.label("sieve_set");
    a.add(T3, T0, T2);
    a.sb(T5, 0, T3);
    a.addi(T2, T2, 1);
    a.blt(T2, T1, "sieve_set");
    a.sb(ZERO, 0, T0);
    a.sb(ZERO, 1, T0);
    a.li(T2, 2);
    a.label("sieve_outer");
    a.mul(T3, T2, T2);
    a.bge(T3, T1, "sieve_count");
    a.add(T4, T0, T2);
    a.lbu(T4, 0, T4);
    a.beq(T4, ZERO, "sieve_next");
    a.label("sieve_strike");
    a.add(T4, T0, T3);
    a.sb(ZERO, 0, T4);
    a.add(T3, T3, T2);
    a.blt(T3, T1, "sieve_strike");
    a.label("sieve_next");
    a.addi(T2, T2, 1);
    a.j("sieve_outer");
    a.label("sieve_count");
    a.mv(A0, ZERO);
    a.mv(T2, ZERO);
    a.label("sieve_sum");
    a.add(T4, T0, T2);
    a.lbu(T4, 0, T4);
    a.add(A0, A0, T4);
    a.addi(T2, T2, 1);
    a.blt(T2, T1, "sieve_sum");
    a.ret();

    // fill(): TABLE[i] = the LCG's next value >> 16.
    a.label("fill");
    a.li(T0, TABLE);
    a.li(T1, TABLE_LEN);
    a.li(T2, LCG_SEED);
    a.li(T3, LCG_A);
    a.li(T4, LCG_C);
    a.mv(T5, ZERO);
    a.label("fill_next");
    a.mul(T2, T2, T3);
    a.add(T2, T2, T4);
    a.srli(T6, T2, 16);
    a.sh(T6, 0, T0);
    a.addi(T0, T0, 2);
    a.addi(T5, T5, 1);
    a.blt(T5, T1, "fill_next");
    a.ret();

    // sort(): insertion sort of TABLE, ascending; calls insert(i) for each i.
    a.label("sort");
    a.addi(SP, SP, -16);
    a.sw(RA, 12, SP);
    a.sw(S0, 8, SP);
    a.sw(S1, 4, SP);
    a.li(S0, 1);
    a.li(S1, TABLE_LEN);
    a.label("sort_next");
    a.bge(S0, S1, "sort_done");
    a.mv(A0, S0);
    a.call("insert");
    a.addi(S0, S0, 1);
    a.j("sort_next");
    a.label("sort_done");
    a.lw(RA, 12, SP);
    a.lw(S0, 8, SP);
    a.lw(S1, 4, SP);
    a.addi(SP, SP, 16);
    a.ret();

    // insert(a0 = i): moves TABLE[i] down into the sorted TABLE[..i].
    a.label("insert");
    a.li(T0, TABLE);
    a.slli(T1, A0, 1);
    a.add(T1, T0, T1);
    a.lhu(T2, 0, T1);
    a.label("insert_scan");
    a.beq(T1, T0, "insert_put");
    a.lhu(T3, -2, T1);
    a.bgeu(T2, T3, "insert_put");
    a.sh(T3, 0, T1);
    a.addi(T1, T1, -2);
    a.j("insert_scan");
    a.label("insert_put");
    a.sh(T2, 0, T1);
    a.ret();

    // checksum() -> a0: FNV-1a over TABLE's bytes.
    a.label("checksum");
    a.li(T0, TABLE);
    a.li(T1, TABLE + 2 * TABLE_LEN);
    a.li(A0, FNV_OFFSET);
    a.li(T2, FNV_PRIME);
    a.label("checksum_next");
    a.lbu(T3, 0, T0);
    a.xor(A0, A0, T3);
    a.mul(A0, A0, T2);
    a.addi(T0, T0, 1);
    a.bltu(T0, T1, "checksum_next");
    a.ret();

    a.finish()
}
