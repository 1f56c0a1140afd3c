//! Cluster access phase: the referenced Broker, its NameServer, the admin clients signed
//! with each one's `adminCredentials`, and the masters the nameservers list for the
//! cluster. A cluster that cannot be reached sets `Ready=False` with the reason.

use std::ops::ControlFlow;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;

use super::Reconciliation;
use crate::admin::{Admin, AdminError, ClusterInfo};
use crate::crd::{Broker, NameServer, Topic};
use crate::names::NameServerNames;
use crate::reconcile::admin_credentials::{admin_for, namesrv_admin_for};
use crate::reconcile::{Context, Error, PROGRESS_POLL};

/// A cluster the sync can write to.
pub struct Reached {
    pub access: ClusterAccess,
    /// `(brokerName, address)` of every master the nameservers list for the cluster.
    pub masters: Vec<(String, String)>,
}

/// Reaches the cluster `spec.brokerRef` names; the reconcile stops at `BrokerNotFound`
/// or `NoMasters` (and polls), or fails with the credentials problem or
/// `NameServerUnreachable`.
pub async fn reach(
    ctx: &Context,
    topic: &Topic,
    rec: &Reconciliation,
) -> Result<ControlFlow<Action, Reached>, Error> {
    let cluster = &topic.spec.broker_ref.name;
    let namespace = &rec.namespace;
    let access = match cluster_access(ctx, namespace, cluster).await {
        Ok(Some(access)) => access,
        Ok(None) => {
            let message = format!("Broker {cluster} does not exist in {namespace}");
            rec.refuse(ctx, "BrokerNotFound", message).await?;
            return Ok(ControlFlow::Break(Action::requeue(PROGRESS_POLL)));
        }
        Err(Error::Credentials(problem)) => {
            rec.refuse(ctx, problem.reason(), problem.to_string())
                .await?;
            return Err(problem.into());
        }
        Err(e) => return Err(e),
    };
    let info = match access.cluster_info().await {
        Ok(info) => info,
        Err(e) => {
            rec.refuse(ctx, "NameServerUnreachable", e.to_string())
                .await?;
            return Err(e.into());
        }
    };
    let masters = info.masters(cluster);
    if masters.is_empty() {
        let message = format!("no master of cluster {cluster} is registered");
        rec.refuse(ctx, "NoMasters", message).await?;
        return Ok(ControlFlow::Break(Action::requeue(PROGRESS_POLL)));
    }
    Ok(ControlFlow::Continue(Reached { access, masters }))
}

/// How the Topic reconcile reaches a cluster: its nameservers and the admin clients for
/// them and for its masters.
pub struct ClusterAccess {
    namesrvs: Vec<String>,
    /// Signed with the NameServer's `adminCredentials` (its ACL file is its own).
    namesrv_admin: Arc<dyn Admin>,
    /// Signed with the Broker's `adminCredentials`. The masters a nameserver lists for
    /// cluster `c` are all pods of the Broker `c` in this namespace (the Broker's name is
    /// its `brokerClusterName`, and its NameServer is in its namespace), so one Broker's
    /// credentials cover every master the reconcile writes to.
    pub admin: Arc<dyn Admin>,
}

impl ClusterAccess {
    /// Cluster info from the first nameserver that answers.
    async fn cluster_info(&self) -> Result<ClusterInfo, AdminError> {
        let mut last = None;
        for addr in &self.namesrvs {
            match self.namesrv_admin.cluster_info(addr).await {
                Ok(info) => return Ok(info),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or(AdminError::Closed {
            addr: "no nameserver address".to_owned(),
        }))
    }

    /// Deletes `topic` from every master of `cluster`, then from every nameserver's routes.
    pub async fn delete_everywhere(&self, cluster: &str, topic: &str) -> Result<(), AdminError> {
        let info = self.cluster_info().await?;
        for (_, addr) in info.masters(cluster) {
            self.admin.delete_topic_in_broker(&addr, topic).await?;
        }
        for ns in &self.namesrvs {
            self.namesrv_admin
                .delete_topic_in_namesrv(ns, topic, cluster)
                .await?;
        }
        Ok(())
    }
}

/// Nameserver addresses and admin client of the Broker `cluster`, or `None` when the
/// Broker (or its NameServer) does not exist or is being deleted.
pub async fn cluster_access(
    ctx: &Context,
    namespace: &str,
    cluster: &str,
) -> Result<Option<ClusterAccess>, Error> {
    let brokers: Api<Broker> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(broker) = brokers.get_opt(cluster).await? else {
        return Ok(None);
    };
    if broker.metadata.deletion_timestamp.is_some() {
        return Ok(None);
    }
    let nameservers: Api<NameServer> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(ns) = nameservers
        .get_opt(&broker.spec.name_server_ref.name)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(ClusterAccess {
        namesrvs: NameServerNames::of(&ns)
            .addresses(ns.spec.replicas, &ctx.settings.cluster_domain),
        namesrv_admin: namesrv_admin_for(ctx, &ns).await?,
        admin: admin_for(ctx, &broker).await?,
    }))
}
