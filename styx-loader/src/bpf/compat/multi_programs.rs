//! Loads eBPF programs for `uprobe_multi` links, which aya 0.14 cannot: the
//! kernel only accepts a program in such a link if it was loaded with the
//! expected attach type `BPF_TRACE_UPROBE_MULTI`, and aya loads uprobe
//! programs without one.
//!
//! The object is parsed again with aya-obj (the crate aya itself uses), its
//! map references relocated to the maps aya already created (so both kinds
//! of program share one ring buffer, one drop counter and the same globals),
//! and each program loaded with `BPF_PROG_LOAD`.

use super::syscall::bpf_new_fd;
use anyhow::{anyhow, bail, Context, Result};
use aya::maps::Map;
use aya::Ebpf;
use aya_obj::generated::{
    bpf_attach_type, bpf_attr, bpf_cmd, bpf_insn, bpf_prog_type, BPF_OBJ_NAME_LEN,
};
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, CStr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};

/// Enough for the verifier's account of a program of styx's size.
const VERIFIER_LOG_BYTES: usize = 4 << 20;

/// Programs loaded for `uprobe_multi`, by name.
pub struct MultiPrograms {
    fds: HashMap<String, OwnedFd>,
}

impl MultiPrograms {
    pub fn get(&self, name: &str) -> Option<&OwnedFd> {
        self.fds.get(name)
    }
}

/// Loads the programs `names` from `object`, whose maps `ebpf` has created.
/// Call before taking maps out of `ebpf`.
pub fn load(object: &[u8], ebpf: &Ebpf, names: &[&str]) -> Result<MultiPrograms> {
    let mut obj = aya_obj::Object::parse(object).context("parsing the eBPF object")?;
    if obj.has_btf_relocations() {
        // aya applies these against the kernel's BTF; styx's programs need none.
        bail!("the eBPF object has CO-RE relocations, which styx does not apply");
    }
    let maps = std::mem::take(&mut obj.maps);
    let fds = maps
        .keys()
        .map(|name| {
            let map = ebpf
                .map(name)
                .ok_or_else(|| anyhow!("aya created no map {name}"))?;
            Ok((name.as_str(), map_fd(map)?))
        })
        .collect::<Result<HashMap<&str, RawFd>>>()?;
    let text_sections: HashSet<usize> = obj.functions.keys().map(|(section, _)| *section).collect();
    obj.relocate_maps(
        maps.iter()
            .map(|(name, map)| (name.as_str(), fds[name.as_str()], map)),
        &text_sections,
    )
    .context("relocating map references")?;
    obj.relocate_calls(&text_sections)
        .context("linking function calls")?;

    let mut loaded = HashMap::new();
    for &name in names {
        let program = obj
            .programs
            .get(name)
            .ok_or_else(|| anyhow!("the eBPF object has no program {name}"))?;
        let function = &obj.functions[&program.function_key()];
        let fd = load_program(name, &function.instructions, &program.license)
            .with_context(|| format!("loading eBPF program {name} for uprobe_multi"))?;
        loaded.insert(name.to_string(), fd);
    }
    Ok(MultiPrograms { fds: loaded })
}

/// The descriptor of a map aya created.
fn map_fd(map: &Map) -> Result<RawFd> {
    let data = match map {
        Map::Array(data)
        | Map::PerCpuArray(data)
        | Map::HashMap(data)
        | Map::PerCpuHashMap(data)
        | Map::LruHashMap(data)
        | Map::RingBuf(data)
        | Map::PerfEventArray(data) => data,
        other => bail!("styx's eBPF object has an unexpected map type: {other:?}"),
    };
    Ok(data.fd().as_fd().as_raw_fd())
}

/// Loads one kprobe-type program for uprobe_multi; if the verifier refuses
/// it, loads it again with the verifier's log to say why.
fn load_program(name: &str, insns: &[bpf_insn], license: &CStr) -> io::Result<OwnedFd> {
    // The kernel takes the name's first 15 bytes and a NUL.
    let mut prog_name = [0; BPF_OBJ_NAME_LEN as usize];
    let kept = name.bytes().take(prog_name.len() - 1);
    for (dst, src) in prog_name.iter_mut().zip(kept) {
        *dst = src as c_char;
    }
    // SAFETY: bpf_attr is plain data, for which all zeroes is valid.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    // `__bindgen_anon_3` is the BPF_PROG_LOAD member.
    attr.__bindgen_anon_3.prog_type = bpf_prog_type::BPF_PROG_TYPE_KPROBE as u32;
    attr.__bindgen_anon_3.insn_cnt = insns.len() as u32;
    attr.__bindgen_anon_3.insns = insns.as_ptr() as u64;
    attr.__bindgen_anon_3.license = license.as_ptr() as u64;
    attr.__bindgen_anon_3.prog_name = prog_name;
    attr.__bindgen_anon_3.expected_attach_type = bpf_attach_type::BPF_TRACE_UPROBE_MULTI as u32;
    // SAFETY: attr holds the BPF_PROG_LOAD member; insns and license outlive
    // the call.
    let first = unsafe { bpf_new_fd(bpf_cmd::BPF_PROG_LOAD, &attr, "BPF_PROG_LOAD") };
    let Err(err) = first else { return first };
    let mut log = vec![0u8; VERIFIER_LOG_BYTES];
    attr.__bindgen_anon_3.log_level = 1;
    attr.__bindgen_anon_3.log_size = log.len() as u32;
    attr.__bindgen_anon_3.log_buf = log.as_mut_ptr() as u64;
    // SAFETY: as above, and log outlives the call.
    if let Ok(fd) = unsafe { bpf_new_fd(bpf_cmd::BPF_PROG_LOAD, &attr, "BPF_PROG_LOAD") } {
        return Ok(fd);
    }
    let text = CStr::from_bytes_until_nul(&log)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tail: Vec<&str> = text.lines().rev().take(20).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(io::Error::new(
        err.kind(),
        format!("{err}; the verifier said:\n{}", tail.join("\n")),
    ))
}
