//! Real 6502 programs, hand-assembled (the assembly is beside the bytes).
//!
//! Every program enables interrupts, so the timer IRQ handler at `$0F00`
//! runs throughout, and ends by writing its exit code to the halt port.

use crate::bus::DemoBus;

/// A program: its code at `origin` and any data it starts with.
pub struct Program {
    pub name: &'static str,
    pub origin: u16,
    pub code: &'static [u8],
    /// Bytes to place before it starts (address, bytes).
    pub data: fn() -> Vec<(u16, Vec<u8>)>,
}

pub const IRQ_HANDLER: u16 = 0x0f00;
/// Zero-page byte the IRQ handler counts ticks in.
pub const TICKS: u16 = 0x00ff;

#[rustfmt::skip]
const IRQ_HANDLER_CODE: &[u8] = &[
    0x48,             // PHA
    0xE6, 0xFF,       // INC $FF        ; count the tick
    0x8D, 0x02, 0xF0, // STA $F002      ; acknowledge the timer
    0x68,             // PLA
    0x40,             // RTI
];

impl Program {
    /// Places code, data, the IRQ handler and both vectors in memory.
    pub fn load(&self, bus: &mut DemoBus) {
        bus.poke(self.origin, self.code);
        for (address, bytes) in (self.data)() {
            bus.poke(address, &bytes);
        }
        bus.poke(IRQ_HANDLER, IRQ_HANDLER_CODE);
        bus.poke(TICKS, &[0]);
        bus.poke(0xfffc, &self.origin.to_le_bytes());
        bus.poke(0xfffe, &IRQ_HANDLER.to_le_bytes());
    }

    pub fn by_name(name: &str) -> Option<&'static Program> {
        ALL.iter().find(|p| p.name == name)
    }
}

pub const ALL: &[Program] = &[SIEVE, SORT, FIB];

/// Sieve of Eratosthenes: writes every prime below 256 to the output port.
/// Flags live at $0200-$02FF (0: still a candidate).
#[rustfmt::skip]
pub const SIEVE: Program = Program {
    name: "sieve",
    origin: 0x0800,
    code: &[
        0x58,             // 0800       CLI
        0xA9, 0x00,       // 0801       LDA #0
        0xAA,             // 0803       TAX
        0x9D, 0x00, 0x02, // 0804 clr:  STA $0200,X
        0xE8,             // 0807       INX
        0xD0, 0xFA,       // 0808       BNE clr
        0xA2, 0x02,       // 080A       LDX #2
        0xBD, 0x00, 0x02, // 080C outer:LDA $0200,X
        0xD0, 0x15,       // 080F       BNE next        ; marked: not prime
        0x8E, 0x01, 0xF0, // 0811       STX $F001       ; print the prime
        0x8A,             // 0814       TXA
        0x86, 0x10,       // 0815       STX $10         ; p
        0x18,             // 0817 mark: CLC
        0x65, 0x10,       // 0818       ADC $10         ; j += p
        0xB0, 0x0A,       // 081A       BCS next        ; past 255
        0xA8,             // 081C       TAY
        0xA9, 0x01,       // 081D       LDA #1
        0x99, 0x00, 0x02, // 081F       STA $0200,Y     ; mark j
        0x98,             // 0822       TYA
        0x4C, 0x17, 0x08, // 0823       JMP mark
        0xE8,             // 0826 next: INX
        0xD0, 0xE3,       // 0827       BNE outer
        0xA9, 0x00,       // 0829       LDA #0
        0x8D, 0x00, 0xF0, // 082B       STA $F000       ; halt, exit code 0
    ],
    data: Vec::new,
};

/// Bubble sort of 64 bytes at $0300, with the compare-and-swap in a
/// subroutine. Exit code: 0.
#[rustfmt::skip]
pub const SORT: Program = Program {
    name: "sort",
    origin: 0x0900,
    code: &[
        0x58,             // 0900       CLI
        0xA9, 0x00,       // 0901 pass: LDA #0
        0x85, 0x20,       // 0903       STA $20         ; swapped = 0
        0xA2, 0x00,       // 0905       LDX #0
        0x20, 0x20, 0x09, // 0907 inner:JSR cmpswap
        0xE8,             // 090A       INX
        0xE0, 0x3F,       // 090B       CPX #63
        0xD0, 0xF8,       // 090D       BNE inner
        0xA5, 0x20,       // 090F       LDA $20
        0xD0, 0xEE,       // 0911       BNE pass        ; until a pass swaps nothing
        0xA9, 0x00,       // 0913       LDA #0
        0x8D, 0x00, 0xF0, // 0915       STA $F000       ; halt
        0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, // 0918 NOP padding
        0xBD, 0x00, 0x03, // 0920 cmpswap: LDA $0300,X
        0xDD, 0x01, 0x03, // 0923       CMP $0301,X
        0x90, 0x0F,       // 0926       BCC done        ; a[x] < a[x+1]
        0xF0, 0x0D,       // 0928       BEQ done
        0xA8,             // 092A       TAY
        0xBD, 0x01, 0x03, // 092B       LDA $0301,X
        0x9D, 0x00, 0x03, // 092E       STA $0300,X
        0x98,             // 0931       TYA
        0x9D, 0x01, 0x03, // 0932       STA $0301,X
        0xE6, 0x20,       // 0935       INC $20         ; swapped
        0x60,             // 0937 done: RTS
    ],
    data: sort_input,
};

/// 64 pseudo-random bytes (a fixed LCG), the sort's input.
pub fn sort_input() -> Vec<(u16, Vec<u8>)> {
    let mut state: u32 = 0x1234_5678;
    let bytes = (0..64)
        .map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (state >> 16) as u8
        })
        .collect();
    vec![(SORT_ARRAY, bytes)]
}

pub const SORT_ARRAY: u16 = 0x0300;

/// 16-bit Fibonacci numbers F(0).. as little-endian words at $0400, until the
/// next one overflows 16 bits; the addition is a subroutine. Prints each new
/// index - 1; exit code: 23 (half the table offset where F(25) overflowed).
#[rustfmt::skip]
pub const FIB: Program = Program {
    name: "fib",
    origin: 0x0a00,
    code: &[
        0x58,             // 0A00       CLI
        0xA9, 0x00,       // 0A01       LDA #0
        0x8D, 0x00, 0x04, // 0A03       STA $0400       ; F0 = 0
        0x8D, 0x01, 0x04, // 0A06       STA $0401
        0x8D, 0x03, 0x04, // 0A09       STA $0403
        0xA9, 0x01,       // 0A0C       LDA #1
        0x8D, 0x02, 0x04, // 0A0E       STA $0402       ; F1 = 1
        0xA2, 0x00,       // 0A11       LDX #0          ; offset of F(n-2)
        0x20, 0x30, 0x0A, // 0A13 loop: JSR add16
        0xB0, 0x0B,       // 0A16       BCS done        ; F(n) overflowed
        0xE8,             // 0A18       INX
        0xE8,             // 0A19       INX
        0x8A,             // 0A1A       TXA
        0x4A,             // 0A1B       LSR A
        0x8D, 0x01, 0xF0, // 0A1C       STA $F001
        0x4C, 0x13, 0x0A, // 0A1F       JMP loop
        0xEA,             // 0A22       NOP
        0x8A,             // 0A23 done: TXA
        0x4A,             // 0A24       LSR A
        0x8D, 0x00, 0xF0, // 0A25       STA $F000       ; halt
        0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, 0xEA, // 0A28 NOP padding
        0x18,             // 0A30 add16:CLC
        0xBD, 0x00, 0x04, // 0A31       LDA $0400,X
        0x7D, 0x02, 0x04, // 0A34       ADC $0402,X
        0x9D, 0x04, 0x04, // 0A37       STA $0404,X
        0xBD, 0x01, 0x04, // 0A3A       LDA $0401,X
        0x7D, 0x03, 0x04, // 0A3D       ADC $0403,X
        0x9D, 0x05, 0x04, // 0A40       STA $0405,X     ; carry: overflow
        0x60,             // 0A43       RTS
    ],
    data: Vec::new,
};

pub const FIB_TABLE: u16 = 0x0400;
