//! Syntax of the day-2 commands: offset reset and skip, consumer status, DLQ
//! re-send, producer connections, a broker's write permission, nameserver configuration.
//! Each help names the mqadmin command it stands for.

use clap::{Args, Subcommand};

/// Where `consumer reset` moves the group.
#[derive(Debug, Clone, Args)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// Store time to rewind (or, with --force, advance) to: ms since the epoch, or `now`.
    #[arg(long, value_parser = parse_time)]
    pub to_time: Option<i64>,
    /// Each queue's max offset: skip the backlog (mqadmin skipAccumulatedMessage).
    #[arg(long)]
    pub to_latest: bool,
    /// Each queue's first stored message (resetOffsetByTime with timestamp 0).
    #[arg(long)]
    pub to_earliest: bool,
}

#[derive(Debug, Subcommand)]
pub enum ConsumerOpsCmd {
    /// Move a group's offsets on a topic (mqadmin resetOffsetByTime / skipAccumulatedMessage).
    /// Connected consumers are told to rewind (RESET_CONSUMER_CLIENT_OFFSET) and the brokers'
    /// committed offsets change too, so an offline group resumes there. Without --force a
    /// queue only moves backwards; --to-latest and --to-earliest imply --force.
    #[command(
        after_help = "Example:\n  rmqctl consumer reset -g OrderConsumers -t Orders --to-time 1700000000000\n  rmqctl consumer reset -g OrderConsumers -t Orders --to-latest"
    )]
    Reset {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Also move queues forward (a later time than the committed position).
        #[arg(short = 'f', long)]
        force: bool,
    },
    /// Each connected consumer's own view of its offsets on a topic, read from the clients
    /// through the brokers (mqadmin getConsumerStatus).
    #[command(after_help = "Example:\n  rmqctl consumer status -g OrderConsumers -t Orders")]
    Status {
        /// Consumer (subscription) group name.
        #[arg(short = 'g', long)]
        group: String,
        /// Topic name.
        #[arg(short = 't', long)]
        topic: String,
        /// Only this client id.
        #[arg(short = 'i', long)]
        client: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum MessageOpsCmd {
    /// Re-send a group's dead letters (%DLQ%GROUP) to their original topic (RETRY_TOPIC),
    /// with their body, keys, tags and user properties and their original UNIQ_KEY
    /// (mqadmin has none; its consumeMessage per id is the closest). Idempotent: a message
    /// whose copy is already in the target topic is skipped (see docs/runbooks/consumer-lag-dlq.md).
    #[command(
        after_help = "Example:\n  rmqctl message resend-dlq -g OrderConsumers --max 100\n  rmqctl message resend-dlq -g OrderConsumers --to-topic OrdersReplay"
    )]
    ResendDlq {
        /// Consumer group whose DLQ is re-sent.
        #[arg(short = 'g', long)]
        group: String,
        /// Most messages re-sent by this run.
        #[arg(long, default_value_t = 1000)]
        max: usize,
        /// Send to this topic instead of each message's original topic.
        #[arg(long)]
        to_topic: Option<String>,
        /// Producer group the messages are re-sent as.
        #[arg(long, default_value = "rmqctl_dlq_resend")]
        producer_group: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BrokerOpsCmd {
    /// Stop routing writes to a broker: every nameserver drops the write bit of its topics
    /// until it re-registers with write permission (mqadmin wipeWritePerm).
    #[command(after_help = "Example:\n  rmqctl broker wipe-write-perm --broker-name broker-a")]
    WipeWritePerm {
        /// Broker name (brokerName), as `cluster list` shows it.
        #[arg(long)]
        broker_name: String,
    },
    /// Give a broker's topics their write bit back on every nameserver (mqadmin addWritePerm).
    #[command(after_help = "Example:\n  rmqctl broker add-write-perm --broker-name broker-a")]
    AddWritePerm {
        /// Broker name (brokerName), as `cluster list` shows it.
        #[arg(long)]
        broker_name: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProducerCmd {
    /// Clients of a producer group connected to the brokers (mqadmin producerConnection).
    #[command(after_help = "Example:\n  rmqctl producer connections -g OrderProducers -t Orders")]
    Connections {
        /// Producer group name.
        #[arg(short = 'g', long)]
        group: String,
        /// Ask the brokers of this topic's route (default: every master).
        #[arg(short = 't', long)]
        topic: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum NameserverCmd {
    /// Nameserver configuration.
    #[command(subcommand)]
    Config(NameserverConfigCmd),
}

#[derive(Debug, Subcommand)]
pub enum NameserverConfigCmd {
    /// Every nameserver's effective configuration, or one key (mqadmin getNamesrvConfig).
    #[command(after_help = "Example:\n  rmqctl nameserver config get -k orderMessageEnable")]
    Get {
        /// Only this configuration key.
        #[arg(short = 'k', long)]
        key: Option<String>,
    },
    /// Change runtime-updatable keys on every nameserver (mqadmin updateNamesrvConfig).
    #[command(after_help = "Example:\n  rmqctl nameserver config update orderMessageEnable=true")]
    Update {
        /// `key=value` pairs.
        #[arg(required = true, value_parser = parse_pair)]
        entries: Vec<(String, String)>,
    },
}

/// `now` or ms since the epoch.
fn parse_time(s: &str) -> Result<i64, String> {
    if s.eq_ignore_ascii_case("now") {
        return Ok(remoting::client::now_ms());
    }
    match s.trim().parse::<i64>() {
        Ok(ms) if ms >= 0 => Ok(ms),
        _ => Err(format!(
            "expected a store time in ms since the epoch or `now`, got {s:?}"
        )),
    }
}

/// A `key=value` argument (the value may itself hold `=`).
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => Err(format!("expected key=value, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse() {
        assert_eq!(parse_time("1700000000000"), Ok(1_700_000_000_000));
        assert!(parse_time("now").unwrap() > 1_700_000_000_000);
        assert!(parse_time("-1").is_err());
        assert!(parse_time("yesterday").is_err());
    }
}
