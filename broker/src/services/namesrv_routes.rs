//! Topic routes as the nameservers know them, for QueryRoute across broker groups: a
//! GET_ROUTEINFO_BY_TOPIC to the listed nameservers (`namesrvAddr`, signed as
//! registrations are), bounded in time, with the answers kept `grpcRouteCacheMillis`
//! for at most `grpcRouteCacheMaxTopics` topics so a busy QueryRoute does not turn into
//! one nameserver request per call. 4.x clients do this themselves
//! (`MQClientInstance.updateTopicRouteInfoFromNameServer`); 5.x clients ask a broker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use protocol::RemotingCommand;
use protocol::body::{MASTER_ID, TopicRouteData};
use protocol::code::{request, response};
use protocol::header::GetRouteInfoRequestHeader;

use crate::services::Broker;
use crate::services::namesrv_link::NamesrvLink;
use crate::services::registration::namesrv_client;

/// What the nameservers said about a topic.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup {
    Route(Arc<TopicRouteData>),
    /// Every nameserver that answered knows no route (not registered yet).
    NoRoute,
    /// None answered in time.
    Unreachable,
}

impl Lookup {
    fn outcome(&self) -> &'static str {
        match self {
            Lookup::Route(_) => "namesrv",
            Lookup::NoRoute => "no_route",
            Lookup::Unreachable => "unreachable",
        }
    }
}

#[derive(Default)]
pub struct NamesrvRoutes {
    /// One link per nameserver of the live list, kept across lookups.
    links: Mutex<Vec<Arc<NamesrvLink>>>,
    /// topic → when looked up, and the answer.
    cache: Mutex<HashMap<String, (Instant, Lookup)>>,
    /// Held by the one lookup in flight.
    asking: tokio::sync::Mutex<()>,
}

impl NamesrvRoutes {
    /// `topic`'s route, from the cache while fresh, else from the nameservers within
    /// half the client's `deadline` and `grpcRouteLookupTimeoutMillis`. One lookup is in flight at a
    /// time: calls that miss together wait for it and take its answer from the cache,
    /// so a burst of QueryRoute sends the nameservers one request, and a nameserver
    /// that does not answer holds one request, not one per call. A call whose time
    /// runs out while waiting answers `Unreachable` without caching it.
    pub async fn lookup(&self, broker: &Broker, topic: &str, deadline: Option<Duration>) -> Lookup {
        let b = &broker.config.broker;
        let ttl = Duration::from_millis(b.grpc_route_cache_millis);
        if let Some(hit) = self.fresh(topic, ttl) {
            broker.metrics.grpc.route_lookup("cached");
            return hit;
        }
        // Half the client's deadline at most: the fallback answer must still reach it
        // before the client gives up.
        let bound = Duration::from_millis(b.grpc_route_lookup_timeout_millis)
            .min(deadline.map_or(Duration::MAX, |d| d / 2));
        let until = tokio::time::Instant::now() + bound;
        let Ok(_one) = tokio::time::timeout_at(until, self.asking.lock()).await else {
            broker
                .metrics
                .grpc
                .route_lookup(Lookup::Unreachable.outcome());
            return Lookup::Unreachable;
        };
        if let Some(hit) = self.fresh(topic, ttl) {
            broker.metrics.grpc.route_lookup("cached");
            return hit;
        }
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        let found = tokio::time::timeout_at(until, self.ask(broker, topic, left))
            .await
            .unwrap_or(Lookup::Unreachable);
        broker.metrics.grpc.route_lookup(found.outcome());
        if let Lookup::Route(route) = &found {
            log_groups_without_endpoint(topic, route);
        }
        if !ttl.is_zero() {
            let max = b.grpc_route_cache_max_topics as usize;
            self.remember(topic, found.clone(), max, Instant::now());
        }
        found
    }

    fn fresh(&self, topic: &str, ttl: Duration) -> Option<Lookup> {
        let cache = self.cache.lock();
        let (at, found) = cache.get(topic)?;
        (at.elapsed() < ttl).then(|| found.clone())
    }

    fn remember(&self, topic: &str, found: Lookup, max: usize, now: Instant) {
        if max == 0 {
            return;
        }
        let mut cache = self.cache.lock();
        if cache.len() >= max && !cache.contains_key(topic) {
            // A route is worth more than word that there is none: answers without a
            // route (a flood of made-up names) make room among themselves, and only a
            // route may push out another route.
            let is_route = |l: &Lookup| matches!(l, Lookup::Route(_));
            let oldest_of = |routes: bool| {
                cache
                    .iter()
                    .filter(|(_, (_, l))| is_route(l) == routes)
                    .min_by_key(|(_, (at, _))| *at)
                    .map(|(t, _)| t.clone())
            };
            let victim =
                oldest_of(false).or_else(|| is_route(&found).then(|| oldest_of(true)).flatten());
            match victim {
                Some(t) => {
                    cache.remove(&t);
                }
                // Full of routes: an answer without one is not kept.
                None => return,
            }
        }
        cache.insert(topic.to_owned(), (now, found));
    }

    /// The nameservers in list order; the first route wins.
    async fn ask(&self, broker: &Broker, topic: &str, timeout: Duration) -> Lookup {
        let header = GetRouteInfoRequestHeader {
            topic: topic.to_owned(),
            accept_standard_json_only: Some(true),
        };
        let cmd = RemotingCommand::request(request::GET_ROUTEINFO_BY_TOPIC, &header);
        let mut answered = false;
        for link in self.links(broker) {
            match link.invoke(cmd.clone(), timeout).await {
                Ok(r) if r.code == response::SUCCESS => match TopicRouteData::decode(&r.body) {
                    Ok(route) => return Lookup::Route(Arc::new(route)),
                    Err(e) => {
                        tracing::warn!(namesrv = link.addr(), topic, error = %e, "undecodable route")
                    }
                },
                Ok(r) if r.code == response::TOPIC_NOT_EXIST => answered = true,
                Ok(r) => {
                    tracing::debug!(namesrv = link.addr(), topic, code = r.code, remark = ?r.remark, "route refused")
                }
                Err(e) => {
                    tracing::debug!(namesrv = link.addr(), topic, error = %e, "route lookup failed")
                }
            }
        }
        if answered {
            Lookup::NoRoute
        } else {
            Lookup::Unreachable
        }
    }

    /// The links of the live `namesrvAddr` list (kept for nameservers still listed).
    fn links(&self, broker: &Broker) -> Vec<Arc<NamesrvLink>> {
        let wanted = broker.live.namesrv_addrs();
        let mut links = self.links.lock();
        if links.len() != wanted.len() || links.iter().zip(&wanted).any(|(l, w)| l.addr() != w) {
            let old = std::mem::take(&mut *links);
            *links = wanted
                .into_iter()
                .map(|w| {
                    old.iter()
                        .find(|l| l.addr() == w)
                        .cloned()
                        .unwrap_or_else(|| Arc::new(namesrv_client(broker, w)))
                })
                .collect();
        }
        links.clone()
    }
}

/// Once per lookup (not per cached answer): the groups QueryRoute leaves out because
/// their master registered no gRPC endpoint (a RocketMQ broker, or ours with
/// `grpcServerPort=0`), which a 5.x client could not reach.
fn log_groups_without_endpoint(topic: &str, route: &TopicRouteData) {
    for bd in &route.broker_datas {
        if let Some(master) = bd.master_addr()
            && !bd.grpc_addrs.contains_key(&MASTER_ID)
        {
            tracing::info!(
                topic,
                broker = %bd.broker_name,
                master,
                "QueryRoute leaves out a broker group whose master registered no gRPC endpoint"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_keeps_at_most_max_topics_dropping_the_oldest() {
        let routes = NamesrvRoutes::default();
        let t0 = Instant::now();
        for (i, t) in ["T1", "T2", "T3"].into_iter().enumerate() {
            routes.remember(t, Lookup::NoRoute, 2, t0 + Duration::from_millis(i as u64));
        }
        let cache = routes.cache.lock();
        assert_eq!(cache.len(), 2);
        assert!(!cache.contains_key("T1"), "the oldest went first");
        drop(cache);
        // Refreshing a kept topic evicts nothing; a bound of 0 keeps nothing.
        routes.remember("T3", Lookup::Unreachable, 2, t0 + Duration::from_millis(5));
        assert_eq!(routes.cache.lock().len(), 2);
        assert_eq!(routes.cache.lock()["T3"].1, Lookup::Unreachable);
        let none = NamesrvRoutes::default();
        none.remember("T1", Lookup::NoRoute, 0, t0);
        assert!(none.cache.lock().is_empty());
    }

    #[test]
    fn answers_without_a_route_never_push_out_a_route() {
        let routes = NamesrvRoutes::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let route = || Lookup::Route(Arc::new(TopicRouteData::default()));
        routes.remember("Real1", route(), 3, at(0));
        routes.remember("Real2", route(), 3, at(1));
        // Made-up names take the one free place, then replace each other.
        for i in 0..100 {
            routes.remember(&format!("Junk{i}"), Lookup::NoRoute, 3, at(2 + i));
        }
        {
            let cache = routes.cache.lock();
            assert_eq!(cache.len(), 3);
            assert!(cache.contains_key("Real1") && cache.contains_key("Real2"));
            assert!(cache.contains_key("Junk99"));
        }
        // A route pushes out an answer without one first.
        routes.remember("Real3", route(), 3, at(200));
        let cache = routes.cache.lock();
        assert!(
            ["Real1", "Real2", "Real3"]
                .iter()
                .all(|t| cache.contains_key(*t))
        );
        drop(cache);
        // Full of routes: a further route replaces the oldest route; no-route answers
        // are not kept.
        routes.remember("Junk", Lookup::Unreachable, 3, at(201));
        assert!(!routes.cache.lock().contains_key("Junk"));
        routes.remember("Real4", route(), 3, at(202));
        let cache = routes.cache.lock();
        assert!(!cache.contains_key("Real1") && cache.contains_key("Real4"));
    }
}
