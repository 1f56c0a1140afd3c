//! Command-line syntax. Every leaf command carries an example in its `--help`.

use clap::{Args, Parser, Subcommand};

use crate::ops_args::parse_pair;
use crate::output::Format;

/// The `--help` section of the options every command takes (the ACL and TLS ones have
/// their own sections), so that a command's own options stand apart.
const GLOBAL: &str = "Global options";

#[derive(Debug, Parser)]
#[command(
    name = "rmqctl",
    version,
    about = "Administer a RocketMQ 4.x compatible cluster (topics, groups, consumers, messages, brokers, KV config)",
    after_help = "Exit codes: 0 ok, 1 refused or not found, 2 bad command line, 3 nameserver or broker unreachable.\n\nExample:\n  rmqctl -n 127.0.0.1:9876 cluster list"
)]
pub struct Cli {
    /// Nameserver address(es), `host:port[;host:port]`, each with its port as for
    /// mqadmin's -n.
    #[arg(
        short = 'n',
        long,
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876",
        value_parser = parse_namesrv,
        global = true,
        help_heading = GLOBAL
    )]
    pub namesrv: String,
    /// Output format.
    #[arg(
        short = 'o',
        long,
        value_enum,
        default_value = "table",
        global = true,
        help_heading = GLOBAL
    )]
    pub output: Format,
    /// Timeout of each request, in milliseconds.
    #[arg(long, default_value_t = 5000, global = true, help_heading = GLOBAL)]
    pub timeout_ms: u64,
    #[command(flatten)]
    pub auth: rmq_cli::security_args::AuthArgs,
    #[command(flatten)]
    pub tls: rmq_cli::security_args::TlsArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Clusters and their brokers.
    #[command(subcommand)]
    Cluster(ClusterCmd),
    /// Create, update, delete, list and inspect topics.
    #[command(subcommand)]
    Topic(TopicCmd),
    /// Subscription (consumer) groups.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Consumer progress and connections.
    #[command(subcommand)]
    Consumer(ConsumerCmd),
    /// Send, consume, query and view messages.
    #[command(subcommand)]
    Message(MessageCmd),
    /// Broker runtime info and configuration.
    #[command(subcommand)]
    Broker(BrokerCmd),
    /// Nameserver KV configuration.
    #[command(subcommand)]
    Kv(KvCmd),
    /// Producer groups and their connections.
    #[command(subcommand)]
    Producer(crate::ops_args::ProducerCmd),
    /// Nameserver configuration.
    #[command(subcommand)]
    Nameserver(crate::ops_args::NameserverCmd),
}

#[derive(Debug, Subcommand)]
pub enum ClusterCmd {
    /// Every broker of every cluster, with version and today's put/get totals (mqadmin clusterList).
    #[command(after_help = "Example:\n  rmqctl -n 127.0.0.1:9876 cluster list")]
    List,
}

/// Which brokers a write goes to: one broker address, the masters of one cluster, or
/// (neither given) every master the nameserver knows.
#[derive(Debug, Clone, Args)]
pub struct Targets {
    /// Broker address (`host:port`).
    #[arg(short = 'b', long, conflicts_with = "cluster")]
    pub broker: Option<String>,
    /// Cluster name: all its masters.
    #[arg(short = 'c', long)]
    pub cluster: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct TopicSettings {
    /// Read queue count.
    #[arg(short = 'r', long)]
    pub read_queues: Option<i32>,
    /// Write queue count.
    #[arg(short = 'w', long)]
    pub write_queues: Option<i32>,
    /// Permission bits: 2 write, 4 read, 6 read+write.
    #[arg(short = 'p', long)]
    pub perm: Option<i32>,
    /// Ordered topic.
    #[arg(long)]
    pub order: Option<bool>,
    /// The message type 5.x (gRPC) producers may send: NORMAL, FIFO, DELAY, TRANSACTION
    /// or MIXED (RocketMQ 5.x's `message.type` topic attribute; unset: any type).
    #[arg(long, value_name = "TYPE", value_parser = ["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"])]
    pub message_type: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum TopicCmd {
    /// Create a topic (8 read / 8 write queues, perm 6 unless given; mqadmin updateTopic).
    #[command(
        after_help = "Example:\n  rmqctl topic create -t Orders -c DefaultCluster -r 8 -w 8\n  rmqctl topic create -t OrderEvents -c DefaultCluster --message-type FIFO"
    )]
    Create {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        settings: TopicSettings,
    },
    /// Change an existing topic; settings not given keep their value (mqadmin updateTopic).
    #[command(after_help = "Example:\n  rmqctl topic update -t Orders -w 16 -r 16")]
    Update {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        settings: TopicSettings,
    },
    /// Delete a topic from its brokers and from the nameservers (mqadmin deleteTopic).
    #[command(after_help = "Example:\n  rmqctl topic delete -t Orders -c DefaultCluster")]
    Delete {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        /// Only the brokers of this cluster.
        #[arg(short = 'c', long)]
        cluster: Option<String>,
    },
    /// Topic names known to the nameserver (mqadmin topicList).
    #[command(after_help = "Example:\n  rmqctl topic list -c DefaultCluster")]
    List {
        /// Only the topics of this cluster.
        #[arg(short = 'c', long)]
        cluster: Option<String>,
    },
    /// The route (brokers and queue counts) of a topic (mqadmin topicRoute).
    #[command(after_help = "Example:\n  rmqctl topic route -t Orders")]
    Route {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Per-queue min/max offsets and last store time (mqadmin topicStatus).
    #[command(after_help = "Example:\n  rmqctl topic status -t Orders -o json")]
    Status {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct GroupSettings {
    /// Consuming allowed.
    #[arg(long)]
    pub consume_enable: Option<bool>,
    /// Broadcast consumption allowed.
    #[arg(long)]
    pub broadcast: Option<bool>,
    /// A new group starts from the queue's min offset.
    #[arg(long)]
    pub from_min: Option<bool>,
    /// Retry queue count.
    #[arg(long)]
    pub retry_queues: Option<i32>,
    /// Redeliveries before a message goes to the DLQ.
    #[arg(long)]
    pub retry_max_times: Option<i32>,
    /// FIFO group for 5.x consumers (`consumeMessageOrderly`): each queue delivered in
    /// order, one in-flight batch at a time.
    #[arg(long)]
    pub fifo: Option<bool>,
}

#[derive(Debug, Subcommand)]
pub enum GroupCmd {
    /// Create a subscription group (RocketMQ defaults unless given; mqadmin updateSubGroup).
    #[command(
        after_help = "Example:\n  rmqctl group create -g OrderConsumers -c DefaultCluster --retry-max-times 5"
    )]
    Create {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        settings: GroupSettings,
    },
    /// Change an existing group; settings not given keep their value (mqadmin updateSubGroup).
    #[command(
        after_help = "Example:\n  rmqctl group update -g OrderConsumers --consume-enable false"
    )]
    Update {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        #[command(flatten)]
        targets: Targets,
        #[command(flatten)]
        settings: GroupSettings,
    },
    /// Delete a subscription group (mqadmin deleteSubGroup).
    #[command(after_help = "Example:\n  rmqctl group delete -g OrderConsumers --remove-offset")]
    Delete {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        #[command(flatten)]
        targets: Targets,
        /// Also drop the group's committed offsets.
        #[arg(long)]
        remove_offset: bool,
    },
    /// Subscription groups of the brokers (mqadmin has no list command).
    #[command(after_help = "Example:\n  rmqctl group list -c DefaultCluster")]
    List {
        #[command(flatten)]
        targets: Targets,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConsumerCmd {
    /// Per queue: broker offset, consumer offset, lag and last consumed store time (mqadmin consumerProgress).
    #[command(after_help = "Example:\n  rmqctl consumer progress -g OrderConsumers -t Orders")]
    Progress {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        /// Only this topic.
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    /// Clients of a group connected to the brokers, and their subscriptions (mqadmin consumerConnection).
    #[command(after_help = "Example:\n  rmqctl consumer connections -g OrderConsumers")]
    Connections {
        /// Consumer group name.
        #[arg(short = 'g', long)]
        group: String,
    },
    #[command(flatten)]
    Ops(crate::ops_args::ConsumerOpsCmd),
}

#[derive(Debug, Subcommand)]
pub enum MessageCmd {
    /// Send one message and print where it was stored (mqadmin sendMessage).
    #[command(
        after_help = "Example:\n  rmqctl message send -t Orders --body 'hello' --tags paid --keys order-42\n  rmqctl message send -t Orders --body-file order.json\n  echo hello | rmqctl message send -t Orders --body-file -"
    )]
    Send {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        /// Message body (text); or use --body-file.
        #[arg(
            long,
            required_unless_present = "body_file",
            conflicts_with = "body_file"
        )]
        body: Option<String>,
        /// Read the body from this file; `-` reads standard input.
        #[arg(long)]
        body_file: Option<std::path::PathBuf>,
        /// Message tag (the TAGS property), used by tag filtering.
        #[arg(long)]
        tags: Option<String>,
        /// Keys, comma-separated.
        #[arg(short = 'k', long, value_delimiter = ',')]
        keys: Vec<String>,
        /// Queue id (default: the first writable queue).
        #[arg(short = 'q', long)]
        queue: Option<i32>,
        /// Broker name (default: the first broker of the route).
        #[arg(long)]
        broker_name: Option<String>,
        /// Delay level (1..18 with the default levels).
        #[arg(long)]
        delay_level: Option<i32>,
        /// Producer group the message is sent as.
        #[arg(long, default_value = "rmqctl_producer")]
        producer_group: String,
        /// Fail when the topic has no route, instead of sending on the TBW102 route so
        /// that the broker creates the topic (as the Java producer does).
        #[arg(long)]
        no_auto_create: bool,
    },
    /// Pull messages from an offset or a store timestamp, without committing anything (mqadmin consumeMessage).
    #[command(
        after_help = "Example:\n  rmqctl message consume -t Orders --queue 0 --offset 100 --max 10\n  rmqctl message consume -t Orders --timestamp 1700000000000"
    )]
    Consume {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        /// Only this queue (default: all read queues).
        #[arg(short = 'q', long)]
        queue: Option<i32>,
        /// Start offset (default: each queue's min offset).
        #[arg(long, conflicts_with = "timestamp")]
        offset: Option<i64>,
        /// Start at the first message stored at or after this time (ms since epoch).
        #[arg(long)]
        timestamp: Option<i64>,
        /// Most messages printed in all.
        #[arg(long, default_value_t = 32)]
        max: usize,
        /// Tag expression.
        #[arg(long, default_value = "*", conflicts_with = "sql")]
        tags: String,
        /// SQL92 selector over message properties, evaluated by the broker (which needs
        /// enablePropertyFilter=true), e.g. "a > 5 AND TAGS IN ('x')".
        #[arg(long)]
        sql: Option<String>,
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long, default_value = "rmqctl_consumer")]
        group: String,
    },
    /// Messages whose KEYS contain a key (mqadmin queryMsgByKey).
    #[command(after_help = "Example:\n  rmqctl message query -t Orders -k order-42")]
    Query {
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        /// Message key to look up (one of the space-separated KEYS).
        #[arg(short = 'k', long)]
        key: String,
        /// Most messages returned per broker.
        #[arg(long, default_value_t = 64)]
        max: i32,
        /// Earliest store time, ms since epoch.
        #[arg(long, default_value_t = 0)]
        begin: i64,
        /// Latest store time, ms since epoch.
        #[arg(long, default_value_t = i64::MAX)]
        end: i64,
    },
    /// One message by offset msgId, or by client msgId (UNIQ_KEY) when --topic is given (mqadmin queryMsgById / queryMsgByUniqueKey).
    #[command(
        after_help = "Example:\n  rmqctl message view --id 7F00000100002A9F0000000000000000\n  rmqctl message view --id 7F000001A8F218B4AAC2633B1F2B0000 -t Orders"
    )]
    View {
        /// Offset msgId (as printed by a send), or client msgId (UNIQ_KEY) with --topic.
        #[arg(long)]
        id: String,
        /// Topic, needed to look a UNIQ_KEY up.
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
    #[command(flatten)]
    Ops(crate::ops_args::MessageOpsCmd),
}

#[derive(Debug, Subcommand)]
pub enum BrokerCmd {
    /// Runtime statistics, GET_BROKER_RUNTIME_INFO (mqadmin brokerStatus).
    #[command(after_help = "Example:\n  rmqctl broker runtime -b 127.0.0.1:10911")]
    Runtime {
        #[command(flatten)]
        targets: Targets,
    },
    /// Broker configuration.
    #[command(subcommand)]
    Config(BrokerConfigCmd),
    #[command(flatten)]
    Ops(crate::ops_args::BrokerOpsCmd),
}

#[derive(Debug, Subcommand)]
pub enum BrokerConfigCmd {
    /// The broker's effective configuration, or one key of it (mqadmin getBrokerConfig).
    #[command(
        after_help = "Example:\n  rmqctl broker config get -b 127.0.0.1:10911 -k flushDiskType"
    )]
    Get {
        /// Broker address (`host:port`).
        #[arg(short = 'b', long)]
        broker: String,
        /// Only this configuration key.
        #[arg(short = 'k', long)]
        key: Option<String>,
    },
    /// Change runtime-updatable keys, the broker refuses any other with NO_PERMISSION (mqadmin updateBrokerConfig).
    ///
    /// Each broker writes the change into its config file (`-c`) when that file is
    /// writable, so it survives a restart; otherwise (a read-only file, a Kubernetes
    /// ConfigMap) it lasts until the broker restarts, and the broker's answer, printed
    /// here, says so and names the Broker resource field to set.
    #[command(
        after_help = "Example:\n  rmqctl broker config update -c DefaultCluster brokerPermission=4"
    )]
    Update {
        #[command(flatten)]
        targets: Targets,
        /// `key=value` pairs.
        #[arg(required = true, value_parser = parse_pair)]
        entries: Vec<(String, String)>,
    },
}

#[derive(Debug, Subcommand)]
pub enum KvCmd {
    /// Set a value on every nameserver (mqadmin updateKvConfig).
    #[command(
        after_help = "Example:\n  rmqctl kv put --namespace ORDER_TOPIC_CONFIG --key Orders --value 'broker-a:8'"
    )]
    Put {
        /// KV namespace, e.g. ORDER_TOPIC_CONFIG.
        #[arg(long)]
        namespace: String,
        /// Key within the namespace.
        #[arg(short = 'k', long)]
        key: String,
        /// Value to store.
        #[arg(short = 'v', long)]
        value: String,
    },
    /// Read a value; exit code 1 when it is not set (mqadmin has no get command).
    #[command(after_help = "Example:\n  rmqctl kv get --namespace ORDER_TOPIC_CONFIG --key Orders")]
    Get {
        /// KV namespace, e.g. ORDER_TOPIC_CONFIG.
        #[arg(long)]
        namespace: String,
        /// Key within the namespace.
        #[arg(short = 'k', long)]
        key: String,
    },
    /// Remove a value from every nameserver (mqadmin deleteKvConfig).
    #[command(
        after_help = "Example:\n  rmqctl kv delete --namespace ORDER_TOPIC_CONFIG --key Orders"
    )]
    Delete {
        /// KV namespace, e.g. ORDER_TOPIC_CONFIG.
        #[arg(long)]
        namespace: String,
        /// Key within the namespace.
        #[arg(short = 'k', long)]
        key: String,
    },
    /// Every key of a namespace (mqadmin has no list command).
    #[command(after_help = "Example:\n  rmqctl kv list --namespace ORDER_TOPIC_CONFIG")]
    List {
        /// KV namespace, e.g. ORDER_TOPIC_CONFIG.
        #[arg(long)]
        namespace: String,
    },
}

/// `host:port[;host:port]`: each address needs its port (a bare host is a usage error,
/// exit 2, rather than a connection failure later).
fn parse_namesrv(s: &str) -> Result<String, String> {
    for addr in s.split(';').map(str::trim).filter(|a| !a.is_empty()) {
        let port_ok = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !port_ok {
            return Err(format!(
                "{addr:?} is not host:port; give the nameserver's port too, e.g. {addr}:9876"
            ));
        }
    }
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    /// `--help` as the README promises: every leaf command names its mqadmin counterpart
    /// (or says mqadmin has none) and shows an example, and every option says what it is.
    #[test]
    fn every_leaf_command_names_mqadmin_and_every_option_is_described() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                // A command's own options under "Options", the shared ones in sections.
                let own = arg.get_help_heading().is_none();
                if arg.is_global_set() == own && id != "help" && id != "version" {
                    missing.push(format!("{path}: option {id} is in the wrong section"));
                }
                let described = arg
                    .get_help()
                    .is_some_and(|h| !h.to_string().trim().is_empty());
                if !described && id != "help" && id != "version" {
                    missing.push(format!("{path}: option {id} has no description"));
                }
            }
            let subs: Vec<_> = cmd.get_subcommands().collect();
            if subs.is_empty() {
                let text = format!(
                    "{} {}",
                    cmd.get_about().map(|h| h.to_string()).unwrap_or_default(),
                    cmd.get_after_help()
                        .map(|h| h.to_string())
                        .unwrap_or_default()
                );
                if !text.contains("mqadmin") {
                    missing.push(format!("{path}: no mqadmin counterpart named"));
                }
            }
            for s in subs.into_iter().filter(|s| s.get_name() != "help") {
                walk(s, &format!("{path} {}", s.get_name()), missing);
            }
        }
        let mut missing = Vec::new();
        let mut cli = Cli::command();
        cli.build();
        walk(&cli, "rmqctl", &mut missing);
        assert!(missing.is_empty(), "{}", missing.join("\n"));
    }

    #[test]
    fn every_leaf_command_has_an_example() {
        fn walk(cmd: &clap::Command, path: &str) {
            let subs: Vec<_> = cmd.get_subcommands().collect();
            if subs.is_empty() {
                let help = cmd
                    .get_after_help()
                    .map(|h| h.to_string())
                    .unwrap_or_default();
                assert!(help.contains("Example"), "{path} has no example");
            }
            for s in subs {
                walk(s, &format!("{path} {}", s.get_name()));
            }
        }
        Cli::command().debug_assert();
        walk(&Cli::command(), "rmqctl");
        assert_eq!(parse_pair("a=b=c"), Ok(("a".into(), "b=c".into())));
        assert!(parse_pair("novalue").is_err());
        assert!(parse_namesrv("127.0.0.1:9876;10.0.0.2:9876").is_ok());
        assert!(parse_namesrv("[::1]:9876").is_ok());
        assert!(parse_namesrv("127.0.0.1").is_err());
        assert!(parse_namesrv("127.0.0.1:9876;ns2").is_err());
    }
}
