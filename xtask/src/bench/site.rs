//! What a detached probe runs, read from the binary rather than timed:
//! styx-bench's `mem_read!` site in its tight loop (the 1-byte-nop site of
//! `styx:mem_read`), disassembled from the load of its semaphore word to
//! the branch that skips the probe while nobody traces.
//!
//! The site and its semaphore come from `styx-loader list`; `objdump -d`
//! gives the instructions, `objdump -R` the GOT slots (a static of another
//! crate is reached through one in a position-independent executable).

use super::Binaries;
use anyhow::{bail, Context, Result};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The detached path of the measured probe.
#[derive(Default)]
pub struct Detached {
    /// The probe site's address and its semaphore word's.
    pub site: u64,
    pub semaphore: u64,
    /// The instructions from the first that leads to the semaphore (its
    /// load, or the load of its address) to the conditional branch, as
    /// objdump prints them: `addr: instruction`.
    pub listing: Vec<String>,
    /// The load of the semaphore's address from the GOT, when the compiler
    /// hoisted it out of the loop.
    pub hoisted: Option<String>,
    /// Loads of memory on that path, the semaphore word's included.
    pub loads: usize,
    /// Whether the semaphore is read as a 32-bit word.
    pub word_32: bool,
    /// The conditional branch's mnemonic (`je`: taken while detached), and
    /// whether it jumps back (to the loop's head) rather than forward.
    pub branch: String,
    pub branch_backward: bool,
    /// Why there is no listing, if there is none.
    pub problem: Option<String>,
}

impl Detached {
    /// Whether the path is one load of the 32-bit word (after, at most,
    /// the load of its address from the GOT), a test and one conditional
    /// branch.
    pub fn as_intended(&self) -> bool {
        let got = usize::from(self.hoisted.is_none() && self.loads == 2);
        self.problem.is_none()
            && self.word_32
            && self.loads == 1 + got
            && self.listing.len() <= 3 + got
    }
}

/// Reads the detached path from styx-bench; a failure to read it is
/// reported in the result rather than stopping the benchmark.
pub fn detached(bins: &Binaries) -> Result<Detached> {
    Ok(
        read(&bins.loader, &bins.bench).unwrap_or_else(|e| Detached {
            problem: Some(format!("{e:#}")),
            ..Detached::default()
        }),
    )
}

fn read(loader: &Path, binary: &Path) -> Result<Detached> {
    let sites = sites(loader, binary)?;
    // The styx-probe site is a 1-byte `nop`; the other is styx-bench's
    // 5-byte one.
    let mut chosen = None;
    for (site, semaphore) in sites {
        let text = disassemble(binary, site, site + 1)?;
        if text.iter().any(|(a, i)| *a == site && i.trim() == "nop") {
            chosen = Some((site, semaphore));
        }
    }
    let (site, semaphore) = chosen.context("no 1-byte-nop styx:mem_read site in styx-bench")?;
    let slots = got_slots(binary, semaphore)?;
    let function = function_start(binary, site)?;
    // The site sits in a function of the call site's own; the function
    // that refers to it (the loop: it may have hoisted the load of its
    // address) holds the check, read to its end. (A site inlined into the
    // loop, as styx-probe once wrote them, is read up to the site itself.)
    let (function, until) = match reference_to(binary, function)? {
        Some(caller) => (caller, function_end(binary, caller)?),
        None => (function, site),
    };
    let code = disassemble(binary, function, until + 1)?;
    let path = path_to_branch(&code, until, semaphore, &slots)
        .with_context(|| format!("no load of the semaphore {semaphore:#x} before {until:#x}"))?;
    Ok(Detached {
        site,
        semaphore,
        listing: path.listing,
        hoisted: path.hoisted,
        loads: path.loads,
        word_32: path.word_32,
        branch: path.branch,
        branch_backward: path.backward,
        problem: None,
    })
}

/// `styx:mem_read` sites and their semaphores, as `styx-loader list` prints
/// them (`    0x2763c  semaphore 0x8e048  8@%rdi …`).
fn sites(loader: &Path, binary: &Path) -> Result<Vec<(u64, u64)>> {
    let out = output(
        Command::new(loader)
            .arg("list")
            .arg(binary)
            .arg("styx:mem_read"),
    )?;
    let sites: Vec<(u64, u64)> = out
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let site = hex(words.next()?)?;
            (words.next()? == "semaphore").then_some(())?;
            Some((site, hex(words.next()?)?))
        })
        .collect();
    if sites.is_empty() {
        bail!(
            "styx-loader list found no styx:mem_read site in {}",
            binary.display()
        );
    }
    Ok(sites)
}

/// GOT slots the dynamic loader fills with `semaphore`'s address.
fn got_slots(binary: &Path, semaphore: u64) -> Result<BTreeSet<u64>> {
    let out = output(Command::new("objdump").arg("-R").arg(binary))?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let slot = u64::from_str_radix(words.next()?, 16).ok()?;
            (words.next()? == "R_X86_64_RELATIVE").then_some(())?;
            let target = hex(words.next()?.strip_prefix("*ABS*+")?)?;
            (target == semaphore).then_some(slot)
        })
        .collect())
}

/// The start of the function `address` is in: the nearest text symbol at
/// or below it.
fn function_start(binary: &Path, address: u64) -> Result<u64> {
    text_symbols(binary)?
        .into_iter()
        .filter(|&at| at <= address)
        .max()
        .context("no text symbol below the site")
}

/// The addresses of the text symbols, as `nm` lists them.
fn text_symbols(binary: &Path) -> Result<Vec<u64>> {
    let out = output(Command::new("nm").arg(binary))?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            let at = u64::from_str_radix(words.next()?, 16).ok()?;
            matches!(words.next()?, "t" | "T").then_some(at)
        })
        .collect())
}

/// The start of the function holding the first instruction that refers to
/// `function` (a call, or the load of its address).
fn reference_to(binary: &Path, function: u64) -> Result<Option<u64>> {
    let out = output(
        Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(binary),
    )?;
    let target = format!("{function:x} <");
    let at = out.lines().find_map(|line| {
        let (at, insn) = line.split_once(":\t")?;
        let at = u64::from_str_radix(at.trim(), 16).ok()?;
        let refers = insn.contains(&format!("# {target}"))
            || (insn.starts_with("call") && insn.contains(&format!(" {target}")));
        (refers && at != function).then_some(at)
    });
    at.map(|at| function_start(binary, at)).transpose()
}

/// Where the function starting at `start` ends: the next text symbol.
fn function_end(binary: &Path, start: u64) -> Result<u64> {
    text_symbols(binary)?
        .into_iter()
        .filter(|&at| at > start)
        .min()
        .context("no text symbol after the function")
}

/// `(address, instruction)` from `start` to `stop`.
fn disassemble(binary: &Path, start: u64, stop: u64) -> Result<Vec<(u64, String)>> {
    let out = output(
        Command::new("objdump")
            .args(["-d", "--no-show-raw-insn"])
            .arg(format!("--start-address={start:#x}"))
            .arg(format!("--stop-address={stop:#x}"))
            .arg(binary),
    )?;
    Ok(out
        .lines()
        .filter_map(|line| {
            let (at, insn) = line.split_once(":\t")?;
            Some((u64::from_str_radix(at.trim(), 16).ok()?, insn.to_string()))
        })
        .collect())
}

/// The detached path read from the code before `site`.
#[derive(Debug, PartialEq)]
struct Path_ {
    /// From the semaphore word's load (or the load of its address just
    /// before it) to the first conditional branch after it.
    listing: Vec<String>,
    /// The load of the semaphore's address from the GOT, when the compiler
    /// hoisted it out of the loop (so it is not on the path).
    hoisted: Option<String>,
    loads: usize,
    word_32: bool,
    branch: String,
    backward: bool,
}

/// One instruction as objdump prints it: `mov 0x2f00(%rip),%rax  # 8e048 <sym>`.
struct Insn<'a> {
    at: u64,
    mnemonic: &'a str,
    /// Without objdump's comment.
    operands: &'a str,
    text: &'a str,
}

impl Insn<'_> {
    /// Whether objdump's comment names address `to`.
    fn refers(&self, to: u64) -> bool {
        self.text.contains(&format!("# {to:x} <"))
    }

    fn listed(&self) -> String {
        format!("{:x}: {}", self.at, squeeze(self.text))
    }
}

/// The last instruction before `site` that reads the semaphore word,
/// directly or through a register loaded from one of its GOT `slots`, and
/// what follows it up to the first conditional branch.
fn path_to_branch(
    code: &[(u64, String)],
    site: u64,
    semaphore: u64,
    slots: &BTreeSet<u64>,
) -> Option<Path_> {
    let before: Vec<Insn> = code
        .iter()
        .filter(|(a, _)| *a < site)
        .map(|(a, text)| {
            let (mnemonic, operands) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
            Insn {
                at: *a,
                mnemonic,
                operands: operands.split('#').next().unwrap_or("").trim(),
                text,
            }
        })
        .collect();
    let (start, hoisted) = semaphore_load(&before, semaphore, slots)?;
    walk_to_branch(&before[start..], hoisted, slots)
}

/// Where the path starts: the last load of the word itself, or of its
/// address from the GOT (or, when that load was hoisted out of the loop,
/// the load through the register it filled; the hoisted load is returned).
fn semaphore_load(
    before: &[Insn],
    semaphore: u64,
    slots: &BTreeSet<u64>,
) -> Option<(usize, Option<String>)> {
    let direct = before.iter().rposition(|insn| insn.refers(semaphore));
    let through_got = before
        .iter()
        .rposition(|insn| slots.iter().any(|&slot| insn.refers(slot)));
    match (direct, through_got) {
        (Some(direct), None) => Some((direct, None)),
        (Some(direct), Some(got)) if direct > got => Some((direct, None)),
        (_, Some(g)) => {
            // `mov SLOT(%rip),%REG`, then a load through `(%REG)`.
            let register = before[g].operands.rsplit(',').next()?.trim().to_string();
            let through = |ops: &str| {
                let source = ops.split(',').next().unwrap_or("");
                source.ends_with(&format!("({register})")) && !source.contains("(%rip)")
            };
            let load = (g + 1..before.len())
                .rev()
                .find(|&i| through(before[i].operands))?;
            if load == g + 1 {
                Some((g, None))
            } else {
                Some((load, Some(before[g].listed())))
            }
        }
        (None, None) => None,
    }
}

/// The path from its first instruction to the first conditional branch,
/// counting the loads of memory on it.
fn walk_to_branch(path: &[Insn], hoisted: Option<String>, slots: &BTreeSet<u64>) -> Option<Path_> {
    let mut listing = Vec::new();
    let mut loads = 0;
    let mut word_32 = false;
    for (i, insn) in path.iter().enumerate() {
        listing.push(insn.listed());
        let (at, mnemonic, operands) = (insn.at, insn.mnemonic, insn.operands);
        if mnemonic.starts_with('j') && mnemonic != "jmp" {
            let target = operands.split_whitespace().next().and_then(hex_bare);
            let backward = target.is_some_and(|t| t < at);
            return Some(Path_ {
                listing,
                hoisted,
                loads,
                word_32,
                branch: mnemonic.to_string(),
                backward,
            });
        }
        let last = operands.rsplit(',').next().unwrap_or("");
        let reads_memory = mnemonic != "lea"
            && operands.contains('(')
            // a `mov` store's memory operand is its last
            && !(mnemonic.starts_with("mov") && last.contains('('));
        if reads_memory {
            loads += 1;
            let got_load = i == 0 && slots.iter().any(|&slot| insn.refers(slot));
            if !got_load {
                word_32 = mnemonic.ends_with('l') || last.starts_with("%e") || last.ends_with('d');
            }
        }
    }
    None
}

/// objdump's `mov    0x642c8(%rip),%rax` as `mov 0x642c8(%rip),%rax`.
fn squeeze(insn: &str) -> String {
    insn.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn hex(text: &str) -> Option<u64> {
    u64::from_str_radix(text.strip_prefix("0x")?, 16).ok()
}

fn hex_bare(text: &str) -> Option<u64> {
    u64::from_str_radix(text, 16).ok()
}

fn output(command: &mut Command) -> Result<String> {
    let out = command
        .output()
        .with_context(|| format!("running {command:?}"))?;
    anyhow::ensure!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(lines: &[&str]) -> Vec<(u64, String)> {
        lines
            .iter()
            .map(|l| {
                let (at, insn) = l.split_once(":\t").unwrap();
                (
                    u64::from_str_radix(at.trim(), 16).unwrap(),
                    insn.to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn the_path_through_the_got() {
        // styx-bench's loop as objdump printed it, the GOT load in the loop.
        let code = code(&[
            "   27614:\tmovzbl 0x28(%rsp),%edx",
            "   27619:\tmov    0x642c8(%rip),%rax        # 8b8e8 <_DYNAMIC+0x328>",
            "   27620:\tmov    (%rax),%eax",
            "   27622:\ttest   %eax,%eax",
            "   27624:\tje     275de <_ZN10styx_bench4main+0x88e>",
            "   27626:\tmov    0x641c3(%rip),%rcx        # 8b7f0 <_DYNAMIC+0x230>",
            "   27637:\tmov    $0x1,%ecx",
            "   2763c:\tnop",
        ]);
        let slots = BTreeSet::from([0x8b8e8]);
        let path = path_to_branch(&code, 0x2763c, 0x8e048, &slots).unwrap();
        assert_eq!(path.listing.len(), 4);
        assert_eq!(path.listing[1], "27620: mov (%rax),%eax");
        assert_eq!(path.hoisted, None);
        assert_eq!((path.loads, path.word_32, path.backward), (2, true, true));
    }

    #[test]
    fn the_address_hoisted_out_of_the_loop() {
        let code = code(&[
            "   2ab52:\tmov    0x65ad7(%rip),%rbp        # 90630 <_DYNAMIC+0x328>",
            "   2ab59:\tmov    0x659d8(%rip),%rbx        # 90538 <_DYNAMIC+0x230>",
            "   2ac10:\tinc    %r13",
            "   2ac16:\tje     2ab72 <nop1+0x52>",
            "   2ac46:\tmovzbl 0x8(%rsp),%edx",
            "   2ac4b:\tmov    0x0(%rbp),%eax",
            "   2ac4e:\ttest   %eax,%eax",
            "   2ac50:\tje     2ac10 <nop1+0xf0>",
            "   2ac52:\tmov    %rbx,0x8(%rsp)",
            "   2ac57:\ttest   %ax,%ax",
            "   2ac5a:\tje     2ac62 <nop1+0x142>",
            "   2ac61:\tnop",
        ]);
        let path = path_to_branch(&code, 0x2ac61, 0x93040, &BTreeSet::from([0x90630])).unwrap();
        assert_eq!(
            path.listing,
            [
                "2ac4b: mov 0x0(%rbp),%eax",
                "2ac4e: test %eax,%eax",
                "2ac50: je 2ac10 <nop1+0xf0>"
            ]
        );
        assert_eq!(
            path.hoisted.as_deref(),
            Some("2ab52: mov 0x65ad7(%rip),%rbp # 90630 <_DYNAMIC+0x328>")
        );
        assert_eq!((path.loads, path.word_32, path.backward), (1, true, true));
    }

    #[test]
    fn a_direct_16_bit_compare_is_not_a_32_bit_word() {
        let code = code(&[
            "   26d6c:\tcmpw   $0x0,0x1234(%rip)        # 8d000 <__usdt_sema_styx_mem_read>",
            "   26d70:\tje     26d35 <main+0x5a5>",
            "   26d85:\tnop",
        ]);
        let path = path_to_branch(&code, 0x26d85, 0x8d000, &BTreeSet::new()).unwrap();
        assert_eq!(
            (path.listing.len(), path.loads, path.word_32),
            (2, 1, false)
        );
    }

    /// styx-probe's check since the `asm goto` form: the word compared in
    /// memory and a jump to the probe's cold block (taken while traced).
    #[test]
    fn a_direct_32_bit_compare_is_the_whole_path() {
        let code = code(&[
            "   35e2e:\tcmpl   $0x0,0xb21d7(%rip)        # e800c <styx_probe_v0_1_semaphore_mem_read>",
            "   35e35:\tjne    35f46 <run+0x2e6>",
            "   35f50:\tnop",
        ]);
        let path = path_to_branch(&code, 0x35f50, 0xe800c, &BTreeSet::new()).unwrap();
        assert_eq!(
            (path.listing.len(), path.loads, path.word_32, path.backward),
            (2, 1, true, false)
        );
        assert_eq!(path.branch, "jne");
    }
}
