//! Deep and wide SQL92 selectors on every path that compiles one: HEART_BEAT (even with
//! `enablePropertyFilter=false`), PULL_MESSAGE with a selector, CHECK_CLIENT_CONFIG. A
//! 2 KB heartbeat once overflowed a worker's stack and took the process; now each is one
//! refused request whose remark names the limit.

use e2e::Client;
use e2e::broker_harness::{TempBroker, pull, send_v2};
use e2e::wait::runtime;
use protocol::RemotingCommand;
use protocol::code::{request, response};

use crate::common::{heartbeat, refusals, sql_subscription, victim_is_served};

/// The shapes that crashed or could crash: nesting by parentheses, NOT, unary minus and
/// `=` chains, and width by AND/OR chains and IN lists.
fn attack_shapes() -> Vec<(&'static str, String, &'static str)> {
    vec![
        (
            "1,000 parentheses (2 KB)",
            format!("{}a = 1{}", "(".repeat(1000), ")".repeat(1000)),
            "filterSqlMaxDepth",
        ),
        (
            "2,000 NOTs",
            format!("{}a = 1", "NOT ".repeat(2000)),
            "filterSqlMaxDepth",
        ),
        (
            "2,000 unary minus",
            format!("{}a > 1", "- ".repeat(2000)),
            "filterSqlMaxDepth",
        ),
        (
            "a 2,000-link = chain",
            format!("a = 1{}", " = TRUE".repeat(2000)),
            "filterSqlMaxDepth",
        ),
        (
            "a 1,500-term AND chain",
            vec!["a=1"; 1500].join(" AND "),
            "filterSqlMaxNodes",
        ),
        (
            "a 4,500-item IN list",
            format!("a IN ({})", vec!["''"; 4500].join(",")),
            "filterSqlMaxNodes",
        ),
        (
            "a 1 MB selector",
            vec!["a=1"; 200_000].join(" OR "),
            "filterSqlMaxLength",
        ),
    ]
}

fn check_client_config(selector: &str) -> RemotingCommand {
    let body = serde_json::json!({
        "clientId": "127.0.0.2@attacker",
        "group": "attack-group",
        "subscriptionData": {
            "topic": "AttackTopic",
            "subString": selector,
            "subVersion": 1,
            "expressionType": "SQL92"
        }
    });
    RemotingCommand::bare_request(request::CHECK_CLIENT_CONFIG)
        .with_body(serde_json::to_vec(&body).expect("json"))
}

fn pull_with(selector: &str) -> RemotingCommand {
    let mut cmd = pull("attack-group", "AttackTopic", 0, 0, 32, None, selector);
    cmd.ext_fields.insert("expressionType", "SQL92");
    cmd
}

fn assert_refused(r: &RemotingCommand, key: &str, what: &str, path: &str) {
    assert_eq!(
        r.code,
        response::SUBSCRIPTION_PARSE_FAILED,
        "{what} on {path}: {:?}",
        r.remark
    );
    let remark = r.remark.as_deref().unwrap_or("");
    assert!(remark.contains(key), "{what} on {path}: remark {remark:?}");
    // The selector is quoted, not echoed whole.
    assert!(
        remark.len() < 1024,
        "{what} on {path}: a {} byte remark",
        remark.len()
    );
}

/// Default config: the heartbeat compiles every SQL92 subscription although property
/// filtering is off, so every shape reaches the parser.
#[test]
fn deep_selectors_in_heartbeats_fail_one_request_with_the_default_config() {
    let mut b = TempBroker::start(None, &[]);
    runtime().block_on(async {
        let attacker = Client::connect(b.broker.port).await.expect("connect");
        for (i, (what, selector, key)) in attack_shapes().into_iter().enumerate() {
            let hb = heartbeat(
                "127.0.0.2@attacker",
                "attack-group",
                vec![sql_subscription("AttackTopic", &selector, i as i64 + 1)],
            );
            let r = attacker.request(hb).await.expect("heartbeat answered");
            assert_refused(&r, key, what, "HEART_BEAT");
        }
        victim_is_served(&mut b.broker).await;
        for key in [
            "filterSqlMaxDepth",
            "filterSqlMaxNodes",
            "filterSqlMaxLength",
        ] {
            assert!(
                refusals(b.broker.http_port, key).await >= 1.0,
                "{key} not counted"
            );
        }
    });
}

/// `enablePropertyFilter=true`: pulls and CHECK_CLIENT_CONFIG reach the parser too.
#[test]
fn deep_selectors_in_pulls_and_client_checks_fail_one_request() {
    let mut b = TempBroker::start(None, &[("enablePropertyFilter", "true")]);
    runtime().block_on(async {
        let attacker = Client::connect(b.broker.port).await.expect("connect");
        // The topic must exist for a pull to get as far as its selector.
        let r = attacker
            .request(send_v2("AttackTopic", 0, b"m", ""))
            .await
            .expect("send");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        for (what, selector, key) in attack_shapes() {
            let r = attacker.request(pull_with(&selector)).await.expect("pull");
            assert_refused(&r, key, what, "PULL_MESSAGE");
            let r = attacker
                .request(check_client_config(&selector))
                .await
                .expect("check answered");
            assert_refused(&r, key, what, "CHECK_CLIENT_CONFIG");
        }
        // The same connection still works: a selector within budget is accepted.
        let r = attacker
            .request(check_client_config("(a = 1) AND NOT (b > 2)"))
            .await
            .expect("check");
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        victim_is_served(&mut b.broker).await;
    });
}

/// The limits are broker.conf keys: a broker configured tighter refuses what the
/// default accepts.
#[test]
fn the_selector_budget_follows_broker_conf() {
    let mut b = TempBroker::start(
        None,
        &[
            ("enablePropertyFilter", "true"),
            ("filterSqlMaxDepth", "4"),
            ("filterSqlMaxNodes", "16"),
        ],
    );
    runtime().block_on(async {
        let c = Client::connect(b.broker.port).await.expect("connect");
        let r = c
            .request(check_client_config("NOT NOT (a = 1)"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS, "{:?}", r.remark);
        let r = c
            .request(check_client_config("NOT NOT NOT (a = 1)"))
            .await
            .unwrap();
        assert_refused(&r, "filterSqlMaxDepth", "depth 5", "CHECK_CLIENT_CONFIG");
        let wide = ["a=1"; 6].join(" OR ");
        let r = c.request(check_client_config(&wide)).await.unwrap();
        assert_refused(&r, "filterSqlMaxNodes", "19 nodes", "CHECK_CLIENT_CONFIG");
        victim_is_served(&mut b.broker).await;
    });
}
