//! Case 4: how fast a capture converts to each output format on one core
//! (styx-events' `bench-consumers` example), beside the Styx table.

use super::stats::Samples;
use super::{Binaries, Plan};
use anyhow::{Context, Result};
use std::collections::BTreeMap;
use std::process::Command;

#[derive(Default)]
pub struct Results {
    /// The rows of the example's table, in its order: the formats it
    /// measured (its list, not this crate's).
    pub formats: Vec<String>,
    /// M events/s per format.
    pub rates: BTreeMap<String, Samples>,
    /// Per format: (Styx's figure, the target), as the example prints them.
    pub reference: BTreeMap<String, (String, String)>,
    pub bytes_per_event: Samples,
    pub bytes_per_mem_read: Samples,
}

pub fn round(bins: &Binaries, plan: &Plan, results: &mut Results) -> Result<()> {
    let output = Command::new(&bins.consumers)
        .arg(format!("--events={}", plan.consumer_events))
        .output()
        .context("running bench-consumers")?;
    anyhow::ensure!(
        output.status.success(),
        "bench-consumers failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    parse(&String::from_utf8_lossy(&output.stdout), results)
}

fn parse(text: &str, results: &mut Results) -> Result<()> {
    let sizes = text
        .lines()
        .find(|l| l.contains("bytes/event"))
        .context("no bytes/event line")?;
    let numbers_before = |unit: &str| -> Vec<f64> {
        let words: Vec<&str> = sizes.split_whitespace().collect();
        words
            .windows(2)
            .filter(|w| w[1].trim_end_matches([',', ';']) == unit)
            .filter_map(|w| w[0].parse().ok())
            .collect()
    };
    let per_event = numbers_before("bytes/event");
    anyhow::ensure!(per_event.len() == 2, "unexpected size line {sizes:?}");
    results.bytes_per_event.push(per_event[0]);
    results.bytes_per_mem_read.push(per_event[1]);
    // The table: its header, then a row per format up to a blank line.
    let rows = text
        .lines()
        .skip_while(|l| l.split_whitespace().next() != Some("format"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty());
    let mut formats = Vec::new();
    for row in rows {
        let cells: Vec<&str> = row.split_whitespace().collect();
        let format = cells[0].to_string();
        let rate: f64 = cells
            .get(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("no rate in {row:?}"))?;
        results.rates.entry(format.clone()).or_default().push(rate);
        let cell = |i: usize| cells.get(i).copied().unwrap_or("-").to_string();
        let reference = (cell(2), cells.get(3..).unwrap_or_default().join(" "));
        results.reference.insert(format.clone(), reference);
        formats.push(format);
    }
    anyhow::ensure!(!formats.is_empty(), "no format table in {text:?}");
    anyhow::ensure!(
        results.formats.is_empty() || results.formats == formats,
        "the example's formats changed between rounds: {:?}, then {formats:?}",
        results.formats
    );
    results.formats = formats;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_examples_table() {
        let text = "2000000 mixed events written in 0.5 s: 14.0 MB, 7.00 bytes/event; mem_read alone 7.01 bytes/event (target <= 24)\n\n\
            format       M events/s       Styx     target\n\
            read               64.0       20.7      >= 50\n\
            jsonl              13.4        6.0      >= 12\n\
            text                7.5        2.6       >= 5\n\
            chrome              5.4          -          -\n\
            perfetto            2.3          -          -\n\
            drcov              60.0          -          -\n\
            tenet              20.0          -          -\n\
            parquet            12.0          -      >= 10\n";
        let mut results = Results::default();
        parse(text, &mut results).unwrap();
        assert_eq!(
            results.formats,
            ["read", "jsonl", "text", "chrome", "perfetto", "drcov", "tenet", "parquet"]
        );
        assert_eq!(results.rates["jsonl"].median(), 13.4);
        assert_eq!(results.reference["read"], ("20.7".into(), ">= 50".into()));
        assert_eq!(results.bytes_per_mem_read.median(), 7.01);
    }
}
