//! What follows when consumers join or leave a group: the members are told to
//! rebalance (`Broker2Client.notifyConsumerIdsChanged`), a group left empty drops its
//! compiled filters, and a departed consumer's queue locks are released at once (4.9
//! leaves them to expire after 60 s, stalling an orderly consumer's queues that long).

use std::sync::atomic::Ordering;

use protocol::RemotingCommand;
use protocol::code::request as rq;
use protocol::header::NotifyConsumerIdsChangedRequestHeader;

use super::Broker;
use super::clients::ConnId;
use super::locks;

/// Tells every member of `group` to rebalance (`Broker2Client.notifyConsumerIdsChanged`),
/// unless the group disabled it or the broker did.
pub fn notify_consumer_ids_changed(broker: &Broker, group: &str) {
    if !broker
        .live
        .notify_consumer_ids_changed_enable
        .load(Ordering::Relaxed)
    {
        return;
    }
    if broker
        .groups
        .get(group)
        .is_some_and(|g| !g.notify_consumer_ids_changed_enable)
    {
        return;
    }
    let header = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_owned(),
    };
    for channel in broker.clients.consumer_channels(group) {
        let mut cmd = RemotingCommand::request(rq::NOTIFY_CONSUMER_IDS_CHANGED, &header);
        cmd.mark_oneway();
        if channel.outbound.try_send(cmd).is_err() {
            tracing::debug!(peer = %channel.peer, group, "notify dropped: connection busy or closed");
        }
    }
}

/// Consumer groups that lost members (a connection closed, a client unregistered or
/// stopped heart-beating): a group left empty drops its compiled filters; every one is
/// told to rebalance.
pub fn groups_left(broker: &Broker, groups: &[String]) {
    for group in groups {
        if !broker.clients.has_consumer_group(group) {
            broker.filters.retain_group(group, |_| false);
        }
        notify_consumer_ids_changed(broker, group);
    }
}

/// A connection closed: it leaves every group, its consumers' queue locks are released
/// and the groups it left are told.
pub fn connection_closed(broker: &Broker, conn: ConnId) {
    let memberships = broker.clients.consumer_memberships(conn);
    let left = broker.clients.remove_channel(conn);
    locks::release_departed(&broker.locks, &broker.clients, memberships);
    groups_left(broker, &left);
}

/// UNREGISTER_CLIENT of a consumer that was a member of `group`.
pub fn consumer_unregistered(broker: &Broker, group: &str, client_id: &str) {
    locks::release_departed(
        &broker.locks,
        &broker.clients,
        vec![(group.to_owned(), client_id.to_owned())],
    );
    groups_left(broker, &[group.to_owned()]);
}
