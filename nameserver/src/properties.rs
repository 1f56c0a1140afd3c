//! Java `.properties` text (`java.util.Properties.load` / `store` subset): what
//! `mqnamesrv -c` reads and what GET/UPDATE_NAMESRV_CONFIG carry in their bodies.

/// Parses properties text into ordered `(key, value)` pairs; later duplicates win when
/// the caller applies them in order, like `Properties.load`.
pub fn parse(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let mut logical = String::new();
        let mut line = first.trim_start();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        // A line ending in an odd number of backslashes continues on the next one.
        loop {
            let trailing = line.chars().rev().take_while(|&c| c == '\\').count();
            if trailing % 2 == 1 {
                logical.push_str(&line[..line.len() - 1]);
                match lines.next() {
                    Some(next) => line = next.trim_start(),
                    None => break,
                }
            } else {
                logical.push_str(line);
                break;
            }
        }
        out.push(split_entry(&logical));
    }
    out
}

fn split_entry(line: &str) -> (String, String) {
    let mut key = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(e) = chars.next() {
                    key.push(unescape(e, &mut chars));
                }
            }
            '=' | ':' => break,
            c if c.is_whitespace() => {
                // Whitespace ends the key; one '=' or ':' may follow it.
                while chars.peek().is_some_and(|c| c.is_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('=') | Some(':')) {
                    chars.next();
                }
                break;
            }
            c => key.push(c),
        }
    }
    while chars.peek().is_some_and(|c| c.is_whitespace()) {
        chars.next();
    }
    let mut value = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(e) = chars.next() {
                value.push(unescape(e, &mut chars));
            }
        } else {
            value.push(c);
        }
    }
    (key, value)
}

fn unescape(e: char, rest: &mut std::iter::Peekable<std::str::Chars<'_>>) -> char {
    match e {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        'u' => {
            let hex: String = (0..4).filter_map(|_| rest.next()).collect();
            u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or('\u{fffd}')
        }
        other => other,
    }
}

/// `MixAll.properties2String`: one `key=value` line per entry.
pub fn render<'a>(entries: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let mut out = String::new();
    for (k, v) in entries {
        out.push_str(k);
        out.push('=');
        out.push_str(&v);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_subset() {
        let text = "# comment\n! other\n\nlistenPort=9876\n  kvConfigPath : /tmp/a\\\n    b.json\nkey value with spaces\nempty=\nuni=caf\\u00e9\n";
        let entries = parse(text);
        assert_eq!(
            entries,
            vec![
                ("listenPort".into(), "9876".into()),
                ("kvConfigPath".into(), "/tmp/ab.json".into()),
                ("key".into(), "value with spaces".into()),
                ("empty".into(), "".into()),
                ("uni".into(), "café".into()),
            ]
        );
        assert_eq!(render([("a", "1".to_string())]), "a=1\n");
    }
}
