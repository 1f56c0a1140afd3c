//! The alerts (chart PrometheusRule and the per-Broker rule the operator
//! creates) are the ones operators expect, each links a runbook page that exists, none is
//! defined twice, and every metric they (and the dashboard) query is one that its component
//! really exports. An alert on a metric nobody exports never fires, and nothing else
//! would tell.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use operator::builders::monitoring::broker_rules;
use operator::metrics::{
    EventLabels, FailoverLabels, GroupLabels, MemberLabels, Metrics, TopicLabels,
};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The text of every `.rs` file under `dir`.
fn sources(dir: &str) -> String {
    fn walk(dir: &Path, out: &mut String) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push_str(&std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = String::new();
    walk(&root().join(dir), &mut out);
    out
}

/// One alert: its name, the text that defines it and its runbook page.
struct Alert {
    name: String,
    body: String,
    runbook: Option<String>,
}

/// Alerts of the chart's template: each `- alert:` up to the next alert or group.
fn chart_alerts() -> Vec<Alert> {
    let text = read("charts/rmq-operator/templates/prometheusrule.yaml");
    let mut out: Vec<Alert> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix("- alert:") {
            out.push(Alert {
                name: name.trim().to_owned(),
                body: String::new(),
                runbook: None,
            });
        } else if trimmed.starts_with("- name:") {
            // A new group: what follows belongs to no alert until the next one.
            out.push(Alert {
                name: String::new(),
                body: String::new(),
                runbook: None,
            });
        } else if let Some(alert) = out.last_mut() {
            alert.body.push_str(line);
            alert.body.push('\n');
            if let Some(url) = trimmed.strip_prefix("runbook_url:") {
                alert.runbook = url
                    .split('"')
                    .find(|p| p.ends_with(".md"))
                    .map(|p| p.trim_start_matches("%s/").to_owned());
            }
        }
    }
    out.retain(|a| !a.name.is_empty());
    out
}

/// Alerts of the per-Broker rule the operator applies.
fn broker_rule_alerts() -> Vec<Alert> {
    let rule = broker_rules(
        "b-broker",
        "ns",
        "b-broker-headless",
        &BTreeMap::new(),
        None,
        "https://example.org/runbooks/",
    );
    rule.data["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().iter())
        .map(|r| Alert {
            name: r["alert"].as_str().unwrap().to_owned(),
            body: r["expr"].as_str().unwrap().to_owned(),
            runbook: r["annotations"]["runbook_url"]
                .as_str()
                .and_then(|u| u.strip_prefix("https://example.org/runbooks/"))
                .map(str::to_owned),
        })
        .collect()
}

/// Words of `text` that name one of our components' metrics (or kubelet's).
fn metric_names(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|w| {
            ["rmq_operator_", "rmq_namesrv_", "rocketmq_", "kubelet_"]
                .iter()
                .any(|p| w.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// `name` without the suffix the exposition adds to a counter or histogram family.
fn family(name: &str) -> &str {
    ["_total", "_bucket", "_count", "_sum"]
        .iter()
        .find_map(|s| name.strip_suffix(s))
        .unwrap_or(name)
}

/// Why `name` is not exported by the component its prefix names, if it is not.
fn unexported(
    name: &str,
    operator_text: &str,
    broker_src: &str,
    namesrv_src: &str,
) -> Option<String> {
    let base = family(name);
    if let Some(rest) = name.strip_prefix("rmq_operator_") {
        // The operator's own registry: its exposition lists every family by TYPE.
        let typed = |kind: &str| operator_text.contains(&format!("# TYPE {base} {kind}\n"));
        let ok = match name.strip_prefix(base) {
            Some("_total") => typed("counter"),
            Some("_bucket" | "_count" | "_sum") => typed("histogram"),
            _ => typed("gauge"),
        };
        return (!ok).then(|| format!("the operator registers no {rest} of that type"));
    }
    if let Some(rest) = base.strip_prefix("rmq_namesrv_") {
        // The nameserver registers with the `rmq_namesrv` prefix.
        return (!namesrv_src.contains(&format!("\"{rest}\"")))
            .then(|| "nameserver/src registers no such metric".to_owned());
    }
    if name.starts_with("rocketmq_") {
        return (!broker_src.contains(&format!("\"{base}\"")))
            .then(|| "broker/src registers no such metric".to_owned());
    }
    // kubelet's volume statistics: Kubernetes' own names.
    let kubelet = [
        "kubelet_volume_stats_available_bytes",
        "kubelet_volume_stats_capacity_bytes",
    ];
    (!kubelet.contains(&name)).then(|| "not a kubelet volume metric".to_owned())
}

/// The operator's exposition with one series in every family (empty families are not
/// encoded at all).
fn operator_exposition() -> String {
    let m = Metrics::default();
    let group = GroupLabels {
        resource_namespace: "ns".to_owned(),
        broker: "b".to_owned(),
        broker_name: "b-0".to_owned(),
    };
    let member = MemberLabels {
        resource_namespace: "ns".to_owned(),
        broker: "b".to_owned(),
        pod: "b-0-0".to_owned(),
    };
    let outcome = FailoverLabels {
        resource_namespace: "ns".to_owned(),
        broker: "b".to_owned(),
        broker_name: "b-0".to_owned(),
        outcome: "clean",
    };
    m.reconcile_started("Broker");
    m.reconcile_failed("Broker", "kube");
    m.reconcile_finished("Broker", std::time::Duration::from_millis(5));
    m.restarts.get_or_create(&member).inc();
    m.set_member(&member, Some(1), Some(1), Some(1));
    m.epoch.get_or_create(&group).set(1);
    m.master_max_offset.get_or_create(&group).set(1);
    m.master_ready.get_or_create(&group).set(1);
    m.set_failover_phase(&group, "Idle");
    m.failovers.get_or_create(&outcome).inc();
    m.failover_duration.get_or_create(&outcome).observe(1.0);
    m.events
        .get_or_create(&EventLabels {
            kind: "Broker",
            reason: "x".to_owned(),
        })
        .inc();
    m.topic_ready
        .get_or_create(&TopicLabels {
            resource_namespace: "ns".to_owned(),
            topic: "t".to_owned(),
        })
        .set(1);
    m.encode()
}

#[test]
fn the_expected_alerts_exist_once_each_with_a_runbook_page() {
    let chart = chart_alerts();
    let per_broker = broker_rule_alerts();
    let names: BTreeSet<&str> = chart.iter().map(|a| a.name.as_str()).collect();
    for wanted in [
        "RocketMQMasterDown",
        "RocketMQNameServerDown",
        "RocketMQOperatorDown",
        "RocketMQOperatorNoLeader",
        "RocketMQReconcileFailing",
        "RocketMQTopicNotReady",
        "RocketMQSendsRejected",
    ] {
        assert!(names.contains(wanted), "chart has no {wanted}: {names:?}");
    }
    assert_eq!(
        names.len(),
        chart.len(),
        "an alert is defined twice in the chart"
    );
    for a in &per_broker {
        assert!(
            !names.contains(a.name.as_str()),
            "{} is in both the chart and the per-Broker rule",
            a.name
        );
    }
    assert!(per_broker.iter().any(|a| a.name == "RocketMQBrokerDown"));
    for a in chart.iter().chain(&per_broker) {
        let page = a
            .runbook
            .as_deref()
            .unwrap_or_else(|| panic!("{} has no runbook_url", a.name));
        assert!(
            root().join("docs/runbooks").join(page).is_file(),
            "{}: runbook {page} does not exist",
            a.name
        );
    }
}

#[test]
fn every_metric_an_alert_or_the_dashboard_queries_is_exported() {
    let operator_text = operator_exposition();
    let broker_src = sources("broker/src");
    let namesrv_src = sources("nameserver/src");
    let mut used: Vec<(String, String)> = Vec::new();
    for a in chart_alerts().iter().chain(&broker_rule_alerts()) {
        used.extend(
            metric_names(&a.body)
                .into_iter()
                .map(|m| (a.name.clone(), m)),
        );
    }
    let dashboard = read("charts/rmq-operator/dashboards/rmq-rs.json");
    used.extend(
        metric_names(&dashboard)
            .into_iter()
            .map(|m| ("dashboard".to_owned(), m)),
    );
    assert!(used.len() > 10, "found almost no metrics: {used:?}");
    let missing: Vec<String> = used
        .iter()
        .filter_map(|(who, m)| {
            unexported(m, &operator_text, &broker_src, &namesrv_src)
                .map(|why| format!("{who}: {m}: {why}"))
        })
        .collect();
    assert!(missing.is_empty(), "{missing:#?}");
}

/// The checker itself tells a real name from a misspelt one (or it would pass anything).
#[test]
fn the_metric_check_refuses_names_nobody_exports() {
    let operator_text = operator_exposition();
    let broker_src = sources("broker/src");
    let namesrv_src = sources("nameserver/src");
    let check = |m: &str| unexported(m, &operator_text, &broker_src, &namesrv_src);
    assert_eq!(check("rmq_operator_reconcile_failures_total"), None);
    assert_eq!(check("rmq_operator_leader"), None);
    assert_eq!(check("rocketmq_broker_rejected_busy_total"), None);
    assert_eq!(check("rocketmq_broker_send_failed_total"), None);
    assert_eq!(check("rmq_namesrv_live_brokers"), None);
    // Wrong type suffix: the leader gauge has no _total series.
    assert!(check("rmq_operator_leader_total").is_some());
    assert!(check("rmq_operator_reconcile_errors_total").is_some());
    assert!(check("rocketmq_broker_rejected_total").is_some());
    assert!(check("rmq_namesrv_brokers").is_some());
}
