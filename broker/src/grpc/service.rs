//! `MessagingService`: each call checks the ACL, counts itself, and delegates to the
//! module that serves it.

use std::sync::Arc;

use grpc_api::v2::messaging_service_server::MessagingService;
use grpc_api::v2::settings::PubSub;
use grpc_api::v2::*;
use protocol::RemotingCommand;
use protocol::code::request as rq;
use security::acl::{Perm, Resource as AclResource};
use tonic::{Request, Response, Status};

use super::metadata::{CallMeta, Peer};
use super::session::{Session, SessionError, Sessions};
use super::telemetry::TelemetryStream;
use super::{answers, auth, consumer, route, send, status, telemetry, transaction};
use crate::services::Broker;
use crate::services::namesrv_routes::{Lookup, NamesrvRoutes};

pub struct GrpcService {
    pub broker: Arc<Broker>,
    pub sessions: Arc<Sessions>,
    /// The bound gRPC port, published in routes.
    pub port: u16,
    /// Routes across broker groups, from the nameservers.
    pub routes: NamesrvRoutes,
}

type Reply<T> = Result<Response<T>, Status>;
type Empty<T> = std::pin::Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send>>;

fn name(r: &Option<grpc_api::v2::Resource>) -> &str {
    r.as_ref().map(|r| r.name.as_str()).unwrap_or("")
}

impl GrpcService {
    // tonic's Status is what every MessagingService method answers with.
    #[allow(clippy::result_large_err)]
    fn session(&self, meta: &CallMeta) -> Result<Arc<Session>, Status> {
        self.sessions
            .get_or_open(&self.broker, &meta.client_id, meta.peer)
            .map_err(|e| match e {
                SessionError::Full(_) => {
                    self.broker
                        .metrics
                        .limits
                        .refusals
                        .count("grpcMaxConnections");
                    Status::resource_exhausted(e.to_string())
                }
                SessionError::SourceFull { .. } => {
                    self.broker
                        .metrics
                        .limits
                        .refusals
                        .count("grpcMaxConnectionsPerIp");
                    Status::resource_exhausted(e.to_string())
                }
                SessionError::Foreign { .. } => Status::permission_denied(e.to_string()),
            })
    }

    /// The topic's queues across broker groups; this broker's own while the
    /// nameservers have no usable route. This group is added when the route lacks it
    /// (a topic created here since the last registration).
    async fn route(
        &self,
        topic: &Resource,
        deadline: Option<std::time::Duration>,
    ) -> Option<Vec<MessageQueue>> {
        let mut queues = self.route_unnarrowed(topic, deadline).await?;
        route::narrow_types(&self.broker, topic, &mut queues);
        Some(queues)
    }

    async fn route_unnarrowed(
        &self,
        topic: &Resource,
        deadline: Option<std::time::Duration>,
    ) -> Option<Vec<MessageQueue>> {
        let local = || route::local_queues(&self.broker, topic, self.port);
        let Lookup::Route(r) = self
            .routes
            .lookup(&self.broker, &topic.name, deadline)
            .await
        else {
            return local();
        };
        let mut queues = route::cluster_queues(&r, topic);
        if queues.is_empty() {
            return local();
        }
        let here = &self.broker.config.broker.broker_name;
        if !r.queue_datas.iter().any(|q| &q.broker_name == here) {
            queues.extend(local().unwrap_or_default());
        }
        Some(queues)
    }

    fn record(&self, method: &'static str, code: Code) {
        self.broker.metrics.grpc.request(method, code.as_str_name());
    }

    fn record_status(&self, method: &'static str, status: Option<&grpc_api::v2::Status>) {
        let code = status.map_or(Code::Ok, |s| {
            Code::try_from(s.code).unwrap_or(Code::InternalServerError)
        });
        self.record(method, code);
    }

    /// A consumption call: SUB on the topic and the group (as a 4.x pull needs), from
    /// the caller the signature names.
    fn consumer_check<T>(
        &self,
        request: &Request<T>,
        meta: &CallMeta,
        topic: &str,
        group: &str,
    ) -> Result<auth::Caller, Status> {
        let mut needs = Vec::with_capacity(2);
        if !topic.is_empty() {
            needs.push((AclResource::topic(topic), Perm::SUB));
        }
        if !group.is_empty() {
            needs.push((AclResource::group(group), Perm::SUB));
        }
        auth::check(&self.broker, request.metadata(), meta.peer.ip(), &needs)
    }

    /// Registers the session's client like a 4.x HEART_BEAT: a producer under each topic
    /// it publishes to (see [`transaction::producer_group`]), a consumer in its group.
    fn register(
        &self,
        session: &Session,
        meta: &CallMeta,
        caller: &auth::Caller,
        group: Option<&str>,
    ) {
        let mut producers = Vec::new();
        let mut consumers = Vec::new();
        for t in session.published.lock().iter() {
            producers.push(serde_json::json!({ "groupName": transaction::producer_group(t) }));
        }
        if let Some(g) = group.filter(|g| !g.is_empty()) {
            consumers.push(serde_json::json!({
                "groupName": g,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet": [],
                "unitMode": false,
            }));
        }
        if producers.is_empty() && consumers.is_empty() {
            return;
        }
        let body = serde_json::json!({
            "clientID": meta.client_id,
            "producerDataSet": producers,
            "consumerDataSet": consumers,
        });
        let mut cmd =
            RemotingCommand::bare_request(rq::HEART_BEAT).with_body(body.to_string().into_bytes());
        cmd.language = meta.language;
        if let Some(ak) = &caller.access_key {
            cmd.ext_fields
                .insert(security::sign::ACCESS_KEY, ak.as_str());
        }
        if let Err(e) = crate::handlers::client::heartbeat(&self.broker, &session.conn(), &cmd) {
            tracing::debug!(client = %meta.client_id, error = %e, "5.x heartbeat not registered");
        }
    }
}

#[tonic::async_trait]
impl MessagingService for GrpcService {
    async fn query_route(&self, request: Request<QueryRouteRequest>) -> Reply<QueryRouteResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        let topic = req.topic.clone().unwrap_or_default();
        auth::check(&self.broker, request.metadata(), meta.peer.ip(), &[])?;
        let deadline = route::deadline(request.metadata());
        let (st, queues) = match self.route(&topic, deadline).await {
            Some(q) => (status::ok(), q),
            None => (
                status::of(
                    Code::TopicNotFound,
                    format!("topic {} does not exist", topic.name),
                ),
                Vec::new(),
            ),
        };
        self.record("QueryRoute", Code::try_from(st.code).unwrap_or(Code::Ok));
        Ok(Response::new(QueryRouteResponse {
            status: Some(st),
            message_queues: queues,
        }))
    }

    async fn heartbeat(&self, request: Request<HeartbeatRequest>) -> Reply<HeartbeatResponse> {
        let meta = CallMeta::read(&request);
        let group = name(&request.get_ref().group).to_owned();
        let needs: Vec<_> = if group.is_empty() {
            Vec::new()
        } else {
            vec![(AclResource::group(&group), Perm::SUB)]
        };
        let caller = auth::check(&self.broker, request.metadata(), meta.peer.ip(), &needs)?;
        let session = self.session(&meta)?;
        self.register(&session, &meta, &caller, Some(&group));
        self.record("Heartbeat", Code::Ok);
        Ok(Response::new(HeartbeatResponse {
            status: Some(status::ok()),
        }))
    }

    async fn send_message(
        &self,
        request: Request<SendMessageRequest>,
    ) -> Reply<SendMessageResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        let topics: Vec<&str> = req.messages.iter().map(|m| name(&m.topic)).collect();
        let needs: Vec<_> = topics
            .iter()
            .map(|t| (AclResource::topic(t), Perm::PUB))
            .collect();
        auth::check(&self.broker, request.metadata(), meta.peer.ip(), &needs)?;
        let session = self.session(&meta)?;
        if req.messages.is_empty() {
            self.record("SendMessage", Code::BadRequest);
            return Ok(Response::new(SendMessageResponse {
                status: Some(status::of(Code::BadRequest, "no message to send")),
                entries: Vec::new(),
            }));
        }
        // A batch is one topic's, as the 5.x clients build it (and as a 4.x batch is):
        // otherwise one call could auto-create a topic per message.
        if topics.iter().any(|t| *t != topics[0]) {
            self.record("SendMessage", Code::BadRequest);
            return Ok(Response::new(SendMessageResponse {
                status: Some(status::of(
                    Code::BadRequest,
                    "the messages of one SendMessage must share one topic",
                )),
                entries: Vec::new(),
            }));
        }
        let mut entries = Vec::with_capacity(req.messages.len());
        for m in &req.messages {
            entries.push(send::send_one(&self.broker, &session, m).await);
        }
        // The call's status is the first failure's (5.x answers so for a batch).
        let first_bad = entries
            .iter()
            .filter_map(|e| e.status.clone())
            .find(|s| s.code != Code::Ok as i32);
        let st = first_bad.unwrap_or_else(status::ok);
        self.record(
            "SendMessage",
            Code::try_from(st.code).unwrap_or(Code::InternalServerError),
        );
        Ok(Response::new(SendMessageResponse {
            status: Some(st),
            entries,
        }))
    }

    async fn query_assignment(
        &self,
        request: Request<QueryAssignmentRequest>,
    ) -> Reply<QueryAssignmentResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        self.consumer_check(&request, &meta, name(&req.topic), name(&req.group))?;
        let queues = match &req.topic {
            Some(t) => self.route(t, route::deadline(request.metadata())).await,
            None => None,
        };
        let reply = consumer::query_assignment(req, queues);
        self.record_status("QueryAssignment", reply.status.as_ref());
        Ok(Response::new(reply))
    }

    type ReceiveMessageStream = Empty<ReceiveMessageResponse>;

    async fn receive_message(
        &self,
        request: Request<ReceiveMessageRequest>,
    ) -> Reply<Self::ReceiveMessageStream> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        let topic = req
            .message_queue
            .as_ref()
            .map_or("", |q| name(&q.topic))
            .to_owned();
        self.consumer_check(&request, &meta, &topic, name(&req.group))?;
        let connection = request
            .extensions()
            .get::<Peer>()
            .map(|p| Arc::clone(&p.bytes));
        if let Some(key) = answers::over_budget(&self.broker, connection.as_deref()) {
            self.broker.metrics.limits.refusals.count(key);
            self.record("ReceiveMessage", Code::TooManyRequests);
            let st = status::of(
                Code::TooManyRequests,
                format!(
                    "the answers not yet read on this connection or broker are over {key}; \
                     read them before receiving more"
                ),
            );
            return Ok(Response::new(Box::pin(futures::stream::once(async move {
                Ok(ReceiveMessageResponse {
                    content: Some(grpc_api::v2::receive_message_response::Content::Status(st)),
                })
            }))));
        }
        let deadline = route::deadline(request.metadata());
        let answers = consumer::receive(&self.broker, req, deadline).await;
        let first = answers.first().and_then(|a| match &a.content {
            Some(grpc_api::v2::receive_message_response::Content::Status(s)) => Some(s.clone()),
            _ => None,
        });
        self.record_status("ReceiveMessage", first.as_ref());
        Ok(Response::new(answers::charged(
            &self.broker,
            connection,
            answers,
        )))
    }

    async fn ack_message(&self, request: Request<AckMessageRequest>) -> Reply<AckMessageResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        self.consumer_check(&request, &meta, name(&req.topic), name(&req.group))?;
        let reply = consumer::ack(&self.broker, req);
        self.record_status("AckMessage", reply.status.as_ref());
        Ok(Response::new(reply))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: Request<ForwardMessageToDeadLetterQueueRequest>,
    ) -> Reply<ForwardMessageToDeadLetterQueueResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        self.consumer_check(&request, &meta, name(&req.topic), name(&req.group))?;
        let reply = consumer::forward_to_dead_letter(&self.broker, req).await;
        self.record_status("ForwardMessageToDeadLetterQueue", reply.status.as_ref());
        Ok(Response::new(reply))
    }

    type PullMessageStream = Empty<PullMessageResponse>;

    async fn pull_message(&self, _: Request<PullMessageRequest>) -> Reply<Self::PullMessageStream> {
        Err(consumer::never("PullMessage"))
    }

    async fn update_offset(&self, _: Request<UpdateOffsetRequest>) -> Reply<UpdateOffsetResponse> {
        Err(consumer::never("UpdateOffset"))
    }

    async fn get_offset(&self, _: Request<GetOffsetRequest>) -> Reply<GetOffsetResponse> {
        Err(consumer::never("GetOffset"))
    }

    async fn query_offset(&self, _: Request<QueryOffsetRequest>) -> Reply<QueryOffsetResponse> {
        Err(consumer::never("QueryOffset"))
    }

    async fn end_transaction(
        &self,
        request: Request<EndTransactionRequest>,
    ) -> Reply<EndTransactionResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        let topic = name(&req.topic).to_owned();
        auth::check(
            &self.broker,
            request.metadata(),
            meta.peer.ip(),
            &[(AclResource::topic(&topic), Perm::PUB)],
        )?;
        let (code, message) = transaction::end(&self.broker, req).await;
        self.record("EndTransaction", code);
        Ok(Response::new(EndTransactionResponse {
            status: Some(status::of(code, message)),
        }))
    }

    type TelemetryStream = TelemetryStream;

    async fn telemetry(
        &self,
        request: Request<tonic::Streaming<TelemetryCommand>>,
    ) -> Reply<Self::TelemetryStream> {
        let meta = CallMeta::read(&request);
        let caller = auth::check(&self.broker, request.metadata(), meta.peer.ip(), &[])?;
        let session = self.session(&meta)?;
        let mut inbound = request.into_inner();
        // The first command must be the client's Settings: registering the client needs them.
        // A stream that never sends them would hold this call (and its session) open:
        // they must come within `grpcFirstRequestTimeoutMillis`, as a connection's first
        // bytes must.
        let wait = std::time::Duration::from_millis(
            self.broker
                .config
                .broker
                .grpc_first_request_timeout_millis
                .max(100),
        );
        let first = tokio::time::timeout(wait, inbound.message())
            .await
            .map_err(|_| {
                Status::deadline_exceeded(format!(
                    "no Settings on the Telemetry stream within {} ms \
                     (grpcFirstRequestTimeoutMillis)",
                    wait.as_millis()
                ))
            })??
            .ok_or_else(|| Status::invalid_argument("Telemetry stream closed before Settings"))?;
        let Some(telemetry_command::Command::Settings(s)) = &first.command else {
            return Err(Status::invalid_argument(
                "the first Telemetry command must be Settings",
            ));
        };
        let answer = telemetry::answer_settings(&self.broker, &session, s);
        let group = match &s.pub_sub {
            Some(PubSub::Subscription(sub)) => sub.group.as_ref().map(|g| g.name.clone()),
            _ => None,
        };
        self.register(&session, &meta, &caller, group.as_deref());
        tracing::debug!(
            client = %meta.client_id,
            language = meta.language.name(),
            version = %meta.version,
            "5.x client settings received"
        );
        let rest = telemetry::serve(Arc::clone(&self.broker), session, meta, inbound)?;
        self.record("Telemetry", Code::Ok);
        let gauge = self.broker.metrics.grpc.stream_opened();
        let first = futures::stream::once(async move { Ok(answer) });
        let stream = futures::StreamExt::chain(first, rest);
        let stream = futures::StreamExt::map(stream, move |item| {
            let _held = &gauge;
            item
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn notify_client_termination(
        &self,
        request: Request<NotifyClientTerminationRequest>,
    ) -> Reply<NotifyClientTerminationResponse> {
        let meta = CallMeta::read(&request);
        auth::check(&self.broker, request.metadata(), meta.peer.ip(), &[])?;
        self.sessions
            .close(&self.broker, &meta.client_id, meta.peer);
        self.record("NotifyClientTermination", Code::Ok);
        Ok(Response::new(NotifyClientTerminationResponse {
            status: Some(status::ok()),
        }))
    }

    async fn change_invisible_duration(
        &self,
        request: Request<ChangeInvisibleDurationRequest>,
    ) -> Reply<ChangeInvisibleDurationResponse> {
        let meta = CallMeta::read(&request);
        let req = request.get_ref();
        self.consumer_check(&request, &meta, name(&req.topic), name(&req.group))?;
        let reply = consumer::change_invisible(&self.broker, req);
        self.record_status("ChangeInvisibleDuration", reply.status.as_ref());
        Ok(Response::new(reply))
    }

    async fn recall_message(
        &self,
        _: Request<RecallMessageRequest>,
    ) -> Reply<RecallMessageResponse> {
        Err(consumer::never("RecallMessage"))
    }

    async fn sync_lite_subscription(
        &self,
        _: Request<SyncLiteSubscriptionRequest>,
    ) -> Reply<SyncLiteSubscriptionResponse> {
        Err(consumer::never("SyncLiteSubscription"))
    }
}
