//! How the report writes a figure: medians with their spread, ratios,
//! rates, verdicts, and tables of them.

use crate::bench::stats::Samples;
use crate::bench::stream::Row;

pub fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "**not met**"
    }
}

/// "0.4% slower" / "1.2% faster" for a time ratio (slower / faster run).
pub fn slower(ratio: f64) -> String {
    let pct = (ratio - 1.0) * 100.0;
    if pct >= 0.0 {
        format!("{pct:.1}% slower")
    } else {
        format!("{:.1}% faster", -pct)
    }
}

/// `1.16× (1.07–1.27)`.
pub fn times(s: &Samples, decimals: usize) -> String {
    format!(
        "{:.*}× ({:.*}–{:.*})",
        decimals,
        s.median(),
        decimals,
        s.min(),
        decimals,
        s.max()
    )
}

/// M events/s from ns/event: `96.2 (88.1–101.3)`.
pub fn rate(ns: &Samples) -> String {
    format!(
        "{:.1} ({:.1}–{:.1})",
        1e3 / ns.median(),
        1e3 / ns.max(),
        1e3 / ns.min()
    )
}

/// M events/s from ns/event, median only.
pub fn rate_of(ns: &Samples) -> String {
    format!("{:.1}", 1e3 / ns.median())
}

pub fn lost_of(row: &Row) -> String {
    format!("{} of {}", row.lost, row.events)
}

/// A markdown table, each line ending in a newline; an empty cell is `| |`.
pub fn table<const N: usize>(
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> String {
    let line = |cells: [&str; N]| {
        let cells = cells.map(|c| {
            if c.is_empty() {
                " |".into()
            } else {
                format!(" {c} |")
            }
        });
        format!("|{}\n", cells.concat())
    };
    let mut text = line(header) + "|" + &"---|".repeat(N) + "\n";
    for row in rows {
        text += &line(row.each_ref().map(String::as_str));
    }
    text
}
