//! What a command prints: the same result as aligned text tables (`-o table`) or one
//! JSON document (`-o json`).

use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Default)]
pub struct Table {
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new(headers: &[&'static str]) -> Self {
        Self {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate() {
                if let Some(w) = widths.get_mut(i) {
                    *w = (*w).max(cell.chars().count());
                }
            }
        }
        let line = |cells: &mut dyn Iterator<Item = &str>| {
            let mut out = String::new();
            for (i, cell) in cells.enumerate() {
                if i > 0 {
                    out.push_str("  ");
                }
                out.push_str(cell);
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(cell.chars().count());
                out.extend(std::iter::repeat_n(' ', pad));
            }
            out.trim_end().to_owned()
        };
        let mut out = line(&mut self.headers.iter().copied());
        out.push('\n');
        for row in &self.rows {
            out.push_str(&line(&mut row.iter().map(String::as_str)));
            out.push('\n');
        }
        out
    }
}

/// A command's result.
#[derive(Debug)]
pub struct Report {
    pub json: Value,
    pub tables: Vec<Table>,
    /// Free text printed after the tables in table mode.
    pub lines: Vec<String>,
    /// The exit code after printing: 0, or 1 for a report of a partial answer (e.g.
    /// `consumer status` when a client gave no offsets).
    pub exit_code: u8,
}

impl Report {
    pub fn table(table: Table, json: Value) -> Self {
        Self {
            json,
            tables: vec![table],
            lines: Vec::new(),
            exit_code: 0,
        }
    }

    pub fn text(line: impl Into<String>, json: Value) -> Self {
        Self {
            json,
            tables: Vec::new(),
            lines: vec![line.into()],
            exit_code: 0,
        }
    }

    pub fn with_exit_code(mut self, code: u8) -> Self {
        self.exit_code = code;
        self
    }

    pub fn with_line(mut self, line: impl Into<String>) -> Self {
        self.lines.push(line.into());
        self
    }

    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(&self.json).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Table => {
                let mut out = String::new();
                for t in &self.tables {
                    out.push_str(&t.render());
                }
                for l in &self.lines {
                    out.push_str(l);
                    out.push('\n');
                }
                out
            }
        }
    }
}

/// Milliseconds since the epoch as `YYYY-MM-DD HH:MM:SS.mmm` UTC; `-` for 0.
pub fn timestamp(ms: i64) -> String {
    if ms <= 0 {
        return "-".to_owned();
    }
    let secs = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.{millis:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_timestamps_format() {
        let mut t = Table::new(&["a", "long header"]);
        t.row(vec!["wide cell".into(), "x".into()]);
        assert_eq!(t.render(), "a          long header\nwide cell  x\n");
        assert_eq!(timestamp(0), "-");
        assert_eq!(timestamp(1_700_000_000_123), "2023-11-14 22:13:20.123");
        assert_eq!(timestamp(951_782_400_000), "2000-02-29 00:00:00.000");
    }
}
