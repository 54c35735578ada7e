//! A picture of where the guest touches memory: reads and writes per page
//! as two grids of cells, one above the other (one per page, in address order, a row of 64
//! pages each, labelled with its first address), coloured on a log scale;
//! each cell's tooltip gives its page and counts. SVG: any browser opens
//! it, and it stays sharp when zoomed.
//!
//! When the touched pages span more than [`MAX_SPAN_PAGES`], only touched
//! pages are drawn (still in address order), and each row says where it
//! starts.

use super::Table;
use std::fmt::Write as _;
use styx_common::EventKind;

/// Pages drawn at most as one contiguous span (the untouched ones blank).
pub(crate) const MAX_SPAN_PAGES: u64 = 1 << 14;
const COLUMNS: u64 = 64;
const CELL: u64 = 12;
const LABEL: u64 = 120;
const TOP: u64 = 56;

/// The heatmap of `table` (keyed by page number, pages of `1 << page_bits`
/// bytes, for mem_read and mem_write) as an SVG document.
pub fn svg(table: &Table, page_bits: u8, title: &str) -> String {
    let (read, write) = (EventKind::MemRead as u8, EventKind::MemWrite as u8);
    let mut pages: Vec<u64> = table
        .sorted()
        .into_iter()
        .filter(|&(k, _, _)| k == read || k == write)
        .map(|(_, page, _)| page)
        .collect();
    pages.sort_unstable();
    pages.dedup();
    // Cells in order: a contiguous span, or the touched pages alone.
    let cells: Vec<u64> = match (pages.first(), pages.last()) {
        (Some(&lo), Some(&hi)) if hi - lo < MAX_SPAN_PAGES => {
            let lo = lo - lo % COLUMNS;
            (lo..=hi).collect()
        }
        _ => pages.clone(),
    };
    let rows = cells.len().div_ceil(COLUMNS as usize) as u64;
    let grid_h = rows.max(1) * CELL;
    let width = LABEL + COLUMNS * CELL + 20;
    let height = TOP + 2 * grid_h + 40;
    let max = |kind| pages.iter().map(|&p| table.get(kind, p)).max().unwrap_or(0);
    let (max_read, max_write) = (max(read), max(write));
    let other = table.other[read as usize] + table.other[write as usize];
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="8" y="18" font-size="14">{}</text>"#,
        xml(title)
    );
    let _ = writeln!(
        svg,
        r#"<text x="8" y="36">pages of {} bytes, {} touched; colour: log of accesses per page (max {max_read} reads, {max_write} writes){}</text>"#,
        1u64 << page_bits,
        pages.len(),
        if other > 0 {
            format!("; {other} accesses to pages beyond the table not drawn")
        } else {
            String::new()
        }
    );
    let grid = Grid {
        table,
        cells: &cells,
        page_bits,
    };
    grid.panel(&mut svg, (read, "reads", max_read, 210), TOP);
    grid.panel(&mut svg, (write, "writes", max_write, 0), TOP + grid_h + 24);
    svg.push_str("</svg>\n");
    svg
}

/// What both panels draw: a cell per page of `cells`.
struct Grid<'a> {
    table: &'a Table,
    cells: &'a [u64],
    page_bits: u8,
}

impl Grid<'_> {
    /// One panel at `y0`: (its type, name, the type's most accesses to a
    /// page, its colour's hue).
    fn panel(&self, svg: &mut String, (kind, name, max, hue): (u8, &str, u64, u32), y0: u64) {
        let (read, write) = (EventKind::MemRead as u8, EventKind::MemWrite as u8);
        let _ = writeln!(svg, r#"<text x="8" y="{}">{name}</text>"#, y0 - 6);
        for (i, &page) in self.cells.iter().enumerate() {
            let (row, col) = (i as u64 / COLUMNS, i as u64 % COLUMNS);
            let n = self.table.get(kind, page);
            let _ = writeln!(
                svg,
                r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{:#x}: {} reads, {} writes</title></rect>"#,
                LABEL + col * CELL,
                y0 + row * CELL,
                CELL - 1,
                CELL - 1,
                fill(n, max, hue),
                page << self.page_bits,
                self.table.get(read, page),
                self.table.get(write, page)
            );
            if col == 0 {
                let _ = writeln!(
                    svg,
                    r#"<text x="{}" y="{}" text-anchor="end">{:#x}</text>"#,
                    LABEL - 6,
                    y0 + row * CELL + CELL - 2,
                    page << self.page_bits
                );
            }
        }
    }
}

/// A cell's colour for `n` accesses of at most `max`.
fn fill(n: u64, max: u64, hue: u32) -> String {
    if n == 0 {
        return "#f2f2f2".to_string();
    }
    // 25% (few) to 85% (the most) saturation, darker with more.
    let level = ((n as f64).ln_1p() / (max as f64).ln_1p()).clamp(0.0, 1.0);
    format!(
        "hsl({hue},{:.0}%,{:.0}%)",
        40.0 + 50.0 * level,
        85.0 - 50.0 * level
    )
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_and_tooltips_say_the_counts() {
        let mut table = Table::new(100);
        let (read, write) = (EventKind::MemRead as u8, EventKind::MemWrite as u8);
        table.add(read, 0x10, 5);
        table.add(write, 0x10, 2);
        table.add(read, 0x4f, 1);
        let svg = svg(&table, 8, "demo <6502>");
        assert!(svg.starts_with("<svg"), "{svg}");
        assert!(svg.contains("0x1000: 5 reads, 2 writes"));
        assert!(svg.contains("0x4f00: 1 reads, 0 writes"));
        assert!(svg.contains("demo &lt;6502&gt;"));
        // Pages 0x00..=0x4f drawn contiguously, twice (reads, writes).
        assert_eq!(svg.matches("<rect x=").count(), 2 * 0x50);
    }
}
