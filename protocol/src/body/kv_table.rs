//! `KVTable` (`common/protocol/body/KVTable.java`): `{"table":{"k":"v"}}`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::lenient;

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct KvTable {
    #[serde(default, deserialize_with = "lenient::null_as_default")]
    pub table: BTreeMap<String, String>,
}
