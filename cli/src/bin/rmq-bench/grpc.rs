//! The 5.x gRPC transport of the producer and consumer modes (`--grpc HOST:PORT`): the
//! broker's own `apache.rocketmq.v2.MessagingService`, as 5.x clients use it. Sends are
//! SendMessage calls, consumption is ReceiveMessage (POP, long polling) plus AckMessage.
//!
//! Calls are spread over several HTTP/2 connections (`--grpc-connections`), as several
//! clients would open them; each carries the headers 5.x clients send.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use grpc_api::tonic::metadata::MetadataValue;
use grpc_api::tonic::transport::{Channel, Endpoint};
use grpc_api::tonic::{Request, Status};
use grpc_api::v2::messaging_service_client::MessagingServiceClient;
use grpc_api::v2::receive_message_response::Content;
use grpc_api::v2::{
    AckMessageEntry, AckMessageRequest, Code, FilterExpression, FilterType, Message, MessageQueue,
    MessageType, QueryRouteRequest, ReceiveMessageRequest, Resource, SendMessageRequest,
    SystemProperties,
};

/// A received message: its body and what acking it needs.
pub struct Received {
    pub body: Vec<u8>,
    pub message_id: String,
    pub receipt_handle: String,
}

pub struct GrpcLink {
    clients: Vec<MessagingServiceClient<Channel>>,
    next: AtomicUsize,
    ids: std::sync::atomic::AtomicU64,
    client_id: String,
}

/// A failure, labelled the way the summary counts errors.
pub fn label(status: &Status) -> String {
    format!("GRPC_{:?}", status.code()).to_uppercase()
}

fn code_label(code: i32) -> String {
    Code::try_from(code).map_or_else(|_| format!("CODE_{code}"), |c| c.as_str_name().to_owned())
}

fn resource(name: &str) -> Option<Resource> {
    Some(Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    })
}

impl GrpcLink {
    pub async fn connect(endpoint: &str, connections: usize, timeout: Duration) -> Result<Self> {
        if connections == 0 {
            bail!("--grpc-connections must be at least 1");
        }
        let uri = format!("http://{endpoint}");
        let mut clients = Vec::with_capacity(connections);
        for _ in 0..connections {
            let channel = Endpoint::from_shared(uri.clone())
                .with_context(|| format!("gRPC endpoint {endpoint}"))?
                .timeout(timeout)
                .tcp_nodelay(true)
                .connect()
                .await
                .with_context(|| format!("connecting to the gRPC endpoint {endpoint}"))?;
            clients.push(MessagingServiceClient::new(channel));
        }
        Ok(Self {
            clients,
            next: AtomicUsize::new(0),
            ids: std::sync::atomic::AtomicU64::new(0),
            client_id: format!("rmq-bench@{}", std::process::id()),
        })
    }

    /// A unique message id: this process, then a sequence number (hex, as 5.x ids are).
    fn message_id(&self) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        format!("01{:08X}{:016X}", std::process::id(), n)
    }

    fn client(&self) -> MessagingServiceClient<Channel> {
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.clients.len();
        self.clients[i].clone()
    }

    /// `msg` with the headers 5.x clients send.
    fn request<T>(&self, msg: T) -> Request<T> {
        let mut r = Request::new(msg);
        let md = r.metadata_mut();
        if let Ok(v) = MetadataValue::try_from(self.client_id.as_str()) {
            md.insert("x-mq-client-id", v);
        }
        md.insert("x-mq-language", MetadataValue::from_static("RUST"));
        md.insert("x-mq-protocol", MetadataValue::from_static("v2"));
        md.insert(
            "x-mq-client-version",
            MetadataValue::from_static("rmq-bench"),
        );
        r
    }

    /// Sends `bodies` in one SendMessage call; `Err` carries the error label.
    pub async fn send(
        &self,
        topic: &str,
        bodies: Vec<Vec<u8>>,
        tag: Option<&str>,
        keys: Option<String>,
    ) -> Result<(), String> {
        let messages = bodies
            .into_iter()
            .map(|body| Message {
                // 5.x clients name each message (the broker stores it as UNIQ_KEY).
                system_properties: Some(SystemProperties {
                    tag: tag.map(str::to_owned),
                    keys: keys.iter().cloned().collect(),
                    message_type: MessageType::Normal as i32,
                    message_id: self.message_id(),
                    ..SystemProperties::default()
                }),
                topic: resource(topic),
                user_properties: Default::default(),
                body,
            })
            .collect();
        let reply = self
            .client()
            .send_message(self.request(SendMessageRequest { messages }))
            .await
            .map_err(|s| label(&s))?
            .into_inner();
        let code = reply.status.map_or(0, |s| s.code);
        if code != Code::Ok as i32 {
            return Err(code_label(code));
        }
        Ok(())
    }

    /// The topic's readable queues as the endpoint routes them.
    pub async fn queues(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let reply = self
            .client()
            .query_route(self.request(QueryRouteRequest {
                topic: resource(topic),
                endpoints: None,
            }))
            .await
            .map_err(|s| anyhow::anyhow!("QueryRoute of {topic}: {}", s.message()))?
            .into_inner();
        let code = reply.status.as_ref().map_or(0, |s| s.code);
        if code != Code::Ok as i32 {
            bail!("QueryRoute of {topic}: {}", code_label(code));
        }
        Ok(reply.message_queues)
    }

    /// One ReceiveMessage call (long polling up to `hold`).
    pub async fn receive(
        &self,
        group: &str,
        queue: &MessageQueue,
        filter: Option<(&str, bool)>,
        batch: i32,
        hold: Duration,
    ) -> Result<Vec<Received>, String> {
        let filter_expression = filter.map(|(expr, sql)| FilterExpression {
            r#type: if sql {
                FilterType::Sql
            } else {
                FilterType::Tag
            } as i32,
            expression: expr.to_owned(),
        });
        let req = ReceiveMessageRequest {
            group: resource(group),
            message_queue: Some(queue.clone()),
            filter_expression,
            batch_size: batch,
            invisible_duration: Some(grpc_api::prost_types::Duration {
                seconds: 30,
                nanos: 0,
            }),
            auto_renew: false,
            long_polling_timeout: Some(grpc_api::prost_types::Duration {
                seconds: hold.as_secs() as i64,
                nanos: hold.subsec_nanos() as i32,
            }),
            attempt_id: None,
        };
        let mut request = self.request(req);
        // The client's deadline, a little beyond the long poll (as 5.x clients set it).
        request.set_timeout(hold + Duration::from_secs(3));
        let mut stream = self
            .client()
            .receive_message(request)
            .await
            .map_err(|s| label(&s))?
            .into_inner();
        let mut out = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(r)) => match r.content {
                    Some(Content::Message(m)) => {
                        let sys = m.system_properties.unwrap_or_default();
                        out.push(Received {
                            body: m.body,
                            message_id: sys.message_id,
                            receipt_handle: sys.receipt_handle.unwrap_or_default(),
                        });
                    }
                    Some(Content::Status(s))
                        if s.code != Code::Ok as i32 && s.code != Code::MessageNotFound as i32 =>
                    {
                        return Err(code_label(s.code));
                    }
                    _ => {}
                },
                Ok(None) => return Ok(out),
                Err(s) => return Err(label(&s)),
            }
        }
    }

    /// Acks `received` in one AckMessage call.
    pub async fn ack(&self, group: &str, topic: &str, received: &[Received]) -> Result<(), String> {
        let entries = received
            .iter()
            .map(|r| AckMessageEntry {
                message_id: r.message_id.clone(),
                receipt_handle: r.receipt_handle.clone(),
                lite_topic: None,
            })
            .collect();
        let reply = self
            .client()
            .ack_message(self.request(AckMessageRequest {
                group: resource(group),
                topic: resource(topic),
                entries,
            }))
            .await
            .map_err(|s| label(&s))?
            .into_inner();
        let code = reply.status.map_or(0, |s| s.code);
        if code != Code::Ok as i32 {
            return Err(code_label(code));
        }
        Ok(())
    }
}
