//! UPDATE_BROKER_CONFIG over real TCP: only allow-listed runtime switches change, a
//! path or command key is refused and changes nothing (CVE-2023-33246), and a
//! brokerPermission change takes effect on sends and on the route the nameserver serves.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker_harness::{TempBroker, send_v2, with_fields};
use e2e::nameserver::Options;
use e2e::wait::{eventually_ok, runtime};
use e2e::{Client, NameServer};
use protocol::RemotingCommand;
use protocol::code::{request, response};

fn update(body: &str) -> RemotingCommand {
    RemotingCommand::bare_request(request::UPDATE_BROKER_CONFIG).with_body(body.as_bytes().to_vec())
}

async fn config_text(c: &Client) -> String {
    let r = c
        .request(RemotingCommand::bare_request(request::GET_BROKER_CONFIG))
        .await
        .expect("get config");
    assert_eq!(r.code, response::SUCCESS);
    String::from_utf8(r.body.to_vec()).expect("utf-8 config")
}

/// The perm the nameserver's route for `topic` carries, once it is `want`.
async fn wait_route_perm(ns: &Client, topic: &str, want: i32) {
    let what = format!("the route of {topic} to get perm {want}");
    eventually_ok(Duration::from_secs(10), &what, || async {
        let r = ns
            .request(with_fields(
                request::GET_ROUTEINFO_BY_TOPIC,
                &[("topic", topic.to_owned())],
            ))
            .await
            .expect("route");
        let body = String::from_utf8_lossy(&r.body).into_owned();
        if r.code == response::SUCCESS && body.contains(&format!("\"perm\":{want}")) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}

#[test]
fn only_allow_listed_keys_change_and_permission_drains_the_broker() {
    let ns = NameServer::start(Options::default());
    let b = TempBroker::start(Some(ns.port), &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let nsc = Client::connect(ns.port).await.expect("connect ns");
        let r = c.request(send_v2("Drain", 0, b"m0", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        wait_route_perm(&nsc, "Drain", 6).await;
        let before = config_text(&c).await;

        // Path and command keys are refused, together with anything sent alongside.
        for body in [
            "storePathRootDir=/tmp/evil\n",
            "brokerPermission=4\nrocketmqHome=/tmp/evil\n",
            "filterServerNums=1\n",
            "listenPort=1\n",
        ] {
            let r = c.request(update(body)).await.unwrap();
            assert_eq!(r.code, response::NO_PERMISSION, "{body}");
            assert!(
                r.remark
                    .as_deref()
                    .is_some_and(|m| m.contains("cannot be changed at runtime")),
                "{:?}",
                r.remark
            );
        }
        let r = c.request(update("brokerPermission=12\n")).await.unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        assert_eq!(
            config_text(&c).await,
            before,
            "refused updates change nothing"
        );

        // Read-only: sends are refused, pulls still served, the route drains writes.
        let r = c.request(update("brokerPermission=4\n")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(config_text(&c).await.contains("brokerPermission=4\n"));
        let r = c.request(send_v2("Drain", 0, b"m1", "")).await.unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        wait_route_perm(&nsc, "Drain", 4).await;

        // And back.
        let r = c.request(update("brokerPermission=6\n")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let r = c.request(send_v2("Drain", 0, b"m2", "")).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        wait_route_perm(&nsc, "Drain", 6).await;
    });
    assert!(
        b.broker.log().contains("broker config update refused"),
        "refusals are logged"
    );
}
