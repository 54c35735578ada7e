//! Real 6502 programs, hand-assembled (the assembly is beside the bytes).
//!
//! Every program enables interrupts, so the timer IRQ handler at `$0F00`
//! runs throughout, and ends by writing its exit code to the halt port.
//!
//! Memory use: zero page `$10-$41` (each program its own), the tick count at
//! `$FF`; data at `$0200-$06FF`; code at `$0800-$0BFF` and `$0F00`.

use crate::bus::DemoBus;
use mos6502::memory::{IRQ_INTERRUPT_VECTOR_LO, RESET_VECTOR_LO};

/// A program: its code at `origin` and any data it starts with.
pub struct Program {
    /// What the CLI calls it.
    pub name: &'static str,
    /// Where its code goes; the reset vector points here.
    pub origin: u16,
    /// Machine code.
    pub code: &'static [u8],
    /// Bytes to place before it starts (address, bytes).
    pub data: fn() -> Vec<(u16, Vec<u8>)>,
}

/// Where the IRQ handler is.
pub const IRQ_HANDLER: u16 = 0x0f00;
/// Zero-page byte the IRQ handler counts timer ticks in.
pub const TICKS: u16 = 0x00ff;

#[rustfmt::skip]
const IRQ_HANDLER_CODE: &[u8] = &[
    0x48,             // 0F00  PHA
    0xE6, 0xFF,       // 0F01  INC $FF        ; count the tick
    0x8D, 0x02, 0xF0, // 0F03  STA $F002      ; acknowledge the timer
    0x68,             // 0F06  PLA
    0x40,             // 0F07  RTI
];

impl Program {
    /// Places code, data, the IRQ handler, a zero tick count and both vectors in memory.
    pub fn load(&self, bus: &mut DemoBus) {
        bus.poke(self.origin, self.code);
        for (address, bytes) in (self.data)() {
            bus.poke(address, &bytes);
        }
        bus.poke(IRQ_HANDLER, IRQ_HANDLER_CODE);
        bus.poke(TICKS, &[0]);
        bus.poke(RESET_VECTOR_LO, &self.origin.to_le_bytes());
        bus.poke(IRQ_INTERRUPT_VECTOR_LO, &IRQ_HANDLER.to_le_bytes());
    }

    /// The program called `name`.
    pub fn by_name(name: &str) -> Option<&'static Program> {
        ALL.iter().find(|p| p.name == name)
    }
}

/// Every program, in the order `--program all` runs them.
pub const ALL: &[Program] = &[SIEVE, SORT, FIB, SQUARES];

/// Sieve of Eratosthenes: writes every prime below 256 to the output port.
/// Flags live at `$0200-$02FF` (0: still a candidate). Exit code 0.
#[rustfmt::skip]
pub const SIEVE: Program = Program {
    name: "sieve",
    origin: 0x0800,
    code: &[
        0x58,             // 0800        CLI
        0xA9, 0x00,       // 0801        LDA #0
        0xAA,             // 0803        TAX
        0x9D, 0x00, 0x02, // 0804 clr:   STA $0200,X
        0xE8,             // 0807        INX
        0xD0, 0xFA,       // 0808        BNE clr
        0xA2, 0x02,       // 080A        LDX #2
        0xBD, 0x00, 0x02, // 080C outer: LDA $0200,X
        0xD0, 0x15,       // 080F        BNE next        ; marked: not prime
        0x8E, 0x01, 0xF0, // 0811        STX $F001       ; print the prime
        0x8A,             // 0814        TXA             ; j = p
        0x86, 0x10,       // 0815        STX $10         ; p
        0x18,             // 0817 mark:  CLC
        0x65, 0x10,       // 0818        ADC $10         ; j += p
        0xB0, 0x0A,       // 081A        BCS next        ; past 255
        0xA8,             // 081C        TAY
        0xA9, 0x01,       // 081D        LDA #1
        0x99, 0x00, 0x02, // 081F        STA $0200,Y     ; mark j
        0x98,             // 0822        TYA
        0x4C, 0x17, 0x08, // 0823        JMP mark
        0xE8,             // 0826 next:  INX
        0xD0, 0xE3,       // 0827        BNE outer
        0xA9, 0x00,       // 0829        LDA #0
        0x8D, 0x00, 0xF0, // 082B        STA $F000       ; halt, exit code 0
    ],
    data: Vec::new,
};

/// Bubble sort of the 64 bytes at [`SORT_ARRAY`] (from [`sort_input`]), the
/// compare-and-swap a subroutine; then prints the sorted array. Exit code 0.
#[rustfmt::skip]
pub const SORT: Program = Program {
    name: "sort",
    origin: 0x0900,
    code: &[
        0x58,             // 0900          CLI
        0xA9, 0x00,       // 0901 pass:    LDA #0
        0x85, 0x20,       // 0903          STA $20         ; swapped = 0
        0xA2, 0x00,       // 0905          LDX #0
        0x20, 0x25, 0x09, // 0907 inner:   JSR cmpswap     ; order a[x], a[x+1]
        0xE8,             // 090A          INX
        0xE0, 0x3F,       // 090B          CPX #63
        0xD0, 0xF8,       // 090D          BNE inner
        0xA5, 0x20,       // 090F          LDA $20
        0xD0, 0xEE,       // 0911          BNE pass        ; until a pass swaps nothing
        0xA2, 0x00,       // 0913          LDX #0
        0xBD, 0x00, 0x03, // 0915 print:   LDA $0300,X
        0x8D, 0x01, 0xF0, // 0918          STA $F001
        0xE8,             // 091B          INX
        0xE0, 0x40,       // 091C          CPX #64
        0xD0, 0xF5,       // 091E          BNE print
        0xA9, 0x00,       // 0920          LDA #0
        0x8D, 0x00, 0xF0, // 0922          STA $F000       ; halt, exit code 0
        0xBD, 0x00, 0x03, // 0925 cmpswap: LDA $0300,X
        0xDD, 0x01, 0x03, // 0928          CMP $0301,X
        0x90, 0x0F,       // 092B          BCC done        ; a[x] < a[x+1]
        0xF0, 0x0D,       // 092D          BEQ done
        0xA8,             // 092F          TAY
        0xBD, 0x01, 0x03, // 0930          LDA $0301,X
        0x9D, 0x00, 0x03, // 0933          STA $0300,X
        0x98,             // 0936          TYA
        0x9D, 0x01, 0x03, // 0937          STA $0301,X
        0xE6, 0x20,       // 093A          INC $20         ; swapped
        0x60,             // 093C done:    RTS
    ],
    data: sort_input,
};

/// Where the sort's array is.
pub const SORT_ARRAY: u16 = 0x0300;

/// 64 pseudo-random bytes (a fixed linear congruential generator): the sort's input.
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

/// 16-bit Fibonacci numbers F(0), F(1), … as little-endian words at
/// [`FIB_TABLE`] until the next one overflows 16 bits; the addition is a
/// subroutine. Prints each new F(n)'s low byte; the exit code is the last n
/// that fits (24).
#[rustfmt::skip]
pub const FIB: Program = Program {
    name: "fib",
    origin: 0x0a00,
    code: &[
        0x58,             // 0A00        CLI
        0xA9, 0x00,       // 0A01        LDA #0
        0x8D, 0x00, 0x04, // 0A03        STA $0400       ; F(0) = 0
        0x8D, 0x01, 0x04, // 0A06        STA $0401
        0x8D, 0x03, 0x04, // 0A09        STA $0403
        0xA9, 0x01,       // 0A0C        LDA #1
        0x8D, 0x02, 0x04, // 0A0E        STA $0402       ; F(1) = 1
        0x85, 0x12,       // 0A11        STA $12         ; n = 1, the last one stored
        0xA2, 0x00,       // 0A13        LDX #0          ; X = 2(n-1): offset of F(n-1)
        0x20, 0x2B, 0x0A, // 0A15 loop:  JSR add16       ; F(n+1) = F(n-1) + F(n)
        0xB0, 0x0C,       // 0A18        BCS done        ; it overflowed
        0xE6, 0x12,       // 0A1A        INC $12         ; n += 1
        0xBD, 0x04, 0x04, // 0A1C        LDA $0404,X
        0x8D, 0x01, 0xF0, // 0A1F        STA $F001       ; print F(n)'s low byte
        0xE8,             // 0A22        INX
        0xE8,             // 0A23        INX
        0xD0, 0xEF,       // 0A24        BNE loop        ; always: X stays below 256
        0xA5, 0x12,       // 0A26 done:  LDA $12
        0x8D, 0x00, 0xF0, // 0A28        STA $F000       ; halt, exit code n
        0x18,             // 0A2B add16: CLC             ; $0404,X = $0400,X + $0402,X
        0xBD, 0x00, 0x04, // 0A2C        LDA $0400,X
        0x7D, 0x02, 0x04, // 0A2F        ADC $0402,X
        0x9D, 0x04, 0x04, // 0A32        STA $0404,X
        0xBD, 0x01, 0x04, // 0A35        LDA $0401,X
        0x7D, 0x03, 0x04, // 0A38        ADC $0403,X
        0x9D, 0x05, 0x04, // 0A3B        STA $0405,X     ; carry out: overflow
        0x60,             // 0A3E        RTS
    ],
    data: Vec::new,
};

/// Where the Fibonacci table is.
pub const FIB_TABLE: u16 = 0x0400;

/// n² for n = 0..=255 as little-endian words at [`SQUARES_TABLE`], each from
/// a shift-and-add 8×8-bit multiply subroutine, stored through a zero-page
/// pointer (`STA ($40),Y`). Prints each square's low byte. Exit code 0.
#[rustfmt::skip]
pub const SQUARES: Program = Program {
    name: "squares",
    origin: 0x0b00,
    code: &[
        0x58,             // 0B00        CLI
        0xA9, 0x00,       // 0B01        LDA #$00
        0x85, 0x40,       // 0B03        STA $40
        0xA9, 0x05,       // 0B05        LDA #$05
        0x85, 0x41,       // 0B07        STA $41         ; ptr = $0500
        0xA0, 0x00,       // 0B09        LDY #0          ; n
        0x84, 0x30,       // 0B0B loop:  STY $30
        0x84, 0x31,       // 0B0D        STY $31
        0x20, 0x37, 0x0B, // 0B0F        JSR mul8        ; $32/$33 = n * n
        0x98,             // 0B12        TYA
        0x48,             // 0B13        PHA             ; keep n
        0xA0, 0x00,       // 0B14        LDY #0
        0xA5, 0x32,       // 0B16        LDA $32
        0x91, 0x40,       // 0B18        STA ($40),Y     ; low byte
        0x8D, 0x01, 0xF0, // 0B1A        STA $F001       ; print it
        0xC8,             // 0B1D        INY
        0xA5, 0x33,       // 0B1E        LDA $33
        0x91, 0x40,       // 0B20        STA ($40),Y     ; high byte
        0x18,             // 0B22        CLC
        0xA5, 0x40,       // 0B23        LDA $40
        0x69, 0x02,       // 0B25        ADC #2
        0x85, 0x40,       // 0B27        STA $40         ; ptr += 2
        0x90, 0x02,       // 0B29        BCC same
        0xE6, 0x41,       // 0B2B        INC $41         ; next page
        0x68,             // 0B2D same:  PLA
        0xA8,             // 0B2E        TAY
        0xC8,             // 0B2F        INY
        0xD0, 0xD9,       // 0B30        BNE loop        ; until n wraps to 0
        0xA9, 0x00,       // 0B32        LDA #0
        0x8D, 0x00, 0xF0, // 0B34        STA $F000       ; halt, exit code 0
        0xA9, 0x00,       // 0B37 mul8:  LDA #0          ; $32/$33 = $30 * $31; X, $31 lost
        0x85, 0x32,       // 0B39        STA $32
        0x85, 0x33,       // 0B3B        STA $33
        0xA2, 0x08,       // 0B3D        LDX #8
        0x06, 0x32,       // 0B3F mloop: ASL $32
        0x26, 0x33,       // 0B41        ROL $33         ; product <<= 1
        0x06, 0x31,       // 0B43        ASL $31         ; next multiplier bit, high first
        0x90, 0x0B,       // 0B45        BCC mskip
        0x18,             // 0B47        CLC
        0xA5, 0x32,       // 0B48        LDA $32
        0x65, 0x30,       // 0B4A        ADC $30
        0x85, 0x32,       // 0B4C        STA $32         ; product += multiplicand
        0x90, 0x02,       // 0B4E        BCC mskip
        0xE6, 0x33,       // 0B50        INC $33
        0xCA,             // 0B52 mskip: DEX
        0xD0, 0xEA,       // 0B53        BNE mloop
        0x60,             // 0B55        RTS
    ],
    data: Vec::new,
};

/// Where the squares' table is.
pub const SQUARES_TABLE: u16 = 0x0500;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::opcodes::OpTable;

    /// The address comments beside the bytes are what the branches and
    /// jumps were computed from: check they match where each instruction lands.
    #[test]
    fn instructions_are_laid_out_as_commented() {
        let table = OpTable::nmos();
        for program in ALL {
            let mut offset = 0;
            let mut starts = Vec::new();
            while offset < program.code.len() {
                starts.push(program.origin + offset as u16);
                offset += usize::from(table.get(program.code[offset]).len);
            }
            assert_eq!(
                offset,
                program.code.len(),
                "{}: last instruction cut",
                program.name
            );
            // Every branch target is an instruction start inside the program.
            for &at in &starts {
                let i = usize::from(at - program.origin);
                let opcode = program.code[i];
                let next = at + u16::from(table.get(opcode).len);
                if opcode & 0x1f == 0x10 {
                    let target = next.wrapping_add(program.code[i + 1] as i8 as u16);
                    assert!(
                        starts.contains(&target),
                        "{}: branch at {at:#06x}",
                        program.name
                    );
                }
                if opcode == 0x20 || opcode == 0x4c {
                    let target = u16::from_le_bytes([program.code[i + 1], program.code[i + 2]]);
                    assert!(
                        starts.contains(&target),
                        "{}: jump at {at:#06x}",
                        program.name
                    );
                }
            }
        }
    }
}
