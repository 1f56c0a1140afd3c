//! Shared reconciler context and the Event sink.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::admin::Admin;
use crate::builders::Settings;
use crate::metrics::{EventLabels, Metrics};

pub struct Context {
    pub client: Client,
    pub settings: Settings,
    pub admin: Arc<dyn Admin>,
    pub metrics: Arc<Metrics>,
    pub events: EventSink,
    /// Whether the cluster serves `monitoring.coreos.com/v1` (checked at start-up).
    pub monitoring_available: bool,
    /// Live Broker figures and when status was last written (see [`super::broker::live`]).
    pub live: super::broker::live::LiveStatus,
    /// Consecutive failures per object (`kind/namespace/name`), for the error policy.
    failures: Mutex<HashMap<String, u32>>,
}

impl Context {
    pub fn new(
        client: Client,
        settings: Settings,
        admin: Arc<dyn Admin>,
        metrics: Arc<Metrics>,
        monitoring_available: bool,
    ) -> Self {
        let events = EventSink::new(client.clone(), metrics.clone());
        Self {
            client,
            settings,
            admin,
            metrics,
            events,
            monitoring_available,
            live: super::broker::live::LiveStatus::default(),
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure and returns how many happened in a row.
    pub fn note_failure(&self, key: &str) -> u32 {
        let mut map = self.failures.lock().unwrap_or_else(|e| e.into_inner());
        let n = map.entry(key.to_owned()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    pub fn note_success(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
    }
}

/// Publishes `events.k8s.io/v1` Events. Failing to publish never fails a reconcile.
pub struct EventSink {
    recorder: Recorder,
    metrics: Arc<Metrics>,
}

impl EventSink {
    pub fn new(client: Client, metrics: Arc<Metrics>) -> Self {
        let reporter = Reporter {
            controller: "rmq-operator".to_owned(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: Recorder::new(client, reporter),
            metrics,
        }
    }

    pub async fn publish(
        &self,
        kind: &'static str,
        object: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.metrics
            .events
            .get_or_create(&EventLabels {
                kind,
                reason: reason.to_owned(),
            })
            .inc();
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.to_owned(),
            note: Some(note),
            action: action.to_owned(),
            secondary: None,
        };
        if let Err(e) = self.recorder.publish(&event, object).await {
            tracing::warn!(error = %e, reason, "cannot publish event");
        }
    }
}
