//! SQL92 property filtering through a real rmq-broker with raw frames: the
//! `enablePropertyFilter` gate, CHECK_CLIENT_CONFIG validation with the error position,
//! pulls that return only matching messages (and skip past non-matching ones), and long
//! polling that wakes a parked SQL92 pull only for a matching message.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::Client;
use e2e::broker_harness::{
    TempBroker, decode_records, parked_pulls, properties, property, pull, send_v2,
};
use e2e::metrics::wait_dispatched;
use e2e::wait::{eventually, runtime};
use protocol::RemotingCommand;
use protocol::code::{request, response};

fn pull_sql(
    topic: &str,
    offset: i64,
    max: i32,
    suspend_ms: Option<i64>,
    sql: &str,
) -> RemotingCommand {
    let mut cmd = pull("sql-group", topic, 0, offset, max, suspend_ms, sql);
    cmd.ext_fields.insert("expressionType", "SQL92");
    cmd
}

fn check_client_config(sql: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientId": "127.0.0.1@sql",
        "group": "sql-group",
        "subscriptionData": {
            "classFilterMode": false,
            "topic": "SqlTopic",
            "subString": sql,
            "tagsSet": [],
            "codeSet": [],
            "subVersion": 1,
            "expressionType": "SQL92"
        }
    });
    RemotingCommand::bare_request(request::CHECK_CLIENT_CONFIG)
        .with_body(serde_json::to_vec(&body).unwrap())
}

async fn send(c: &Client, topic: &str, body: &str, props: &[(&str, &str)]) {
    let r = c
        .request(send_v2(topic, 0, body.as_bytes(), &properties(props)))
        .await
        .unwrap();
    assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
}

/// Pulls `sql` from offset 0 until the queue's end, following nextBeginOffset, once the
/// broker (`http_port`) has dispatched everything sent; returns the bodies delivered.
async fn pull_all(
    http_port: u16,
    c: &Client,
    topic: &str,
    sql: &str,
    expected_end: i64,
) -> Vec<String> {
    wait_dispatched(http_port, Duration::from_secs(10)).await;
    let mut offset = 0;
    let mut out = Vec::new();
    while offset < expected_end {
        let r = c
            .request(pull_sql(topic, offset, 4, None, sql))
            .await
            .unwrap();
        match r.code {
            response::SUCCESS | response::PULL_RETRY_IMMEDIATELY => {}
            other => panic!("pull at {offset} answered {other}: {:?}; {out:?}", r.remark),
        }
        for m in decode_records(&r.body) {
            out.push(String::from_utf8(m.body).unwrap());
        }
        let next: i64 = r
            .ext_fields
            .get("nextBeginOffset")
            .unwrap()
            .parse()
            .unwrap();
        assert!(next > offset, "no progress at {offset}");
        offset = next;
    }
    out
}

#[test]
fn property_filter_off_refuses_sql92_like_4_9() {
    let b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        send(&c, "SqlOff", "m", &[("a", "1")]).await;
        let r = c.request(check_client_config("a > 1")).await.unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("The broker does not support consumer to filter message by SQL92")
        );
        let r = c
            .request(pull_sql("SqlOff", 0, 4, None, "a > 0"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SYSTEM_ERROR);
        assert_eq!(
            r.remark.as_deref(),
            Some("The broker does not support consumer to filter message by SQL92")
        );
    });
}

#[test]
fn check_client_config_reports_the_error_position() {
    let b = TempBroker::start(None, &[("enablePropertyFilter", "true")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        let r = c
            .request(check_client_config("a > 1 AND TAGS IN ('x')"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = c
            .request(check_client_config("a > 1 AND\n b === 2"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
        let remark = r.remark.unwrap_or_default();
        assert!(remark.contains("line 2, column 5"), "{remark}");
        let r = c
            .request(check_client_config("a between 10 and 0"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUBSCRIPTION_PARSE_FAILED);
        // A pull carrying a bad selector is refused too (4.9 would match everything). The
        // topic must exist: TOPIC_NOT_EXIST is checked first, as in 4.9.
        send(&c, "SqlTopic", "m", &[("a", "1")]).await;
        let r = c
            .request(pull_sql("SqlTopic", 0, 4, None, "a >"))
            .await
            .unwrap();
        assert_eq!(
            r.code,
            response::SUBSCRIPTION_PARSE_FAILED,
            "{:?}",
            r.remark
        );
    });
}

#[test]
fn pulls_return_only_matching_messages() {
    let b = TempBroker::start(None, &[("enablePropertyFilter", "true")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        for i in 0..40 {
            let a = i.to_string();
            let tag = ["x", "y"][i % 2];
            send(
                &c,
                "SqlTopic",
                &format!("m{i}"),
                &[("TAGS", tag), ("a", &a)],
            )
            .await;
        }
        send(&c, "SqlTopic", "no-a", &[("TAGS", "x")]).await;
        send(
            &c,
            "SqlTopic",
            "not-a-number",
            &[("TAGS", "x"), ("a", "abc")],
        )
        .await;
        let got = pull_all(
            b.broker.http_port,
            &c,
            "SqlTopic",
            "a >= 30 AND TAGS = 'x' OR a IN ('3')",
            42,
        )
        .await;
        let want: Vec<String> = ["m3", "m30", "m32", "m34", "m36", "m38"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(got, want);
        let got = pull_all(b.broker.http_port, &c, "SqlTopic", "a IS NULL", 42).await;
        assert_eq!(got, vec!["no-a".to_owned()]);
        let r = c
            .request(pull_sql("SqlTopic", 0, 32, None, "TAGS = 'x'"))
            .await
            .unwrap();
        let msgs = decode_records(&r.body);
        assert!(
            msgs.iter()
                .all(|m| property(&m.properties, "TAGS") == Some("x"))
        );
    });
}

#[test]
fn long_polling_wakes_sql92_pulls_only_for_matching_messages() {
    let b = TempBroker::start(None, &[("enablePropertyFilter", "true")]);
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.unwrap();
        send(&c, "SqlHold", "first", &[("a", "0")]).await;
        let end = pull_all(b.broker.http_port, &c, "SqlHold", "a = 0", 1).await;
        assert_eq!(end, vec!["first".to_owned()]);
        let parked = {
            let c2 = Client::connect(b.broker.port).await.unwrap();
            tokio::spawn(async move {
                let r = c2
                    .request(pull_sql("SqlHold", 1, 8, Some(8_000), "a = 7"))
                    .await;
                (r, c2)
            })
        };
        eventually(Duration::from_secs(10), "the pull to park", || async {
            parked_pulls(&c).await == 1
        })
        .await;
        // Had this woken the pull, it would answer PULL_RETRY_IMMEDIATELY at once. Once
        // it is dispatched its arrival has been offered to the parked pull.
        send(&c, "SqlHold", "skip", &[("a", "1")]).await;
        wait_dispatched(b.broker.http_port, Duration::from_secs(10)).await;
        assert_eq!(
            parked_pulls(&c).await,
            1,
            "a non-matching message woke the pull"
        );
        send(&c, "SqlHold", "wanted", &[("a", "7")]).await;
        let (r, _c2) = parked.await.unwrap();
        let r = r.unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let bodies: Vec<Vec<u8>> = decode_records(&r.body)
            .into_iter()
            .map(|m| m.body)
            .collect();
        assert_eq!(bodies, vec![b"wanted".to_vec()]);
    });
}
