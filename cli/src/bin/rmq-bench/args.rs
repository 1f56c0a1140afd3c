//! Command-line syntax of `rmq-bench`.

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "rmq-bench",
    version,
    about = "Load generator for RocketMQ 4.x compatible clusters (public protocol only)",
    after_help = "Examples:\n  rmq-bench -n 127.0.0.1:9876 producer -t BenchTopic -s 1024 -c 32 --mode async -d 20\n  rmq-bench producer -t BenchTopic --rate 5000 -d 20 --json\n  rmq-bench consumer -t BenchTopic -g bench_consumer --from earliest --until-caught-up"
)]
pub struct Cli {
    /// Nameserver address(es), `host:port[;host:port]`.
    #[arg(
        short = 'n',
        long,
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876",
        global = true
    )]
    pub namesrv: String,
    /// Print the final summary as JSON on stdout (progress lines still go to stderr).
    #[arg(long, global = true)]
    pub json: bool,
    /// Add a latency histogram (log-spaced buckets, 50 µs to 100 s) to the summary: in
    /// the text summary, and with --json as `summary.latencyHistogram` plus the same
    /// table on stderr.
    #[arg(long, global = true)]
    pub latency: bool,
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub auth: rmq_cli::security_args::AuthArgs,
    #[command(flatten)]
    pub tls: rmq_cli::security_args::TlsArgs,
    #[command(subcommand)]
    pub mode: Mode,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Run time in seconds, warm-up included (0: until --messages is reached).
    #[arg(short = 'd', long, default_value_t = 20, global = true)]
    pub duration_s: u64,
    /// Seconds at the start not counted in the summary.
    #[arg(long, default_value_t = 0, global = true)]
    pub warmup_s: u64,
    /// Seconds between progress lines.
    #[arg(long, default_value_t = 5, global = true)]
    pub report_interval_s: u64,
    /// Timeout of each request, in milliseconds.
    #[arg(long, default_value_t = 5000, global = true)]
    pub timeout_ms: u64,
    /// Tokio worker threads.
    #[arg(long, default_value_t = 2, global = true)]
    pub threads: usize,
}

#[derive(Debug, Subcommand)]
pub enum Mode {
    /// Send messages and measure send latency.
    #[command(
        after_help = "Example:\n  rmq-bench producer -t BenchTopic -s 1024 -c 16 --mode async --batch 16 -d 20"
    )]
    Producer(ProducerArgs),
    /// Pull messages and measure end-to-end latency from the producer's timestamp.
    #[command(
        after_help = "Example:\n  rmq-bench consumer -t BenchTopic -g bench_consumer --from latest -d 20"
    )]
    Consumer(ConsumerArgs),
    /// Measure a victim's send latency without, then during, a burst of topic creates.
    #[command(
        after_help = "Example:\n  rmq-bench admin-burst --topics 2000 --connections 4 --victim-rate 200 --baseline-s 10 --json"
    )]
    AdminBurst(AdminBurstArgs),
}

#[derive(Debug, Clone, Args)]
pub struct AdminBurstArgs {
    /// Topics created in the burst phase.
    #[arg(long, default_value_t = 2000)]
    pub topics: usize,
    /// Admin connections creating at once, each waiting for an answer before its next
    /// create.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// The victim's sends per second (one sender, open loop).
    #[arg(long, default_value_t = 200)]
    pub victim_rate: u64,
    /// Length of the baseline phase (victim only), in seconds.
    #[arg(long, default_value_t = 10)]
    pub baseline_s: u64,
    /// The victim's topic.
    #[arg(short = 't', long, default_value = "AdminBurstVictim")]
    pub topic: String,
    /// Prefix of the created topics' names.
    #[arg(long, default_value = "AdminBurst")]
    pub prefix: String,
    /// The victim's body size in bytes.
    #[arg(short = 's', long, default_value_t = 1024)]
    pub size: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SendMode {
    /// Each sender waits for the answer before the next send.
    Sync,
    /// Each sender keeps up to --inflight sends outstanding.
    Async,
    /// Fire and forget (no answer, no latency).
    Oneway,
}

#[derive(Debug, Clone, Args)]
pub struct ProducerArgs {
    #[arg(short = 't', long, default_value = "BenchTopic")]
    pub topic: String,
    #[command(flatten)]
    pub grpc: GrpcArgs,
    /// Body size in bytes (at least 12: the timestamp header).
    #[arg(short = 's', long, default_value_t = 1024)]
    pub size: usize,
    /// Concurrent senders.
    #[arg(short = 'c', long, default_value_t = 16)]
    pub concurrency: usize,
    #[arg(long, value_enum, default_value = "sync")]
    pub mode: SendMode,
    /// Outstanding sends per sender in async mode.
    #[arg(long, default_value_t = 8)]
    pub inflight: usize,
    /// Messages per SEND_BATCH_MESSAGE (1: single sends).
    #[arg(long, default_value_t = 1)]
    pub batch: usize,
    /// Open-loop fixed rate in messages/s across all senders; latency is measured from
    /// each message's scheduled time (0: as fast as possible).
    #[arg(long, default_value_t = 0)]
    pub rate: u64,
    /// Stop after this many messages (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub messages: u64,
    /// Give every message a unique key (KEYS), which the broker indexes.
    #[arg(long)]
    pub keys: bool,
    /// Tag of every message.
    #[arg(long)]
    pub tags: Option<String>,
    /// A user property on every message, `NAME=VALUE` (repeatable). `NAME=%N` gives the
    /// i-th message the value i mod N, so that a consumer's `--sql "NAME = 3"` matches
    /// one message in N.
    #[arg(long = "property", value_name = "NAME=VALUE", value_parser = parse_property)]
    pub properties: Vec<BenchProperty>,
    /// Delay level of every message (scheduled delivery).
    #[arg(long)]
    pub delay_level: Option<i32>,
    /// Send half messages and commit each with END_TRANSACTION.
    #[arg(long, conflicts_with_all = ["batch", "delay_level"])]
    pub transactional: bool,
    #[arg(long, default_value = "rmq_bench_producer")]
    pub group: String,
    /// Create the topic with this many queues on every master first.
    #[arg(long)]
    pub create_topic_queues: Option<i32>,
    /// Fail when the topic has no route, instead of sending on the TBW102 route so that
    /// the broker creates the topic (as the Java producer does).
    #[arg(long)]
    pub no_auto_create: bool,
}

/// One `--property` of the producer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchProperty {
    pub name: String,
    pub value: PropertyValue,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PropertyValue {
    Fixed(String),
    /// The message's sequence number modulo this.
    Cycle(u64),
}

impl BenchProperty {
    pub fn value_for(&self, seq: u64) -> String {
        match &self.value {
            PropertyValue::Fixed(v) => v.clone(),
            PropertyValue::Cycle(n) => (seq % n).to_string(),
        }
    }
}

fn parse_property(arg: &str) -> Result<BenchProperty, String> {
    let (name, value) = arg
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=VALUE, got {arg:?}"))?;
    if name.is_empty() || value.is_empty() {
        return Err(format!("expected a non-empty NAME and VALUE, got {arg:?}"));
    }
    let value = match value.strip_prefix('%') {
        Some(n) => match n.parse::<u64>() {
            Ok(n) if n > 0 => PropertyValue::Cycle(n),
            _ => return Err(format!("%N needs a positive whole N, got {value:?}")),
        },
        None => PropertyValue::Fixed(value.to_owned()),
    };
    Ok(BenchProperty {
        name: name.to_owned(),
        value,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StartFrom {
    Earliest,
    Latest,
}

#[derive(Debug, Clone, Args)]
pub struct ConsumerArgs {
    #[arg(short = 't', long, default_value = "BenchTopic")]
    pub topic: String,
    #[command(flatten)]
    pub grpc: GrpcArgs,
    #[arg(short = 'g', long, default_value = "rmq_bench_consumer")]
    pub group: String,
    /// Where each queue starts.
    #[arg(long, value_enum, default_value = "latest")]
    pub from: StartFrom,
    /// Messages per pull.
    #[arg(long, default_value_t = 32)]
    pub pull_batch: i32,
    /// Long-polling hold time of a pull that finds nothing, in ms.
    #[arg(long, default_value_t = 1000)]
    pub hold_ms: i64,
    /// Stop after this many messages (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub messages: u64,
    /// Stop once every queue has been read to its end (catch-up measurement).
    #[arg(long)]
    pub until_caught_up: bool,
    /// Commit consumed offsets for the group with each pull.
    #[arg(long)]
    pub commit: bool,
    /// Hand every Nth consumed message back with CONSUMER_SEND_MSG_BACK, as a consumer whose
    /// listener fails would (0: never). Send-backs run beside the pulls, so comparing runs
    /// with and without them shows what retries cost normal consumption.
    #[arg(long, default_value_t = 0)]
    pub send_back_every: u64,
    /// Subscribe with this SQL92 selector over message properties (the broker filters;
    /// it needs enablePropertyFilter=true) instead of all messages.
    #[arg(long, conflicts_with = "tags")]
    pub sql: Option<String>,
    /// Subscribe with this tag expression (`TagA || TagB`; the broker filters by tag
    /// hash code) instead of all messages.
    #[arg(long)]
    pub tags: Option<String>,
    /// Pull as this many groups at once (`GROUP-0` .. `GROUP-<N-1>`), each reading every
    /// queue: with --hold-ms long, that many idle groups parked in long polls.
    #[arg(long, default_value_t = 1)]
    pub groups: usize,
}

/// The 5.x transport: a broker's gRPC endpoint instead of the remoting protocol.
#[derive(Debug, Clone, Args)]
pub struct GrpcArgs {
    /// Send (SendMessage) or consume (ReceiveMessage + AckMessage, POP) through this
    /// broker's 5.x gRPC endpoint, `host:port`; the topic must exist.
    #[arg(long = "grpc", value_name = "HOST:PORT")]
    pub endpoint: Option<String>,
    /// HTTP/2 connections the calls are spread over.
    #[arg(long, default_value_t = 4)]
    pub grpc_connections: usize,
    /// Consumer: concurrent ReceiveMessage calls (each acks its batch before the next).
    #[arg(long, default_value_t = 8)]
    pub grpc_receivers: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_are_fixed_or_cycle_by_sequence() {
        let fixed = parse_property("region=eu").unwrap();
        assert_eq!(fixed.value_for(7), "eu");
        let cycle = parse_property("a=%10").unwrap();
        assert_eq!(
            (cycle.value_for(3), cycle.value_for(13)),
            ("3".into(), "3".into())
        );
        for bad in ["a", "=x", "a=", "a=%0", "a=%x"] {
            assert!(parse_property(bad).is_err(), "{bad}");
        }
    }
}
