//! The RV32I integer registers by their ABI names. Their numbers are the
//! architectural ones (`x0`–`x31`), which `reg_write` events carry and
//! `describe!` in `main.rs` names.

/// An integer register, `x0`–`x31`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reg(pub u8);

macro_rules! registers {
    ($($name:ident = $number:literal),* $(,)?) => {
        $(pub const $name: Reg = Reg($number);)*
    };
}

registers! {
    ZERO = 0, RA = 1, SP = 2, GP = 3, TP = 4, T0 = 5, T1 = 6, T2 = 7,
    S0 = 8, S1 = 9, A0 = 10, A1 = 11, A2 = 12, A3 = 13, A4 = 14, A5 = 15,
    A6 = 16, A7 = 17, S2 = 18, S3 = 19, S4 = 20, S5 = 21, S6 = 22, S7 = 23,
    S8 = 24, S9 = 25, S10 = 26, S11 = 27, T3 = 28, T4 = 29, T5 = 30, T6 = 31,
}

// The guest, for tracers: the 32 integer registers by the numbers
// `reg_write` reports, and RAM as one image (for drcov coverage). Here in
// the library, not the binary: every program built on this machine gets
// the names (the e2e tests see them through the styx-rv binary).
styx_probe::describe! {
    arch: "rv32im",
    pc: "pc",
    registers: [
        ("zero", crate::registers::ZERO.0, 32),
        ("ra", crate::registers::RA.0, 32),
        ("sp", crate::registers::SP.0, 32),
        ("gp", crate::registers::GP.0, 32),
        ("tp", crate::registers::TP.0, 32),
        ("t0", crate::registers::T0.0, 32),
        ("t1", crate::registers::T1.0, 32),
        ("t2", crate::registers::T2.0, 32),
        ("s0", crate::registers::S0.0, 32),
        ("s1", crate::registers::S1.0, 32),
        ("a0", crate::registers::A0.0, 32),
        ("a1", crate::registers::A1.0, 32),
        ("a2", crate::registers::A2.0, 32),
        ("a3", crate::registers::A3.0, 32),
        ("a4", crate::registers::A4.0, 32),
        ("a5", crate::registers::A5.0, 32),
        ("a6", crate::registers::A6.0, 32),
        ("a7", crate::registers::A7.0, 32),
        ("s2", crate::registers::S2.0, 32),
        ("s3", crate::registers::S3.0, 32),
        ("s4", crate::registers::S4.0, 32),
        ("s5", crate::registers::S5.0, 32),
        ("s6", crate::registers::S6.0, 32),
        ("s7", crate::registers::S7.0, 32),
        ("s8", crate::registers::S8.0, 32),
        ("s9", crate::registers::S9.0, 32),
        ("s10", crate::registers::S10.0, 32),
        ("s11", crate::registers::S11.0, 32),
        ("t3", crate::registers::T3.0, 32),
        ("t4", crate::registers::T4.0, 32),
        ("t5", crate::registers::T5.0, 32),
        ("t6", crate::registers::T6.0, 32),
    ],
    images: [("rv32-ram", 0, crate::bus::RAM_SIZE as u64)],
}
