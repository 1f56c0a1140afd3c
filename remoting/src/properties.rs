//! Java `.properties` text as `java.util.Properties.load` reads it (the subset RocketMQ
//! config files use): `#`/`!` comments, `=`, `:` or whitespace separators, backslash line
//! continuations and escapes, `\uXXXX`. It is what `mqbroker -c broker.conf` and
//! `mqnamesrv -c namesrv.conf` read, and what UPDATE_BROKER_CONFIG and
//! GET/UPDATE_NAMESRV_CONFIG carry in their bodies (`MixAll.string2Properties`);
//! [`render`] is `MixAll.properties2String`.

/// Parses `text` into `(key, value)` pairs in file order; a later duplicate overrides an
/// earlier one when applied in order, as with `Properties.load`.
pub fn parse(text: &str) -> Vec<(String, String)> {
    let mut entries = Vec::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let mut line = raw.trim_start().to_owned();
        if line.is_empty() || line.starts_with('#') || line.starts_with('!') {
            continue;
        }
        while ends_with_continuation(&line) {
            line.pop();
            match lines.next() {
                Some(next) => line.push_str(next.trim_start()),
                None => break,
            }
        }
        entries.push(split_key_value(&line));
    }
    entries
}

/// An odd number of trailing backslashes continues the logical line.
fn ends_with_continuation(line: &str) -> bool {
    line.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (String, String) {
    let mut chars = line.chars().peekable();
    let mut key = String::new();
    while let Some(c) = chars.next() {
        match c {
            '\\' => push_escaped(&mut key, &mut chars),
            '=' | ':' => break,
            c if c.is_whitespace() => {
                while chars.next_if(|c| c.is_whitespace()).is_some() {}
                chars.next_if(|&c| c == '=' || c == ':');
                break;
            }
            c => key.push(c),
        }
    }
    while chars.next_if(|c| c.is_whitespace()).is_some() {}
    let mut value = String::new();
    while let Some(c) = chars.next() {
        if c == '\\' {
            push_escaped(&mut value, &mut chars);
        } else {
            value.push(c);
        }
    }
    (key, value)
}

fn push_escaped(out: &mut String, chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    let Some(e) = chars.next() else { return };
    let c = match e {
        't' => '\t',
        'n' => '\n',
        'r' => '\r',
        'f' => '\u{c}',
        'u' => {
            let hex: String = (0..4).filter_map(|_| chars.next()).collect();
            u32::from_str_radix(&hex, 16)
                .ok()
                .and_then(char::from_u32)
                .unwrap_or(char::REPLACEMENT_CHARACTER)
        }
        other => other,
    };
    out.push(c);
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
    fn reads_rocketmq_broker_conf() {
        let text = "# broker.conf\nbrokerClusterName = DefaultCluster\nbrokerName=broker-a\n\
                    ! bang comment\nnamesrvAddr: 127.0.0.1:9876;10.0.0.1:9876\n\
                    storePathRootDir  /data/store\\\n    /sub\nemptyKey=\nuni=caf\\u00e9\\tx\n";
        assert_eq!(
            parse(text),
            vec![
                ("brokerClusterName".into(), "DefaultCluster".into()),
                ("brokerName".into(), "broker-a".into()),
                ("namesrvAddr".into(), "127.0.0.1:9876;10.0.0.1:9876".into()),
                ("storePathRootDir".into(), "/data/store/sub".into()),
                ("emptyKey".into(), "".into()),
                ("uni".into(), "café\tx".into()),
            ]
        );
    }

    #[test]
    fn tolerates_garbage() {
        assert_eq!(parse("\\"), vec![("".into(), "".into())]);
        assert_eq!(parse("k=\\u12"), vec![("k".into(), "\u{12}".into())]);
        assert_eq!(parse("k=\\uZZZZ"), vec![("k".into(), "\u{fffd}".into())]);
        assert!(parse("   \n#x\n").is_empty());
    }

    /// Escaped separators belong to the key; an even run of trailing backslashes is an
    /// escaped backslash, not a continuation; a value keeps its inner and trailing
    /// spaces and everything after its first separator.
    #[test]
    fn escapes_and_separators() {
        let text = "a\\\\=b\\=c=d:e\\\\\\\\\nnext = x = y  \nspaced\\ key\\:k v\n";
        assert_eq!(
            parse(text),
            vec![
                ("a\\".into(), "b=c=d:e\\\\".into()),
                ("next".into(), "x = y  ".into()),
                ("spaced key:k".into(), "v".into()),
            ]
        );
    }

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
