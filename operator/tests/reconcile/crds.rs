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
