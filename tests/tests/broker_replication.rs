//! Master/slave replication with real broker processes: SYNC_MASTER acknowledges only
//! what a slave holds, slave loss gives SLAVE_NOT_AVAILABLE, a stalled slave gives
//! FLUSH_SLAVE_TIMEOUT, forged acks and wrong secrets are refused, a restarted slave
//! catches up from its own offset, and role changes carry epochs: a stale one is
//! refused and a former master rejoining as slave loses its divergent tail.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use e2e::broker_harness::{
    BrokerProcess, decode_records, ha_status, parked_pulls, pull, send_v2, view, with_fields,
};
use e2e::ha_peer::HaPeer;
use e2e::nameserver::Options;
use e2e::wait::{eventually, eventually_ok, runtime};
use e2e::{Client, NameServer, ports};
use protocol::code::{request, response};

const SECRET: &str = "group-secret";

struct Node {
    broker: BrokerProcess,
    ha_port: u16,
    _dir: tempfile::TempDir,
}

fn start(ns: Option<u16>, extra: &[(&str, &str)]) -> Node {
    let dir = tempfile::tempdir().unwrap();
    let ha_port = ports::free_port();
    let ha = ha_port.to_string();
    let mut conf: Vec<(&str, &str)> = vec![
        ("brokerName", "broker-ha"),
        ("haListenPort", &ha),
        ("haSecret", SECRET),
        ("syncFlushTimeout", "1500"),
        ("slaveSyncInterval", "300"),
        ("haSendHeartbeatInterval", "500"),
    ];
    conf.extend_from_slice(extra);
    let broker = BrokerProcess::start_in(dir.path(), ns, &conf);
    Node {
        broker,
        ha_port,
        _dir: dir,
    }
}

fn offset_of(msg_id: &str) -> i64 {
    i64::from_str_radix(&msg_id[msg_id.len() - 16..], 16).unwrap()
}

async fn send(c: &Client, topic: &str, body: &str) -> (i32, Option<String>) {
    let r = c
        .request(send_v2(topic, 0, body.as_bytes(), ""))
        .await
        .unwrap();
    (r.code, r.ext_fields.get("msgId").map(str::to_owned))
}

async fn role_change(
    c: &Client,
    master: &Node,
    master_id: i64,
    epoch: i32,
) -> (i32, Option<String>) {
    let r = c
        .request(with_fields(
            request::NOTIFY_BROKER_ROLE_CHANGED,
            &[
                ("masterAddress", master.broker.addr()),
                ("masterEpoch", epoch.to_string()),
                ("syncStateSetEpoch", epoch.to_string()),
                ("masterBrokerId", master_id.to_string()),
            ],
        ))
        .await
        .unwrap();
    (r.code, r.remark)
}

async fn same_max_offset(a: &Client, b: &Client) -> bool {
    let (x, y) = (ha_status(a).await, ha_status(b).await);
    x["maxOffset"] == y["maxOffset"]
}

#[test]
fn sync_master_waits_for_the_slave_and_a_restarted_slave_catches_up() {
    let ns = NameServer::start(Options::default());
    let master = start(Some(ns.port), &[("brokerRole", "SYNC_MASTER")]);
    let master_ha = format!("127.0.0.1:{}", master.ha_port);
    let mut slave = start(
        Some(ns.port),
        &[
            ("brokerRole", "SLAVE"),
            ("brokerId", "1"),
            ("haMasterAddress", &master_ha),
            ("registerNameServerPeriod", "10000"),
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        let s = Client::connect(slave.broker.port).await.unwrap();
        eventually(Duration::from_secs(10), "the slave to connect", || async {
            ha_status(&m).await["inSyncSlaveNums"] == 1
        })
        .await;
        // Every SEND_OK means the slave already holds the record: read it there at once.
        for i in 0..20 {
            let (code, id) = send(&m, "Rep", &format!("m{i}")).await;
            assert_eq!(code, response::SUCCESS);
            let body = view(&s, offset_of(&id.unwrap())).await;
            assert_eq!(body.as_deref(), Some(format!("m{i}").as_bytes()));
        }
        // Slaves refuse writes and serve reads (topic synced from the master).
        let (code, _) = send(&s, "Rep", "no").await;
        assert_eq!(code, response::SERVICE_NOT_AVAILABLE);
        eventually(
            Duration::from_secs(15),
            "20 messages readable on the slave",
            || async {
                let r = s
                    .request(pull("G", "Rep", 0, 0, 32, None, "*"))
                    .await
                    .unwrap();
                r.code == response::SUCCESS && decode_records(&r.body).len() == 20
            },
        )
        .await;
        let st = ha_status(&m).await;
        assert_eq!(st["role"], "SYNC_MASTER");
        assert_eq!(st["haConnectionInfo"][0]["inSync"], true);
        let st = ha_status(&s).await;
        assert_eq!(
            (st["role"].as_str(), st["master"].as_bool()),
            (Some("SLAVE"), Some(false))
        );
        assert_eq!(st["haClientRuntimeInfo"]["isActivated"], true);
    });

    slave.broker.terminate();
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        // Stored, but not replicated: SLAVE_NOT_AVAILABLE once the master saw it go.
        eventually(Duration::from_secs(10), "SLAVE_NOT_AVAILABLE", || async {
            send(&m, "Rep", "lonely").await.0 == response::SLAVE_NOT_AVAILABLE
        })
        .await;
        for i in 0..5 {
            assert_eq!(
                send(&m, "Rep", &format!("late{i}")).await.0,
                response::SLAVE_NOT_AVAILABLE
            );
        }
    });
    slave.broker.restart();
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        let s = Client::connect(slave.broker.port).await.unwrap();
        // Holding the bytes is not enough: a SYNC send needs the master to have read the
        // slave's ack and count it in sync again.
        eventually(Duration::from_secs(15), "the slave to catch up", || async {
            same_max_offset(&m, &s).await && ha_status(&m).await["inSyncSlaveNums"] == 1
        })
        .await;
        // It resumed from its own offset: the first message is still there.
        let r = s
            .request(pull("G", "Rep", 0, 0, 1, None, "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::SUCCESS);
        assert_eq!(decode_records(&r.body)[0].body, b"m0");
        assert_eq!(send(&m, "Rep", "again").await.0, response::SUCCESS);
    });
}

#[test]
fn forged_acks_wrong_secrets_and_stalled_slaves_are_handled() {
    let master = start(None, &[("brokerRole", "SYNC_MASTER")]);
    let rt = runtime();
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        assert_eq!(
            send(&m, "F", "first").await.0,
            response::SLAVE_NOT_AVAILABLE
        );

        let (mut wrong, status) = HaPeer::connect(master.ha_port, "broker-ha", "guess").await;
        assert_eq!(status, 1);
        assert!(wrong.dropped_within(Duration::from_secs(3)).await);
        let (mut other_group, status) = HaPeer::connect(master.ha_port, "broker-x", SECRET).await;
        assert_eq!(status, 1);
        assert!(other_group.dropped_within(Duration::from_secs(3)).await);

        // Connected but never acknowledging new data: FLUSH_SLAVE_TIMEOUT.
        let max = ha_status(&m).await["maxOffset"].as_i64().unwrap();
        let (mut stalled, status) = HaPeer::connect(master.ha_port, "broker-ha", SECRET).await;
        assert_eq!(status, 0);
        assert_eq!(stalled.prove_empty().await, 0);
        stalled.read_until(max).await;
        stalled.report(max).await;
        eventually(
            Duration::from_secs(5),
            "the fake slave to register",
            || async {
                ha_status(&m).await["haConnectionInfo"]
                    .as_array()
                    .is_some_and(|a| a.len() == 1)
            },
        )
        .await;
        let started = Instant::now();
        assert_eq!(
            send(&m, "F", "stalled").await.0,
            response::FLUSH_SLAVE_TIMEOUT
        );
        assert!(started.elapsed() >= Duration::from_millis(1400));

        // An ack beyond what the master streamed to it (4.9's HAConnection takes such a
        // report at its word) drops the connection and acknowledges nothing.
        let max = ha_status(&m).await["maxOffset"].as_i64().unwrap();
        stalled.report(max + 1_000_000).await;
        assert!(stalled.dropped_within(Duration::from_secs(3)).await);
        assert_eq!(
            send(&m, "F", "after").await.0,
            response::SLAVE_NOT_AVAILABLE
        );
        let (_, metrics) = e2e::http::get(master.broker.http_port, "/metrics")
            .await
            .unwrap();
        assert!(metrics.contains("rocketmq_ha_forged_acks 1"), "{metrics}");
        assert!(!metrics.contains(SECRET), "{metrics}");
        // GET_BROKER_CONFIG masks the secret.
        let r = m
            .request(with_fields(request::GET_BROKER_CONFIG, &[]))
            .await
            .unwrap();
        let config = String::from_utf8_lossy(&r.body);
        assert!(config.contains("haSecret=******"), "{config}");
        assert!(!config.contains(SECRET), "{config}");
        assert!(!master.broker.log().contains(SECRET));
        assert!(
            metrics.contains("rocketmq_ha_refused_handshakes 2"),
            "{metrics}"
        );
        assert!(metrics.contains("rocketmq_ha_role 1"), "{metrics}");
    });
}

/// A connected slave's reports count only for bytes it proved
/// or was streamed on that connection. A slave proving a short prefix and then claiming
/// the master's whole log (within its max offset, which was all 4.9 and the old check
/// looked at) is dropped; a proof of bytes the master does not have is refused.
#[test]
fn acks_are_bound_to_the_proven_and_streamed_bytes() {
    let master = start(None, &[("brokerRole", "SYNC_MASTER")]);
    let rt = runtime();
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        let big = "x".repeat(1 << 20);
        let mut second = None;
        for i in 0..24 {
            let (code, id) = send(&m, "Big", &big).await;
            assert_eq!(code, response::SLAVE_NOT_AVAILABLE);
            if i == 1 {
                second = id.map(|id| offset_of(&id));
            }
        }
        let end = second.unwrap();
        let max = ha_status(&m).await["maxOffset"].as_i64().unwrap();
        assert!(max > 20 << 20);
        let cache = m
            .request(with_fields(request::GET_BROKER_EPOCH_CACHE, &[]))
            .await
            .unwrap();
        let cache: serde_json::Value = serde_json::from_slice(&cache.body).unwrap();
        let first = &cache["epochList"][0];
        let (epoch, start) = (
            first["epoch"].as_i64().unwrap() as i32,
            first["startOffset"].as_i64().unwrap(),
        );
        assert_eq!(
            (epoch, start),
            (1, 0),
            "a master starts a new term at its log end"
        );
        let file = master
            .broker
            .dir()
            .join("store/commitlog/00000000000000000000");
        let bytes = std::fs::read(&file).unwrap();
        let tail = &bytes[(end as usize).saturating_sub(4096)..end as usize];

        // Bytes the master does not have: refused before any report counts.
        let (mut liar, status) = HaPeer::connect(master.ha_port, "broker-ha", SECRET).await;
        assert_eq!(status, 0);
        let mut forged = tail.to_vec();
        forged[100] ^= 0xff;
        assert_eq!(liar.prove(end, epoch, start, &forged).await, 1);
        assert!(liar.dropped_within(Duration::from_secs(3)).await);

        // A true prefix, then an ack of everything before reading a byte of the stream
        // (the master cannot have streamed 20 MiB into a peer that does not read).
        let (mut greedy, status) = HaPeer::connect(master.ha_port, "broker-ha", SECRET).await;
        assert_eq!(status, 0);
        assert_eq!(greedy.prove(end, epoch, start, tail).await, 0);
        greedy.report(end).await;
        greedy.report(max).await;
        assert!(greedy.dropped_within(Duration::from_secs(5)).await);
        assert_eq!(
            send(&m, "Big", "after").await.0,
            response::SLAVE_NOT_AVAILABLE,
            "the claim acknowledged nothing"
        );
        let (_, metrics) = e2e::http::get(master.broker.http_port, "/metrics")
            .await
            .unwrap();
        assert!(metrics.contains("rocketmq_ha_forged_acks 1"), "{metrics}");
        assert!(
            metrics.contains("rocketmq_ha_refused_histories 1"),
            "{metrics}"
        );
    });
}

#[test]
fn role_changes_carry_epochs_and_a_former_master_loses_its_divergent_tail() {
    let mut a = start(None, &[("brokerRole", "SYNC_MASTER"), ("brokerId", "1")]);
    let a_ha = format!("127.0.0.1:{}", a.ha_port);
    let mut b = start(
        None,
        &[
            ("brokerRole", "SLAVE"),
            ("brokerId", "2"),
            ("haMasterAddress", &a_ha),
        ],
    );
    let rt = runtime();
    let mut b_ids = Vec::new();
    let divergent_offset = rt.block_on(async {
        let ca = Client::connect(a.broker.port).await.unwrap();
        let cb = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(role_change(&ca, &a, 1, 1).await.0, response::SUCCESS);
        assert_eq!(role_change(&cb, &a, 1, 1).await.0, response::SUCCESS);
        eventually(Duration::from_secs(10), "b to follow a", || async {
            ha_status(&ca).await["inSyncSlaveNums"] == 1
        })
        .await;
        for i in 0..10 {
            assert_eq!(
                send(&ca, "E", &format!("common{i}")).await.0,
                response::SUCCESS
            );
        }
        assert_eq!(ha_status(&ca).await["epoch"], 1);
        // b stops; a keeps writing a tail nobody else has (SLAVE_NOT_AVAILABLE, stored).
        drop(cb);
        b.broker.terminate();
        let first_divergent =
            eventually_ok(Duration::from_secs(10), "a to notice b is gone", || async {
                match send(&ca, "E", "divergent").await {
                    (response::SLAVE_NOT_AVAILABLE, id) => Ok(id.map(|i| offset_of(&i))),
                    (code, _) => Err(code),
                }
            })
            .await;
        for _ in 0..5 {
            send(&ca, "E", "divergent").await;
        }
        first_divergent.unwrap()
    });
    a.broker.kill9();
    b.broker.restart();
    rt.block_on(async {
        let cb = Client::connect(b.broker.port).await.unwrap();
        // b becomes master of epoch 2; an order from epoch 1 is stale now.
        assert_eq!(role_change(&cb, &b, 2, 2).await.0, response::SUCCESS);
        let (code, remark) = role_change(&cb, &a, 1, 1).await;
        assert_ne!(code, response::SUCCESS);
        assert!(remark.unwrap_or_default().contains("stale epoch"));
        let st = ha_status(&cb).await;
        assert_eq!(
            (st["master"].as_bool(), st["epoch"].as_i64()),
            (Some(true), Some(2))
        );
        for i in 0..3 {
            let (code, id) = send(&cb, "E", &format!("new{i}")).await;
            assert_eq!(code, response::SLAVE_NOT_AVAILABLE);
            b_ids.push(offset_of(&id.unwrap()));
        }
        assert_eq!(
            b_ids[0], divergent_offset,
            "b's epoch starts where a diverged"
        );
    });
    a.broker.restart();
    rt.block_on(async {
        let ca = Client::connect(a.broker.port).await.unwrap();
        let cb = Client::connect(b.broker.port).await.unwrap();
        assert_eq!(role_change(&ca, &b, 2, 2).await.0, response::SUCCESS);
        eventually(Duration::from_secs(15), "a to converge on b", || async {
            same_max_offset(&ca, &cb).await && ha_status(&cb).await["inSyncSlaveNums"] == 1
        })
        .await;
        for (i, offset) in b_ids.iter().enumerate() {
            assert_eq!(
                view(&ca, *offset).await.as_deref(),
                Some(format!("new{i}").as_bytes())
            );
        }
        let r = ca
            .request(with_fields(request::GET_BROKER_EPOCH_CACHE, &[]))
            .await
            .unwrap();
        let cache: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let epochs: Vec<i64> = cache["epochList"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["epoch"].as_i64().unwrap())
            .collect();
        assert_eq!(epochs, vec![1, 2]);
        let (_, metrics) = e2e::http::get(a.broker.http_port, "/metrics")
            .await
            .unwrap();
        assert!(
            !metrics.contains("rocketmq_ha_truncated_bytes 0"),
            "{metrics}"
        );
        // Replicated again: b's SYNC_MASTER sends succeed.
        assert_eq!(send(&cb, "E", "together").await.0, response::SUCCESS);
    });
}

/// Sends `total` messages of `size` bytes in pipelined batches of 64 over `conns`
/// connections; returns (messages/s, SUCCESS count).
async fn produce(port: u16, conns: usize, total: usize, size: usize) -> (f64, usize) {
    let body = vec![b'x'; size];
    let started = Instant::now();
    let per_conn = total / conns;
    let tasks: Vec<_> = (0..conns)
        .map(|q| {
            let body = body.clone();
            tokio::spawn(async move {
                let c = Client::connect(port).await.unwrap();
                let mut ok = 0;
                let mut sent = 0;
                while sent < per_conn {
                    let n = 64.min(per_conn - sent);
                    let batch = (0..n)
                        .map(|_| send_v2("Bench", q as i32 % 4, &body, ""))
                        .collect();
                    for r in c.pipeline(batch).await.unwrap() {
                        ok += usize::from(r.code == response::SUCCESS);
                    }
                    sent += n;
                }
                ok
            })
        })
        .collect();
    let mut ok = 0;
    for t in tasks {
        ok += t.await.unwrap();
    }
    let rate = (per_conn * conns) as f64 / started.elapsed().as_secs_f64();
    (rate, ok)
}

/// Figures, not assertions: `cargo test -p rmq-e2e-tests --release --test
/// broker_replication -- --ignored --nocapture replication_figures`.
#[test]
#[ignore]
fn replication_figures() {
    let big = [
        ("mappedFileSizeCommitLog", "268435456"),
        ("flushDiskType", "ASYNC_FLUSH"),
    ];
    let rt = runtime();
    // SYNC_MASTER vs ASYNC_MASTER produce rate, same machine, same load.
    let mut rates = Vec::new();
    for role in ["ASYNC_MASTER", "SYNC_MASTER"] {
        let mut conf = big.to_vec();
        conf.push(("brokerRole", role));
        let master = start(None, &conf);
        let master_ha = format!("127.0.0.1:{}", master.ha_port);
        let mut slave_conf = big.to_vec();
        slave_conf.extend([
            ("brokerRole", "SLAVE"),
            ("brokerId", "1"),
            ("haMasterAddress", &master_ha),
        ]);
        let slave = start(None, &slave_conf);
        let (rate, ok) = rt.block_on(async {
            let m = Client::connect(master.broker.port).await.unwrap();
            eventually(Duration::from_secs(10), "slave", || async {
                ha_status(&m).await["haConnectionInfo"]
                    .as_array()
                    .is_some_and(|a| !a.is_empty())
            })
            .await;
            produce(master.broker.port, 8, 80_000, 1024).await
        });
        println!("{role}: {rate:.0} msg/s of 1 KiB, {ok} SEND_OK");
        rates.push(rate);
        drop(slave);
    }
    println!("SYNC/ASYNC produce ratio: {:.2}", rates[1] / rates[0]);

    // Slave catch-up over loopback: the slave stops, ~256 MiB are written, it restarts.
    let master = start(None, &big);
    let master_ha = format!("127.0.0.1:{}", master.ha_port);
    let mut slave_conf = big.to_vec();
    slave_conf.extend([
        ("brokerRole", "SLAVE"),
        ("brokerId", "1"),
        ("haMasterAddress", &master_ha),
    ]);
    let mut slave = start(None, &slave_conf);
    rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        assert_eq!(send(&m, "Bench", "seed").await.0, response::SUCCESS);
        let s = Client::connect(slave.broker.port).await.unwrap();
        eventually(Duration::from_secs(10), "seed replicated", || {
            same_max_offset(&m, &s)
        })
        .await;
    });
    slave.broker.terminate();
    let (from, to) = rt.block_on(async {
        let m = Client::connect(master.broker.port).await.unwrap();
        let from = ha_status(&m).await["maxOffset"].as_i64().unwrap();
        produce(master.broker.port, 8, 60_000, 4096).await;
        (from, ha_status(&m).await["maxOffset"].as_i64().unwrap())
    });
    let started = Instant::now();
    slave.broker.restart();
    // The process is up and recovered; from here on the time is the HA stream's.
    // What the stream already delivered before this point is not counted.
    let (ready, at_ready) = rt.block_on(async {
        let s = Client::connect(slave.broker.port).await.unwrap();
        let at_ready = ha_status(&s).await["maxOffset"].as_i64().unwrap();
        let ready = Instant::now();
        eventually(Duration::from_secs(120), "catch-up", || async {
            ha_status(&s).await["maxOffset"].as_i64() == Some(to)
        })
        .await;
        (ready, at_ready)
    });
    let mb = (to - from) as f64 / 1e6;
    let streamed = (to - at_ready) as f64 / 1e6;
    let total = started.elapsed().as_secs_f64();
    let stream = ready.elapsed().as_secs_f64();
    println!(
        "catch-up: {mb:.0} MB in {total:.2} s incl. slave restart = {:.0} MB/s; \
         the last {streamed:.0} MB in {stream:.2} s once the slave was up = {:.0} MB/s",
        mb / total,
        streamed / stream
    );
}

/// Pulls queue 0 of `topic` at `offset` with long polling until a message comes back;
/// returns its body.
async fn pull_until_found(port: u16, topic: &str, offset: i64, hold_ms: i64) -> Vec<u8> {
    let c = Client::connect(port).await.unwrap();
    loop {
        let r = c
            .request(pull("G_LP", topic, 0, offset, 32, Some(hold_ms), "*"))
            .await
            .unwrap();
        if r.code == response::SUCCESS {
            return decode_records(&r.body).remove(0).body;
        }
    }
}

/// Long polling under confirm-offset visibility (on for SYNC_MASTER): a parked pull gets
/// a message as soon as the slave has acknowledged it, not when its hold ends; while no
/// slave acknowledges, a pull at an unconfirmed offset is held, not answered at once
/// (clients re-pull immediately on PULL_NOT_FOUND, so that would be a tight loop); and
/// when the slave comes back, the confirm offset wakes the parked pull.
#[test]
fn held_pulls_follow_the_confirm_offset() {
    let master = start(None, &[("brokerRole", "SYNC_MASTER")]);
    let port = master.broker.port;
    let master_ha = format!("127.0.0.1:{}", master.ha_port);
    let mut slave = start(
        None,
        &[
            ("brokerRole", "SLAVE"),
            ("brokerId", "1"),
            ("haMasterAddress", &master_ha),
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let m = Client::connect(port).await.unwrap();
        eventually(Duration::from_secs(10), "the slave to connect", || async {
            ha_status(&m).await["inSyncSlaveNums"] == 1
        })
        .await;
        assert_eq!(send(&m, "Lp", "first").await.0, response::SUCCESS);
        let parked = tokio::spawn(pull_until_found(port, "Lp", 1, 20_000));
        eventually(Duration::from_secs(10), "the pull to park", || async {
            parked_pulls(&m).await == 1
        })
        .await;
        assert_eq!(send(&m, "Lp", "second").await.0, response::SUCCESS);
        let body = tokio::time::timeout(Duration::from_secs(10), parked)
            .await
            .expect("the parked pull waited for its hold time")
            .unwrap();
        assert_eq!(body, b"second");
    });
    slave.broker.terminate();
    let unconfirmed = rt.block_on(async {
        let m = Client::connect(port).await.unwrap();
        // Stored but not replicated: SLAVE_NOT_AVAILABLE once the master saw the slave go.
        let offset: i64 = eventually_ok(Duration::from_secs(10), "SLAVE_NOT_AVAILABLE", || async {
            let r = m
                .request(send_v2("Lp", 0, b"unconfirmed", ""))
                .await
                .unwrap();
            if r.code == response::SLAVE_NOT_AVAILABLE {
                Ok(r.ext_fields.get("queueOffset").unwrap().parse().unwrap())
            } else {
                Err(r.code)
            }
        })
        .await;
        let asked = Instant::now();
        let r = m
            .request(pull("G_LP", "Lp", 0, offset, 32, Some(1000), "*"))
            .await
            .unwrap();
        assert_eq!(r.code, response::PULL_NOT_FOUND, "{:?}", r.remark);
        assert!(
            asked.elapsed() >= Duration::from_millis(900),
            "a pull at an unconfirmed offset was answered at once"
        );
        offset
    });
    slave.broker.restart();
    rt.block_on(async {
        let body = tokio::time::timeout(
            Duration::from_secs(15),
            pull_until_found(port, "Lp", unconfirmed, 20_000),
        )
        .await
        .expect("the confirm offset never woke the parked pull");
        assert_eq!(body, b"unconfirmed");
    });
}
