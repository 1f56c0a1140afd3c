//! Switchover request phase: `rmq-rs.dev/switchover: <pod>` asks for mastership of the
//! pod's group to move to that pod. An annotation naming no pod of this Broker, or a
//! group with no replica to switch over to, is refused with a `SwitchoverRejected`
//! Warning Event and removed; an accepted one becomes the group's failover request and
//! the failover machine removes it once taken up.

use kube::ResourceExt;
use serde_json::json;

use super::Reconciliation;
use crate::crd::Broker;
use crate::names::{ANNOTATION_SWITCHOVER, BrokerNames};
use crate::reconcile::apply::patch_metadata;
use crate::reconcile::{Context, Error};

/// Reads the annotation, refuses it when it cannot be carried out, and returns the
/// group and pod it names when it names a pod of this Broker.
///
/// A refusal for `replicasPerGroup` 1 still returns the target: such a group only
/// reaches the failover machine mid-failover, where the request is what it was.
pub async fn take_request(
    ctx: &Context,
    broker: &Broker,
    rec: &Reconciliation,
) -> Result<Option<(i32, String)>, Error> {
    let annotated = switchover_target(broker, &rec.names);
    if let Some(note) = rejection(annotated.as_ref(), broker.spec.replicas_per_group) {
        clear_switchover_annotation(ctx, broker).await?;
        rec.event(ctx, true, "SwitchoverRejected", "Failover", note)
            .await;
    }
    Ok(annotated.and_then(Result::ok))
}

/// Why a switchover annotation cannot be carried out, if it cannot.
fn rejection(annotated: Option<&Result<(i32, String), String>>, replicas: i32) -> Option<String> {
    match annotated? {
        Err(pod) => Some(format!("{pod} is not a pod of this Broker")),
        Ok((_, pod)) if replicas < 2 => Some(format!(
            "{pod}: replicasPerGroup is 1, so there is no replica to switch over to; raise replicasPerGroup first"
        )),
        Ok(_) => None,
    }
}

pub async fn clear_switchover_annotation(ctx: &Context, broker: &Broker) -> Result<(), Error> {
    patch_metadata::<Broker>(
        &ctx.client,
        &broker.namespace().unwrap_or_default(),
        &broker.name_any(),
        json!({ "annotations": { ANNOTATION_SWITCHOVER: null } }),
    )
    .await
}

/// The group and pod a switchover annotation names, if it names a pod of this Broker.
pub fn switchover_target(
    broker: &Broker,
    names: &BrokerNames,
) -> Option<Result<(i32, String), String>> {
    let pod = broker
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_SWITCHOVER)?
        .trim()
        .to_owned();
    let parsed = pod
        .strip_prefix(&format!("{}-", names.cluster))
        .and_then(|rest| rest.split_once('-'))
        .and_then(|(g, o)| Some((g.parse::<i32>().ok()?, o.parse::<i32>().ok()?)));
    Some(match parsed {
        Some((g, o))
            if (0..broker.spec.groups).contains(&g)
                && (0..broker.spec.replicas_per_group).contains(&o) =>
        {
            Ok((g, pod))
        }
        _ => Err(pod),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::BrokerSpec;

    fn annotated(pod: &str, groups: i32, replicas: i32) -> Broker {
        let mut b = Broker::new(
            "c",
            BrokerSpec {
                groups,
                replicas_per_group: replicas,
                ..BrokerSpec::default()
            },
        );
        b.metadata.annotations = Some(
            [(ANNOTATION_SWITCHOVER.to_owned(), format!(" {pod} "))]
                .into_iter()
                .collect(),
        );
        b
    }

    #[test]
    fn the_annotation_names_a_group_and_pod_of_this_broker() {
        let names = BrokerNames::new("c", "ns");
        let b = annotated("c-1-2", 2, 3);
        let target = switchover_target(&b, &names);
        assert_eq!(target, Some(Ok((1, "c-1-2".to_owned()))));
        assert_eq!(rejection(target.as_ref(), 3), None);
        assert_eq!(
            switchover_target(&Broker::new("c", BrokerSpec::default()), &names),
            None
        );
    }

    #[test]
    fn pods_outside_the_broker_are_refused() {
        let names = BrokerNames::new("c", "ns");
        for pod in ["c-2-0", "c-0-3", "other-0-1", "c-x-1"] {
            let target = switchover_target(&annotated(pod, 2, 3), &names);
            assert_eq!(target, Some(Err(pod.to_owned())));
            let note = rejection(target.as_ref(), 3).unwrap();
            assert!(note.contains("is not a pod of this Broker"), "{note}");
        }
    }

    #[test]
    fn a_single_replica_group_has_nothing_to_switch_over_to() {
        let names = BrokerNames::new("c", "ns");
        let target = switchover_target(&annotated("c-0-0", 1, 1), &names);
        let note = rejection(target.as_ref(), 1).unwrap();
        assert!(note.contains("replicasPerGroup is 1"), "{note}");
    }
}
