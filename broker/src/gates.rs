//! The admission gates of the broker's listeners, from broker.conf. The remoting port
//! (one gate with the VIP port), the HA port and the metrics/health port share one
//! mechanism ([`security::conn_gate`]): a cap, a per-source share, slots reserved for new
//! sources, exemptions and a first-request deadline, each with a key per listener.

use std::sync::Arc;
use std::time::Duration;

use security::conn_gate::{ConnGate, GateLimits};

use crate::config::BrokerConfig;
use crate::metrics::limits::{LimitMetrics, Listener};

/// `listener`'s gate, counting into `metrics`.
pub fn gate(b: &BrokerConfig, metrics: &LimitMetrics, listener: Listener) -> Arc<ConnGate> {
    ConnGate::new(limits(b, listener), metrics.listener(listener))
}

/// `listener`'s bounds from the config.
pub fn limits(b: &BrokerConfig, listener: Listener) -> GateLimits {
    let (max, per_source, first_request_ms) = match listener {
        Listener::Remoting => (
            b.max_connections,
            b.max_connections_per_ip,
            b.first_request_timeout_millis,
        ),
        Listener::Ha => (
            b.ha_max_connections,
            b.ha_max_connections_per_ip,
            b.ha_handshake_timeout_millis,
        ),
        Listener::Http => (
            b.http_max_connections,
            b.http_max_connections_per_ip,
            b.http_first_request_timeout_millis,
        ),
        Listener::Grpc => (
            b.grpc_max_connections,
            b.grpc_max_connections_per_ip,
            b.grpc_first_request_timeout_millis,
        ),
    };
    GateLimits {
        max: max as usize,
        per_source: per_source as usize,
        reserve_percent: b.connection_reserve_percent.0,
        exempt: b.connection_limit_exempt_addresses.clone(),
        first_request: Duration::from_millis(first_request_ms.max(100)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn each_listener_reads_its_own_keys() {
        let c = Config::from_properties(
            "maxConnections=100\nmaxConnectionsPerIp=7\nhaMaxConnections=6\n\
             haMaxConnectionsPerIp=2\nhttpMaxConnections=9\nhttpMaxConnectionsPerIp=3\n\
             connectionReservePercent=50\nconnectionLimitExemptAddresses=10.1.0.0/16\n\
             firstRequestTimeoutMillis=1500\nhttpFirstRequestTimeoutMillis=2500\n\
             haHandshakeTimeoutMillis=3500\n",
        )
        .unwrap();
        let b = &c.broker;
        let r = limits(b, Listener::Remoting);
        assert_eq!((r.max, r.per_source, r.reserve_percent), (100, 7, 50));
        assert_eq!(r.first_request, Duration::from_millis(1500));
        assert!(r.exempt.contains("10.1.2.3".parse().unwrap()));
        let h = limits(b, Listener::Ha);
        assert_eq!((h.max, h.per_source), (6, 2));
        assert_eq!(h.first_request, Duration::from_millis(3500));
        let w = limits(b, Listener::Http);
        assert_eq!((w.max, w.per_source), (9, 3));
        assert_eq!(w.first_request, Duration::from_millis(2500));
        assert!(
            c.render()
                .contains("connectionLimitExemptAddresses=10.1.0.0/16\n")
        );
    }

    #[test]
    fn defaults_cap_every_source_and_keep_a_reserve() {
        let b = BrokerConfig::default();
        for l in [
            Listener::Remoting,
            Listener::Ha,
            Listener::Http,
            Listener::Grpc,
        ] {
            let g = limits(&b, l);
            assert!(g.per_source > 0 && g.per_source < g.max, "{l:?}");
            assert!(g.reserve_percent > 0, "{l:?}");
            assert!(ConnGate::new(g, Default::default()).reserved() > 0, "{l:?}");
        }
        assert_eq!(b.max_connections_per_ip, 1000);
    }

    #[test]
    fn bad_values_name_the_key() {
        for bad in [
            "connectionLimitExemptAddresses=10.0.0.*",
            "connectionReservePercent=101",
        ] {
            let e = Config::from_properties(bad).unwrap_err();
            let key = bad.split('=').next().unwrap();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
}
