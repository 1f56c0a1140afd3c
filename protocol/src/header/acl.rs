//! Headers of the ACL management requests 50–53 (4.9's `CreateAccessConfigRequestHeader`,
//! `DeleteAccessConfigRequestHeader`, `UpdateGlobalWhiteAddrsConfigRequestHeader`,
//! `GetBrokerAclConfigResponseHeader`).

crate::header! {
    /// UPDATE_AND_CREATE_ACL_CONFIG (50). The perm lists are comma-separated
    /// `name=PERM` items.
    pub struct CreateAccessConfigRequestHeader {
        required access_key: String = "accessKey",
        optional secret_key: String = "secretKey",
        optional white_remote_address: String = "whiteRemoteAddress",
        default admin: bool = "admin" => false,
        optional default_topic_perm: String = "defaultTopicPerm",
        optional default_group_perm: String = "defaultGroupPerm",
        optional topic_perms: String = "topicPerms",
        optional group_perms: String = "groupPerms",
    }
}

crate::header! {
    /// DELETE_ACL_CONFIG (51).
    pub struct DeleteAccessConfigRequestHeader {
        required access_key: String = "accessKey",
    }
}

crate::header! {
    /// UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the comma-separated list replaces the
    /// file's. `aclFileFullPath` (4.9.4+) may only name the broker's own ACL file.
    pub struct UpdateGlobalWhiteAddrsConfigRequestHeader {
        optional global_white_addrs: String = "globalWhiteAddrs",
        optional acl_file_full_path: String = "aclFileFullPath",
    }
}

crate::header! {
    /// Answer of GET_BROKER_CLUSTER_ACL_INFO (52). `version` is the JSON of the file's
    /// `DataVersion`; `allAclFileVersion` maps the file path to it.
    pub struct GetBrokerAclConfigResponseHeader {
        optional version: String = "version",
        optional all_acl_file_version: String = "allAclFileVersion",
        optional broker_name: String = "brokerName",
        optional broker_addr: String = "brokerAddr",
        optional cluster_name: String = "clusterName",
    }
}
