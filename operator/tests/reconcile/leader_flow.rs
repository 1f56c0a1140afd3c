use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use operator::leader::LeaderElector;

use crate::NS;
use crate::fake_api::FakeApi;

#[tokio::test]
async fn one_leader_among_two_candidates() {
    let api = FakeApi::new();
    let lease = Duration::from_secs(15);
    let a = LeaderElector::new(api.client(), NS, "rmq-operator", "pod-a", lease);
    let b = LeaderElector::new(api.client(), NS, "rmq-operator", "pod-b", lease);

    assert!(
        a.try_lead().await.unwrap(),
        "first candidate creates the lease"
    );
    assert!(!b.try_lead().await.unwrap(), "a live lease is respected");
    assert!(a.try_lead().await.unwrap(), "the holder renews");

    let stored = api.get::<Lease>(NS, "rmq-operator").unwrap().spec.unwrap();
    assert_eq!(stored.holder_identity.as_deref(), Some("pod-a"));
    assert_eq!(stored.lease_transitions, Some(0));

    // The holder stops renewing: its renewTime lies far in the past, so b takes over.
    api.edit::<Lease>(
        NS,
        "rmq-operator",
        serde_json::json!({"spec": {"renewTime": "2020-01-01T00:00:00.000000Z"}}),
    );
    assert!(b.try_lead().await.unwrap());
    let stored = api.get::<Lease>(NS, "rmq-operator").unwrap().spec.unwrap();
    assert_eq!(stored.holder_identity.as_deref(), Some("pod-b"));
    assert_eq!(stored.lease_transitions, Some(1));
    assert!(!a.try_lead().await.unwrap());
}
