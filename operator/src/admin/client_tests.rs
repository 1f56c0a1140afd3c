//! The admin client against a real TCP peer speaking the remoting codec.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use protocol::code::{request, response};
use protocol::{RemotingCodec, RemotingCommand};
use tokio::net::TcpListener;
use tokio_util::codec::Framed;

use super::*;

/// A peer that answers each request with `answer(request)` and records what it got.
async fn peer(
    answer: impl Fn(&RemotingCommand) -> Option<RemotingCommand> + Send + Sync + 'static,
) -> (String, Arc<Mutex<Vec<RemotingCommand>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let seen = seen2.clone();
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut framed = Framed::new(stream, RemotingCodec::default());
                while let Some(Ok(req)) = framed.next().await {
                    seen.lock().unwrap().push(req.clone());
                    if let Some(reply) = answer(&req) {
                        let _ = framed.send(reply).await;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn client() -> RemotingAdmin {
    RemotingAdmin::new(Duration::from_millis(500))
}

#[tokio::test]
async fn create_topic_sends_the_create_topic_header() {
    let (addr, seen) = peer(|req| Some(RemotingCommand::response_to(req, response::SUCCESS))).await;
    let config = TopicConfig {
        topic: "ORDERS".to_owned(),
        read_queues: 4,
        write_queues: 8,
        perm: 6,
        order: true,
    };
    client().create_topic(&addr, &config).await.unwrap();
    let req = seen.lock().unwrap()[0].clone();
    assert_eq!(req.code, request::UPDATE_AND_CREATE_TOPIC);
    let f = &req.ext_fields;
    assert_eq!(f.get("topic"), Some("ORDERS"));
    assert_eq!(f.get("defaultTopic"), Some("TBW102"));
    assert_eq!(f.get("readQueueNums"), Some("4"));
    assert_eq!(f.get("writeQueueNums"), Some("8"));
    assert_eq!(f.get("perm"), Some("6"));
    assert_eq!(f.get("topicFilterType"), Some("SINGLE_TAG"));
    assert_eq!(f.get("order"), Some("true"));
}

#[tokio::test]
async fn cluster_info_reads_fastjson_bodies() {
    let body = r#"{"brokerAddrTable":{"c-0":{"brokerAddrs":{0:"h:10911"},"brokerName":"c-0","cluster":"c"}},"clusterAddrTable":{"c":["c-0"]}}"#;
    let (addr, _) = peer(move |req| {
        assert_eq!(req.code, request::GET_BROKER_CLUSTER_INFO);
        Some(
            RemotingCommand::response_to(req, response::SUCCESS)
                .with_body(body.as_bytes().to_vec()),
        )
    })
    .await;
    let info = client().cluster_info(&addr).await.unwrap();
    assert_eq!(
        info.masters("c"),
        vec![("c-0".to_owned(), "h:10911".to_owned())]
    );
}

#[tokio::test]
async fn runtime_info_and_deletes_and_config_push() {
    let (addr, seen) = peer(|req| {
        let reply = RemotingCommand::response_to(req, response::SUCCESS);
        Some(if req.code == request::GET_BROKER_RUNTIME_INFO {
            reply.with_body(
                br#"{"table":{"dispatchBehindBytes":"12","commitLogMaxOffset":"4096"}}"#.to_vec(),
            )
        } else {
            reply
        })
    })
    .await;
    let admin = client();
    let info = admin.runtime_info(&addr).await.unwrap();
    assert_eq!(info.dispatch_behind_bytes(), Some(12));
    assert_eq!(info.commit_log_max_offset(), Some(4096));
    admin.delete_topic_in_broker(&addr, "T").await.unwrap();
    admin
        .delete_topic_in_namesrv(&addr, "T", "c")
        .await
        .unwrap();
    let props = BTreeMap::from([("namesrvAddr".to_owned(), "a:9876;b:9876".to_owned())]);
    admin.update_broker_config(&addr, &props).await.unwrap();

    let seen = seen.lock().unwrap();
    assert_eq!(seen[1].code, request::DELETE_TOPIC_IN_BROKER);
    assert_eq!(seen[1].ext_fields.get("topic"), Some("T"));
    assert_eq!(seen[2].code, request::DELETE_TOPIC_IN_NAMESRV);
    assert_eq!(seen[2].ext_fields.get("clusterName"), Some("c"));
    assert_eq!(seen[3].code, request::UPDATE_BROKER_CONFIG);
    assert_eq!(&seen[3].body[..], b"namesrvAddr=a:9876;b:9876\n");
}

#[tokio::test]
async fn refusals_timeouts_and_bad_bodies_are_errors() {
    let (addr, _) = peer(|req| match req.code {
        request::UPDATE_AND_CREATE_TOPIC => {
            Some(RemotingCommand::response_to(req, response::SYSTEM_ERROR).with_remark("slave"))
        }
        request::GET_BROKER_RUNTIME_INFO => Some(
            RemotingCommand::response_to(req, response::SUCCESS).with_body(b"{not json".to_vec()),
        ),
        _ => None,
    })
    .await;
    let admin = client();
    let config = TopicConfig {
        topic: "T".to_owned(),
        read_queues: 1,
        write_queues: 1,
        perm: 6,
        order: false,
    };
    let err = admin.create_topic(&addr, &config).await.unwrap_err();
    assert!(
        matches!(&err, AdminError::Refused { remark, .. } if remark == "slave"),
        "{err}"
    );
    let err = admin.runtime_info(&addr).await.unwrap_err();
    assert!(matches!(err, AdminError::BadBody { .. }), "{err}");
    let err = admin.cluster_info(&addr).await.unwrap_err();
    assert!(matches!(err, AdminError::Timeout { .. }), "{err}");
    let err = admin.cluster_info("127.0.0.1:1").await.unwrap_err();
    assert!(matches!(err, AdminError::Connect { .. }), "{err}");
}

#[tokio::test]
async fn ha_status_and_epoch_cache_round_trip() {
    let (addr, seen) = peer(|req| {
        let body: &[u8] = match req.code {
            907 => br#"{"master":true,"role":"ASYNC_MASTER","epoch":2,"brokerId":0,"maxOffset":77,"confirmOffset":70,"haConnectionInfo":[]}"#,
            1007 => br#"{"brokerName":"b-0","epochList":[{"epoch":2,"startOffset":0,"endOffset":77}],"maxOffset":77}"#,
            _ => return None,
        };
        Some(RemotingCommand::response_to(req, response::SUCCESS).with_body(body.to_vec()))
    })
    .await;
    let admin = client();
    let ha = admin.ha_status(&addr).await.unwrap();
    assert_eq!((ha.master, ha.epoch, ha.max_offset), (true, 2, 77));
    let cache = admin.epoch_cache(&addr).await.unwrap();
    assert_eq!(cache.last_epoch(), Some(2));
    let codes: Vec<i32> = seen.lock().unwrap().iter().map(|r| r.code).collect();
    assert_eq!(codes, [907, 1007]);
}

#[tokio::test]
async fn role_change_sends_the_header_and_reports_refusal_by_name() {
    let (addr, seen) = peer(|req| {
        let epoch: i64 = req.ext_fields.get("masterEpoch")?.parse().ok()?;
        Some(if epoch < 5 {
            RemotingCommand::response_to(req, response::SYSTEM_ERROR).with_remark("stale epoch")
        } else {
            RemotingCommand::response_to(req, response::SUCCESS)
        })
    })
    .await;
    let admin = client();
    let mut change = RoleChange {
        master_address: "m:10911".to_owned(),
        master_epoch: 5,
        sync_state_set_epoch: 5,
        master_broker_id: 2,
    };
    admin.notify_role_changed(&addr, &change).await.unwrap();
    let req = seen.lock().unwrap()[0].clone();
    assert_eq!(req.code, 1008);
    assert_eq!(req.ext_fields.get("masterBrokerId"), Some("2"));
    change.master_epoch = 4;
    let err = admin.notify_role_changed(&addr, &change).await.unwrap_err();
    assert!(
        matches!(&err, AdminError::Refused { request: "NOTIFY_BROKER_ROLE_CHANGED", remark, .. } if remark == "stale epoch"),
        "{err}"
    );
}

#[tokio::test]
async fn credentials_sign_every_request_and_each_call_has_its_own_connection() {
    let (addr, seen) = peer(|req| Some(RemotingCommand::response_to(req, response::SUCCESS))).await;
    let creds = security::sign::Credentials::new("operator-ak", "operator-sk");
    let admin = RemotingAdmin::with_credentials(Duration::from_millis(500), Some(creds));
    admin.delete_topic_in_broker(&addr, "T").await.unwrap();
    admin.delete_topic_in_broker(&addr, "U").await.unwrap();
    let signed = seen.lock().unwrap().clone();
    for req in &signed {
        assert_eq!(req.ext_fields.get("AccessKey"), Some("operator-ak"));
        assert!(security::sign::verify(req, "operator-sk"), "{req:?}");
    }
    // Per-call connections restart the opaque sequence on each connection.
    assert_eq!(signed[0].opaque, signed[1].opaque);
    let (addr, seen) = peer(|req| Some(RemotingCommand::response_to(req, response::SUCCESS))).await;
    client().delete_topic_in_broker(&addr, "T").await.unwrap();
    assert!(
        seen.lock().unwrap()[0]
            .ext_fields
            .get("AccessKey")
            .is_none()
    );
}

/// What a Broker's reconcile does: derive a signing client from the shared unsigned one;
/// the shared one stays unsigned.
#[tokio::test]
async fn a_client_derived_with_credentials_signs_and_the_shared_one_does_not() {
    let (addr, seen) = peer(|req| Some(RemotingCommand::response_to(req, response::SUCCESS))).await;
    let shared = client();
    let creds = security::sign::Credentials::new("operator-ak", "operator-sk");
    let signed = shared.scoped(PeerAccess {
        credentials: Some(creds),
        tls: None,
    });
    signed.delete_topic_in_broker(&addr, "T").await.unwrap();
    shared.delete_topic_in_broker(&addr, "T").await.unwrap();
    let reqs = seen.lock().unwrap().clone();
    assert_eq!(reqs[0].ext_fields.get("AccessKey"), Some("operator-ak"));
    assert!(
        security::sign::verify(&reqs[0], "operator-sk"),
        "{:?}",
        reqs[0]
    );
    assert!(reqs[1].ext_fields.get("AccessKey").is_none());
}
