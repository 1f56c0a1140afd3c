//! What Prometheus sees of a Broker: its ServiceMonitor and PrometheusRule (when the
//! cluster serves the monitoring API) and the operator's per-group and per-member gauges.

use std::collections::BTreeMap;

use kube::Resource;

use super::driver::GroupRun;
use crate::admin::RuntimeInfo;
use crate::builders::monitoring::{
    broker_rules, monitoring_labels, prometheus_rule_resource, service_monitor,
    service_monitor_resource,
};
use crate::crd::Broker;
use crate::metrics::MemberLabels;
use crate::names::{BrokerNames, headless_selector, object_labels};
use crate::reconcile::apply::{apply_dynamic, delete_dynamic_if_exists};
use crate::reconcile::{Context, Error};

pub fn record_member_metrics(
    ctx: &Context,
    names: &BrokerNames,
    groups: &[crate::crd::GroupStatus],
    runs: &[GroupRun],
    runtime: &BTreeMap<String, RuntimeInfo>,
) {
    for (g, run) in groups.iter().zip(runs) {
        let labels = crate::metrics::GroupLabels {
            resource_namespace: names.namespace.clone(),
            broker: names.cluster.clone(),
            broker_name: g.broker_name.clone(),
        };
        ctx.metrics.note_group(&labels);
        let master_ready = g
            .members
            .iter()
            .any(|m| m.role == crate::crd::MemberRole::Master && m.ready);
        ctx.metrics
            .master_ready
            .get_or_create(&labels)
            .set(i64::from(master_ready));
        ctx.metrics.epoch.get_or_create(&labels).set(g.epoch);
        match g.master_max_offset {
            Some(o) => {
                ctx.metrics.master_max_offset.get_or_create(&labels).set(o);
            }
            None => {
                ctx.metrics.master_max_offset.remove(&labels);
            }
        }
        ctx.metrics
            .set_failover_phase(&labels, run.state.phase.name());
        for m in &g.members {
            let labels = MemberLabels {
                resource_namespace: names.namespace.clone(),
                broker: names.cluster.clone(),
                pod: m.pod.clone(),
            };
            let flush_behind = runtime
                .get(&m.pod)
                .and_then(RuntimeInfo::flush_behind_bytes);
            ctx.metrics.set_member(
                &labels,
                m.replication_lag_bytes,
                m.dispatch_behind_bytes,
                flush_behind,
            );
        }
    }
}

pub async fn apply_monitoring(
    broker: &Broker,
    names: &BrokerNames,
    ctx: &Context,
) -> Result<(), Error> {
    if !ctx.monitoring_available {
        return Ok(());
    }
    let labels = monitoring_labels(
        &object_labels(&names.selector()),
        &ctx.settings.monitoring_labels,
    );
    let owner = broker.controller_owner_ref(&());
    let object_name = format!("{}-broker", names.cluster);
    if broker.spec.metrics.service_monitor {
        let sm = service_monitor(
            &object_name,
            &names.namespace,
            &labels,
            &headless_selector(names.selector()),
            &broker.spec.metrics.interval,
            owner.clone(),
        );
        apply_dynamic(&ctx.client, &service_monitor_resource(), &sm).await?;
    } else {
        delete_dynamic_if_exists(
            &ctx.client,
            &service_monitor_resource(),
            &names.namespace,
            &object_name,
        )
        .await?;
    }
    if !broker.spec.metrics.prometheus_rule {
        delete_dynamic_if_exists(
            &ctx.client,
            &prometheus_rule_resource(),
            &names.namespace,
            &object_name,
        )
        .await?;
    } else {
        let rules = broker_rules(
            &format!("{}-broker", names.cluster),
            &names.namespace,
            &names.headless_service,
            &labels,
            owner,
            &ctx.settings.runbook_base_url,
        );
        apply_dynamic(&ctx.client, &prometheus_rule_resource(), &rules).await?;
    }
    Ok(())
}
