//! UPDATE_BROKER_CONFIG over real TCP: only allow-listed runtime switches change, a
//! path or command key is refused and changes nothing (CVE-2023-33246), and a
//! brokerPermission change takes effect on sends and on the route the nameserver serves.
//! Accepted changes are kept in the `-c` file across a restart when it is writable
//! (comments, order and unknown keys kept); a read-only file keeps them until restart and
//! the answer says so; an unknown key is reported as unknown.
#![allow(clippy::unwrap_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
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

        // Path and command keys are refused, together with anything sent alongside: keys
        // this broker has say they cannot change at runtime, others that they are unknown.
        for (body, says) in [
            (
                "storePathRootDir=/tmp/evil\n",
                "cannot be changed at runtime",
            ),
            (
                "brokerPermission=4\nrocketmqHome=/tmp/evil\n",
                "unknown key rocketmqHome",
            ),
            ("filterServerNums=1\n", "unknown key filterServerNums"),
            ("listenPort=1\n", "cannot be changed at runtime"),
        ] {
            let r = c.request(update(body)).await.unwrap();
            assert_eq!(r.code, response::NO_PERMISSION, "{body}");
            assert!(
                r.remark.as_deref().is_some_and(|m| m.contains(says)),
                "{body}: {:?}",
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

fn value_of(config: &str, key: &str) -> Option<String> {
    config
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
}

/// The harness's broker.conf with a comment on top, an unknown key and a comment below,
/// as a hand-edited file has them.
fn hand_edit(path: &Path) -> String {
    let rendered = fs::read_to_string(path).expect("read broker.conf");
    let text = format!(
        "# broker of site A: edited by hand\n{rendered}shortPollingTimeMills = 1000\n\
         teamOwner=payments\n# keep this comment\n"
    );
    fs::write(path, &text).expect("write broker.conf");
    text
}

#[test]
fn accepted_change_is_written_to_the_config_file_and_survives_a_restart() {
    let mut b = TempBroker::start(None, &[]);
    b.broker.terminate();
    let path = b.broker.conf_path();
    let before = hand_edit(&path);
    b.broker.restart_with_conf_as_is();
    let rt = runtime();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(update(
                "shortPollingTimeMills=1500\nlongPollingEnable=false\n",
            ))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        assert!(
            r.remark
                .as_deref()
                .is_some_and(|m| m.contains("written to")),
            "{:?}",
            r.remark
        );
        let config = config_text(&c).await;
        assert_eq!(
            value_of(&config, "shortPollingTimeMills").as_deref(),
            Some("1500")
        );
    });
    // The key's line changed where it stands, the missing key was appended, and every
    // other line (comments, the unknown key, the order) is as it was.
    let after = fs::read_to_string(&path).expect("read broker.conf");
    let want = before.replace(
        "shortPollingTimeMills = 1000\n",
        "shortPollingTimeMills=1500\n",
    ) + "longPollingEnable=false\n";
    assert_eq!(after, want);

    b.broker.kill9();
    b.broker.restart_with_conf_as_is();
    rt.block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let config = config_text(&c).await;
        assert_eq!(
            value_of(&config, "shortPollingTimeMills").as_deref(),
            Some("1500")
        );
        assert_eq!(
            value_of(&config, "longPollingEnable").as_deref(),
            Some("false")
        );
    });
    assert_eq!(fs::read_to_string(&path).unwrap(), want);
}

#[test]
fn read_only_config_file_keeps_the_change_until_restart_and_says_where_to_make_it() {
    let mut b = TempBroker::start(None, &[]);
    b.broker.terminate();
    let path = b.broker.conf_path();
    let before = hand_edit(&path);
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).expect("chmod");
    b.broker.restart_with_conf_as_is();
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(update("shortPollingTimeMills=1500\n"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let remark = r.remark.unwrap_or_default();
        for says in [
            "until the broker restarts",
            "not writable",
            "spec.config.shortPollingTimeMills",
        ] {
            assert!(remark.contains(says), "{says:?} missing from {remark:?}");
        }
        let config = config_text(&c).await;
        assert_eq!(
            value_of(&config, "shortPollingTimeMills").as_deref(),
            Some("1500")
        );
    });
    assert_eq!(fs::read_to_string(&path).unwrap(), before);
}

#[test]
fn unknown_key_is_reported_as_unknown_with_the_likely_key() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let before = config_text(&c).await;
        let r = c
            .request(update("shortPollingTimeMils=1500\n"))
            .await
            .unwrap();
        assert_eq!(r.code, response::NO_PERMISSION);
        let remark = r.remark.unwrap_or_default();
        assert!(
            remark.contains("unknown key shortPollingTimeMils")
                && remark.contains("did you mean shortPollingTimeMills?")
                && !remark.contains("cannot be changed at runtime"),
            "{remark}"
        );
        assert_eq!(config_text(&c).await, before);
    });
}
