//! Unknown `broker.conf` keys: each is reported with the known key it most likely
//! misspells (an edit-distance match, case-insensitive), at startup in the log and by
//! `rmq-broker -p` as trailing `#` comments (the printout stays a loadable file).

use crate::config::Config;

/// Every key the broker or the store honours, as `-p` prints them.
pub fn known_keys(config: &Config) -> Vec<String> {
    config
        .render()
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k.to_owned()))
        .collect()
}

/// The known key closest to `key`, when it is close enough to be a likely typo: at most
/// a third of the key's length in edits (and at least 1, at most 4).
pub fn nearest<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let limit = (key.chars().count() / 3).clamp(1, 4);
    let lower = key.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (distance(&lower, &k.to_ascii_lowercase()), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, k)| (*d, k.len()))
        .map(|(_, k)| k.as_str())
}

/// `(unknown key, suggestion)` for every key the config did not recognise.
pub fn unknown_with_suggestions(config: &Config) -> Vec<(String, Option<String>)> {
    let known = known_keys(config);
    config
        .unknown_keys
        .iter()
        .map(|k| (k.clone(), nearest(k, &known).map(str::to_owned)))
        .collect()
}

/// The `-p` trailer: one comment line per unknown key.
pub fn unknown_comment_lines(config: &Config) -> String {
    let mut out = String::new();
    for (key, suggestion) in unknown_with_suggestions(config) {
        out.push_str(&format!("# unknown key ignored: {key}"));
        if let Some(s) = suggestion {
            out.push_str(&format!(" (did you mean {s}?)"));
        }
        out.push('\n');
    }
    out
}

/// Levenshtein distance over chars; keys are short, so the O(n·m) row is cheap.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_the_nearest_known_key_and_strangers_none() {
        let c = Config::from_properties(
            "flushDiskTyp=SYNC_FLUSH\nlistenport=1\nautoCreateTopicEnabled=true\ntotallyUnrelatedSetting=1\n",
        )
        .unwrap();
        let got = unknown_with_suggestions(&c);
        assert_eq!(
            got,
            vec![
                ("flushDiskTyp".into(), Some("flushDiskType".into())),
                ("listenport".into(), Some("listenPort".into())),
                (
                    "autoCreateTopicEnabled".into(),
                    Some("autoCreateTopicEnable".into())
                ),
                ("totallyUnrelatedSetting".into(), None),
            ]
        );
        let text = unknown_comment_lines(&c);
        assert!(
            text.contains("# unknown key ignored: flushDiskTyp (did you mean flushDiskType?)\n")
        );
        assert!(text.contains("# unknown key ignored: totallyUnrelatedSetting\n"));
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(nearest("zz", &known_keys(&Config::default())), None);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn every_honoured_key_is_documented() {
        let doc = include_str!("../../../docs/broker-config.md");
        for key in known_keys(&Config::default()) {
            assert!(
                doc.contains(&format!("| `{key}`")),
                "docs/broker-config.md does not list {key}"
            );
        }
    }
}
