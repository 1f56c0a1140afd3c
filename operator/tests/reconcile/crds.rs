//! `crds/` and the chart's copy must equal what the Rust types generate.

#[test]
fn checked_in_crds_match_the_types() {
    let generated = operator::crd::render_yaml().unwrap();
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    for file in [
        "crds/rmq-rs.dev.yaml",
        "charts/rmq-operator/crds/rmq-rs.dev.yaml",
    ] {
        let path = format!("{root}/{file}");
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{file} is stale: regenerate with `rmq-operator crd > {file}`"
        );
    }
}

#[test]
fn crds_carry_printer_columns_short_names_and_status() {
    for crd in operator::crd::all() {
        let names = &crd.spec.names;
        assert!(
            names.short_names.as_ref().is_some_and(|s| !s.is_empty()),
            "{}",
            names.kind
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1alpha1");
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        assert!(version.additional_printer_columns.as_ref().unwrap().len() >= 3);
        assert_eq!(crd.spec.group, "rmq-rs.dev");
    }
}

/// `kubectl scale` works on a NameServer, conditions merge as a map keyed
/// by type under server-side apply, and `kubectl get broker` shows the failover columns.
#[test]
fn scale_subresource_condition_list_maps_and_failover_columns() {
    let crds = operator::crd::all();
    let kind = |k: &str| {
        crds.iter()
            .find(|c| c.spec.names.kind == k)
            .unwrap_or_else(|| panic!("no CRD for {k}"))
    };
    let scale = kind("NameServer").spec.versions[0]
        .subresources
        .as_ref()
        .and_then(|s| s.scale.as_ref())
        .expect("NameServer has a scale subresource");
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert!(scale.status_replicas_path.starts_with(".status."));

    for crd in &crds {
        let schema = serde_json::to_value(&crd.spec.versions[0].schema).unwrap();
        let conditions =
            &schema["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
        assert_eq!(
            conditions["x-kubernetes-list-type"], "map",
            "{}: conditions",
            crd.spec.names.kind
        );
        assert_eq!(
            conditions["x-kubernetes-list-map-keys"],
            serde_json::json!(["type"]),
            "{}",
            crd.spec.names.kind
        );
    }

    let columns: Vec<String> = kind("Broker").spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.json_path.clone())
        .collect();
    for path in [
        ".status.groups[*].masterPod",
        ".status.groups[*].epoch",
        ".status.groups[*].failover.phase",
    ] {
        assert!(columns.iter().any(|c| c == path), "{path} in {columns:?}");
    }
}
