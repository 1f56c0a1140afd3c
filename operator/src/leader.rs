//! Leader election on a `coordination.k8s.io/v1` Lease, so two operator replicas can run
//! with one of them active. The decision is a pure function; writes are optimistic
//! (resourceVersion-checked), so two candidates never both win.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, PostParams};

/// What a candidate should do with the lease it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it, or the holder stopped renewing: take it over.
    Acquire,
    /// We hold it: renew.
    Renew,
    /// Someone else holds a live lease.
    Follow,
}

pub fn decide(spec: Option<&LeaseSpec>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    match spec.holder_identity.as_deref() {
        Some(holder) if holder == identity => Decision::Renew,
        None | Some("") => Decision::Acquire,
        Some(_) => {
            let duration = SignedDuration::from_secs(i64::from(
                spec.lease_duration_seconds.unwrap_or(15).max(1),
            ));
            let expired = spec
                .renew_time
                .as_ref()
                .is_none_or(|renewed| renewed.0 + duration < now);
            if expired {
                Decision::Acquire
            } else {
                Decision::Follow
            }
        }
    }
}

pub struct LeaderElector {
    api: Api<Lease>,
    name: String,
    identity: String,
    lease_duration: Duration,
}

impl LeaderElector {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        lease_duration: Duration,
    ) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            lease_duration,
        }
    }

    /// One round: acquire or renew if possible. `Ok(true)` while we are the leader.
    pub async fn try_lead(&self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let current = self.api.get_opt(&self.name).await?;
        let decision = decide(
            current.as_ref().and_then(|l| l.spec.as_ref()),
            &self.identity,
            now,
        );
        if decision == Decision::Follow {
            return Ok(false);
        }
        let previous = current
            .as_ref()
            .and_then(|l| l.spec.clone())
            .unwrap_or_default();
        let transitions = previous.lease_transitions.unwrap_or(0);
        let spec = LeaseSpec {
            holder_identity: Some(self.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX),
            ),
            renew_time: Some(MicroTime(now)),
            acquire_time: match decision {
                Decision::Renew => previous.acquire_time.clone(),
                _ => Some(MicroTime(now)),
            },
            lease_transitions: Some(match decision {
                Decision::Acquire if current.is_some() => transitions + 1,
                _ => transitions,
            }),
            ..LeaseSpec::default()
        };
        let result = match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await
            }
        };
        match result {
            Ok(_) => Ok(true),
            // Someone else wrote first (create race or stale resourceVersion).
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Interval between acquisition attempts of a follower.
    pub fn renew_every(&self) -> Duration {
        self.lease_duration / 3
    }

    /// Interval between renewals of the leader: several attempts fit in the renew
    /// deadline (client-go: 2 s within 10 s).
    pub fn retry_period(&self, renew_deadline: Duration) -> Duration {
        (renew_deadline / 5).max(Duration::from_millis(100))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed: i64, duration: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.to_owned()),
            renew_time: Some(MicroTime(Timestamp::from_second(renewed).unwrap())),
            lease_duration_seconds: Some(duration),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        let now = Timestamp::from_second(1_000).unwrap();
        assert_eq!(decide(None, "a", now), Decision::Acquire);
        assert_eq!(
            decide(Some(&lease("a", 999, 15)), "a", now),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&lease("b", 990, 15)), "a", now),
            Decision::Follow
        );
        assert_eq!(
            decide(Some(&lease("b", 980, 15)), "a", now),
            Decision::Acquire
        );
        assert_eq!(
            decide(Some(&lease("", 999, 15)), "a", now),
            Decision::Acquire
        );
    }
}
