//! Snapshot tests of the desired-state builders: the full rendered output of the example
//! resources is compared with `tests/snapshots/*.yaml`. After an intended change, rerun
//! with `UPDATE_SNAPSHOTS=1` and review the diff.

use operator::builders::Settings;
use operator::render::render;

fn check(example: &str) {
    let root = env!("CARGO_MANIFEST_DIR");
    let input = std::fs::read_to_string(format!("{root}/../manifests/examples/{example}")).unwrap();
    let rendered = render(&input, &Settings::default()).unwrap();
    let snapshot = format!("{root}/tests/snapshots/{example}");
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&snapshot, &rendered).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&snapshot).unwrap_or_default();
    if expected != rendered {
        let first = expected
            .lines()
            .zip(rendered.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(rendered.lines().count()));
        panic!(
            "{snapshot} differs from the builders' output from line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             rerun with UPDATE_SNAPSHOTS=1 if the change is intended",
            first + 1,
            expected.lines().nth(first),
            rendered.lines().nth(first),
        );
    }
}

#[test]
fn minimal_cluster() {
    check("minimal.yaml");
}

#[test]
fn ha_cluster() {
    check("ha.yaml");
}

#[test]
fn every_pod_template_is_restricted() {
    let root = env!("CARGO_MANIFEST_DIR");
    for example in ["minimal.yaml", "ha.yaml"] {
        let input =
            std::fs::read_to_string(format!("{root}/../manifests/examples/{example}")).unwrap();
        let rendered = render(&input, &Settings::default()).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&rendered) {
            let v: serde_yaml::Value = serde::Deserialize::deserialize(doc).unwrap();
            if v["kind"].as_str() != Some("StatefulSet") {
                continue;
            }
            let pod = &v["spec"]["template"]["spec"];
            assert_eq!(pod["automountServiceAccountToken"].as_bool(), Some(false));
            assert_eq!(pod["securityContext"]["runAsNonRoot"].as_bool(), Some(true));
            assert_eq!(
                pod["securityContext"]["seccompProfile"]["type"].as_str(),
                Some("RuntimeDefault")
            );
            for c in pod["containers"].as_sequence().unwrap() {
                let sc = &c["securityContext"];
                assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false));
                assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true));
                assert_eq!(sc["capabilities"]["drop"][0].as_str(), Some("ALL"));
                assert!(sc["runAsUser"].as_i64().unwrap() > 0);
            }
        }
    }
}

#[test]
fn secured_cluster() {
    check("secured.yaml");
}
