//! `top` and `read --by`: counts per key equal the test program's own
//! record of what it fired, in both delivery modes (per-event: counted in
//! the kernel, nothing streamed); keys beyond --max-keys are counted in an
//! "(other)" row; a live table with a capture beside equals `read --by` of
//! that capture; the heatmap's cells say the counts per page.

use crate::support::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Runs `top` on the test program while it fires `rounds` rounds on 2
/// threads; returns its jsonl rows, the fired events and its stderr.
fn top(name: &str, delivery: &str, args: &[&str]) -> (Vec<Value>, Vec<Value>, Vec<String>) {
    require_root();
    let dir = scratch(name);
    let (expect, out) = (dir.join("expected.jsonl"), dir.join("top.jsonl"));
    let mut prog = TestProg::spawn(Some(&expect));
    let pid = prog.pid().to_string();
    let mut all = vec!["top", "--pid", &pid];
    all.extend(jsonl_to(&out, delivery, args));
    let loader = attach_loader(&all);
    prog.fire(64, 2);
    loader.signal(libc::SIGINT);
    let (status, stderr) = loader.finish();
    assert!(status.success(), "{stderr:?}");
    prog.quit();
    let rows = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (rows, read_jsonl(&expect), stderr)
}

/// (event, key) → count, from top's rows (the "(other)" rows apart).
fn table(rows: &[Value]) -> BTreeMap<(String, u64), u64> {
    rows.iter()
        .filter(|r| r.get("other").is_none())
        .map(|r| {
            let key = (
                r["event"].as_str().unwrap().to_string(),
                r["key"].as_u64().unwrap(),
            );
            (key, r["count"].as_u64().unwrap())
        })
        .collect()
}

/// The same table counted here from the fired events.
fn counted(
    fired: &[Value],
    kinds: &[&str],
    key: impl Fn(&Value) -> u64,
) -> BTreeMap<(String, u64), u64> {
    let mut table = BTreeMap::new();
    for event in fired {
        let name = event["event"].as_str().unwrap();
        if kinds.contains(&name) {
            *table.entry((name.to_string(), key(event))).or_insert(0) += 1;
        }
    }
    table
}

#[test]
fn top_counts_exactly_what_was_fired_in_both_delivery_modes() {
    for delivery in ["batched", "per-event"] {
        let (rows, fired, stderr) = top(
            &format!("top-{delivery}"),
            delivery,
            &[
                "--by",
                "addr",
                "-e",
                "mem_read,mem_write,control",
                "--filter",
                "mem_write: size >= 2",
            ],
        );
        let fired: Vec<Value> = fired
            .into_iter()
            .filter(|e| e["event"] != "mem_write" || e["size"].as_u64() >= Some(2))
            .collect();
        let want = counted(&fired, &["mem_read", "mem_write"], |e| {
            e["addr"].as_u64().unwrap()
        });
        assert_eq!(table(&rows), want, "{delivery}");
        let total: u64 = want.values().sum();
        let said = stderr
            .iter()
            .find(|l| l.contains("events by addr"))
            .unwrap_or_else(|| panic!("{stderr:?}"));
        let in_kernel = if delivery == "per-event" { total } else { 0 };
        assert!(
            said.contains(&format!(
                "counted {total} events by addr ({in_kernel} of them in the kernel"
            )),
            "{said}"
        );
        // Shares add up to 1.
        let share: f64 = rows.iter().map(|r| r["share"].as_f64().unwrap()).sum();
        assert!((share - 1.0).abs() < 1e-3, "{share}");
    }
}

#[test]
fn keys_beyond_the_map_are_counted_in_an_other_row() {
    for delivery in ["batched", "per-event"] {
        let (rows, fired, _) = top(
            &format!("top-other-{delivery}"),
            delivery,
            &["--by", "pc", "-e", "insn_exec", "--max-keys", "10"],
        );
        let want = counted(&fired, &["insn_exec"], |e| e["pc"].as_u64().unwrap());
        let got = table(&rows);
        assert_eq!(got.len(), 10, "{delivery}: the table holds 10 keys");
        for (key, n) in &got {
            assert_eq!(want.get(key), Some(n), "{delivery} {key:?}");
        }
        let other: Vec<&Value> = rows.iter().filter(|r| r["other"] == true).collect();
        assert_eq!(other.len(), 1, "{rows:?}");
        let kept: u64 = got.values().sum();
        assert_eq!(
            other[0]["count"].as_u64().unwrap(),
            want.values().sum::<u64>() - kept,
            "{delivery}: every event counted once"
        );
    }
}

#[test]
fn a_live_table_equals_read_by_of_its_capture_and_the_heatmap_says_the_counts() {
    let dir = scratch("top-capture");
    let (capture, heat) = (dir.join("run.styx"), dir.join("heat.svg"));
    let (live, fired, _) = top(
        "top-capture-run",
        "batched",
        &[
            "--by",
            "page",
            "--page-size",
            "16",
            "--capture",
            capture.to_str().unwrap(),
        ],
    );
    let (status, stdout, stderr) = run_loader(&[
        "read",
        capture.to_str().unwrap(),
        "--by",
        "page",
        "--page-size",
        "16",
        "-o",
        "jsonl",
        "--heatmap",
        heat.to_str().unwrap(),
    ]);
    assert!(status.success(), "{stderr}");
    let read: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(table(&read), table(&live));
    let want = counted(&fired, &["mem_read", "mem_write"], |e| {
        e["addr"].as_u64().unwrap() & !15
    });
    assert_eq!(table(&read), want);
    // Each page's cell: its reads and writes.
    let svg = std::fs::read_to_string(&heat).unwrap();
    for page in want.keys().map(|(_, page)| *page) {
        let reads = want.get(&("mem_read".into(), page)).copied().unwrap_or(0);
        let writes = want.get(&("mem_write".into(), page)).copied().unwrap_or(0);
        let title = format!("<title>{page:#x}: {reads} reads, {writes} writes</title>");
        assert_eq!(svg.matches(&title).count(), 2, "{title} in both grids");
    }
    // A field no selected type has: one line, nothing attached.
    let prog = TestProg::spawn(None::<&Path>);
    let pid = prog.pid().to_string();
    let (status, _, stderr) =
        run_loader(&["top", "--pid", &pid, "--by", "addr", "-e", "insn_exec"]);
    assert!(!status.success());
    assert_eq!(
        stderr.trim_end(),
        "styx-loader: error: --by addr: no selected event type has a field 'addr' (mem_read, mem_write have it)"
    );
    assert!(semaphores(prog.pid()).values().all(|&w| w == 0));
    prog.quit();
}

/// A `top` that dropped events (`--on-full drop`, a ring of three batches,
/// the demo at every type outrunning the loader's count) says in its
/// summary that its table is not exact; the table counts exactly the
/// events that arrived.
#[test]
fn a_top_that_dropped_says_its_table_is_not_exact() {
    require_root();
    let out = scratch("top-dropped").join("top.jsonl");
    let output = loader_command()
        .arg("top")
        .args(jsonl_to(
            &out,
            "batched",
            &["--on-full", "drop", "--ring-size", "256K"],
        ))
        .arg("--")
        .arg(demo_path())
        .args(["--program", "all", "--repeat", "20", "--quiet"])
        .output()
        .unwrap();
    let stderr: Vec<String> = String::from_utf8_lossy(&output.stderr)
        .lines()
        .map(String::from)
        .collect();
    assert!(output.status.success(), "{stderr:#?}");
    let summary = summary_of(&stderr);
    assert!(summary.dropped > 0, "the loader kept up: {stderr:#?}");
    let said = "top: the counts miss the dropped events: the table is not exact";
    assert!(stderr.iter().any(|l| l.contains(said)), "{stderr:#?}");
    let rows = std::fs::read_to_string(&out).unwrap();
    let counted: u64 = rows
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["count"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(counted, summary.events, "{stderr:#?}");
}
