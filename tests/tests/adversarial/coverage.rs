//! Every limit `docs/security.md`'s threat model names is exercised by this suite: its
//! key appears in one of the suite's sources (a test configures it, or asserts a refusal
//! naming it). A key attacked elsewhere must say where, and that file must name it.

use std::collections::BTreeSet;
use std::path::Path;

/// Keys whose attack lives outside this suite: the key and the test file that covers it.
const TESTED_ELSEWHERE: &[(&str, &str)] = &[
    // The HA handshake with a wrong or missing secret: the replication suite.
    ("haSecret", "tests/tests/broker_replication.rs"),
    // One client id opening Telemetry streams over the cap: the gRPC endpoint suite.
    (
        "grpcMaxTelemetryStreamsPerClient",
        "tests/tests/grpc_endpoint.rs",
    ),
    // POP's caps, filled through the POP service of a broker on a real store.
    (
        "popMaxInFlightPerGroupTopic",
        "broker/src/services/pop/service_tests.rs",
    ),
    (
        "popMaxInFlightTotal",
        "broker/src/services/pop/service_tests.rs",
    ),
    (
        "popMaxParkedTotal",
        "broker/src/services/pop/service_tests.rs",
    ),
];

/// Backticked words of the threat model that look like config keys: camelCase, starting
/// lower-case, no underscores (metric names have them).
fn keys_in_threat_model(text: &str) -> BTreeSet<String> {
    let start = text
        .find("## Threat model")
        .expect("security.md has a threat model");
    let section = &text[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    section[..end]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|w| w.trim_end_matches('*'))
        .filter(|w| {
            w.len() > 3
                && w.starts_with(|c: char| c.is_ascii_lowercase())
                && w.chars().all(|c| c.is_ascii_alphanumeric())
                && w.chars().any(|c| c.is_ascii_uppercase())
        })
        .map(str::to_owned)
        .collect()
}

fn sources(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).expect("suite dir") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") && !path.ends_with("coverage.rs") {
            all.push_str(&std::fs::read_to_string(&path).expect("source"));
        }
    }
    all
}

#[test]
fn every_limit_in_the_threat_model_is_attacked() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/security.md")).expect("security.md");
    let keys = keys_in_threat_model(&doc);
    assert!(keys.len() > 20, "too few keys found: {keys:?}");
    let suite = sources(&root.join("tests/tests/adversarial"));
    let mut missing = Vec::new();
    for key in &keys {
        if suite.contains(key.as_str()) {
            continue;
        }
        match TESTED_ELSEWHERE.iter().find(|(k, _)| k == key) {
            Some((_, file)) => {
                let text = std::fs::read_to_string(root.join(file)).expect("named test file");
                assert!(text.contains(key.as_str()), "{file} does not mention {key}");
            }
            None => missing.push(key.clone()),
        }
    }
    assert!(
        missing.is_empty(),
        "limits in docs/security.md's threat model that no adversarial test exercises: {missing:?}"
    );
}
