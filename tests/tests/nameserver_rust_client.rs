//! The third-party `rocketmq-client-rust` admin client reads routes and cluster info
//! from our nameserver after a fake broker registered over REGISTER_BROKER.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker::FakeBroker;
use e2e::nameserver::Options;
use e2e::{Client, NameServer};
use protocol::code::response;
use rocketmq_client_rust::{
    ClientRuntime, ClientRuntimeConfig, DefaultMQAdminExt, RouteAdmin, TelemetryHandle, TopicAdmin,
};
use rocketmq_runtime::{RuntimeConfig, RuntimeOwner};

#[test]
fn rocketmq_client_rust_admin_reads_our_routes() {
    let ns = NameServer::start(Options::default());
    let owner = RuntimeOwner::plan(RuntimeConfig::server_default("e2e-namesrv-client"))
        .expect("runtime config")
        .build()
        .expect("runtime owner");
    let runtime = ClientRuntime::try_new(
        owner.root_context().component("client"),
        ClientRuntimeConfig::default(),
        TelemetryHandle::noop(),
    )
    .expect("client runtime");

    owner.block_on(async {
        let broker_conn = Client::connect(ns.port).await.unwrap();
        let master = FakeBroker::new("DefaultCluster", "broker-a", "127.0.0.1:10911", 0)
            .topic("RustClientTopic", 4);
        let slave = FakeBroker::new("DefaultCluster", "broker-a", "127.0.0.1:10921", 1)
            .topic("RustClientTopic", 4);
        let r = broker_conn.request(master.register(false)).await.unwrap();
        assert_eq!(r.code, response::SUCCESS);
        let slave_conn = Client::connect(ns.port).await.unwrap();
        slave_conn.request(slave.register(false)).await.unwrap();

        let mut admin = DefaultMQAdminExt::with_timeout(runtime.clone(), Duration::from_secs(5));
        admin.set_namesrv_addr(format!("127.0.0.1:{}", ns.port));
        admin.start().await.expect("admin start");

        let route = admin
            .examine_topic_route_info("RustClientTopic".into())
            .await
            .unwrap_or_else(|e| panic!("route lookup failed: {e:?}\nnameserver log:\n{}", ns.log()))
            .expect("route present");
        assert_eq!(route.queue_datas.len(), 1);
        let qd = &route.queue_datas[0];
        assert_eq!(qd.broker_name.as_str(), "broker-a");
        assert_eq!(
            (qd.read_queue_nums, qd.write_queue_nums, qd.perm),
            (4, 4, 6)
        );
        assert_eq!(route.broker_datas.len(), 1);
        let addrs = route.broker_datas[0].broker_addrs();
        assert_eq!(addrs.get(&0).map(|a| a.as_str()), Some("127.0.0.1:10911"));
        assert_eq!(addrs.get(&1).map(|a| a.as_str()), Some("127.0.0.1:10921"));

        let missing = admin.examine_topic_route_info("NoSuchTopic".into()).await;
        assert!(
            matches!(missing, Ok(None)) || missing.is_err(),
            "{missing:?}"
        );

        let cluster = admin
            .examine_broker_cluster_info()
            .await
            .expect("cluster info");
        let table = cluster.cluster_addr_table.expect("cluster table");
        assert!(table.keys().any(|c| c.as_str() == "DefaultCluster"));

        admin.shutdown().await;
        drop(slave_conn);
        drop(broker_conn);
    });
    let _ = owner.shutdown_background();
}
