//! The `plain_acl.yml` document (4.9 `PlainPermissionManager.load`, `PlainAccessConfig`). Unknown keys are ignored; scalars written as YAML numbers
//! or booleans (`secretKey: 12345678`) are read as their text.

use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlainAclFile {
    #[serde(default, deserialize_with = "string_list")]
    pub global_white_remote_addresses: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub accounts: Vec<AccountEntry>,
    /// Written on every admin edit; only the first element is read (as 4.9).
    #[serde(
        default,
        deserialize_with = "null_as_empty",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub data_version: Vec<FileDataVersion>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountEntry {
    #[serde(default, deserialize_with = "scalar")]
    pub access_key: String,
    #[serde(default, deserialize_with = "scalar")]
    pub secret_key: String,
    #[serde(
        default,
        deserialize_with = "scalar",
        skip_serializing_if = "String::is_empty"
    )]
    pub white_remote_address: String,
    #[serde(default, deserialize_with = "boolish")]
    pub admin: bool,
    #[serde(
        default,
        deserialize_with = "scalar",
        skip_serializing_if = "String::is_empty"
    )]
    pub default_topic_perm: String,
    #[serde(
        default,
        deserialize_with = "scalar",
        skip_serializing_if = "String::is_empty"
    )]
    pub default_group_perm: String,
    #[serde(
        default,
        deserialize_with = "string_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub topic_perms: Vec<String>,
    #[serde(
        default,
        deserialize_with = "string_list",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub group_perms: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDataVersion {
    #[serde(default)]
    pub counter: i64,
    #[serde(default)]
    pub timestamp: i64,
}

#[derive(Debug, thiserror::Error)]
#[error("not a plain_acl.yml document: {0}")]
pub struct FileSyntaxError(String);

impl PlainAclFile {
    /// An empty document is an empty ACL (4.9 writes such a file when none exists).
    pub fn parse(text: &str) -> Result<Self, FileSyntaxError> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        serde_yaml::from_str::<Option<Self>>(text)
            .map(Option::unwrap_or_default)
            // serde_yaml's message names a line and column, never a value.
            .map_err(|e| FileSyntaxError(e.to_string()))
    }

    pub fn render(&self) -> String {
        serde_yaml::to_string(self).unwrap_or_default()
    }

    pub fn version(&self) -> FileDataVersion {
        self.data_version.first().copied().unwrap_or_default()
    }
}

fn scalar_text(v: serde_yaml::Value) -> Option<String> {
    match v {
        serde_yaml::Value::String(s) => Some(s),
        serde_yaml::Value::Number(n) => Some(n.to_string()),
        serde_yaml::Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn scalar<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(scalar_text(serde_yaml::Value::deserialize(d)?).unwrap_or_default())
}

fn boolish<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match serde_yaml::Value::deserialize(d)? {
        serde_yaml::Value::Bool(b) => b,
        serde_yaml::Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    })
}

fn string_list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    Ok(match serde_yaml::Value::deserialize(d)? {
        serde_yaml::Value::Sequence(items) => items.into_iter().filter_map(scalar_text).collect(),
        other => scalar_text(other).into_iter().collect(),
    })
}

fn null_as_empty<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The sample shipped with RocketMQ 4.9 (`distribution/conf/plain_acl.yml`), abridged.
    pub(crate) const SAMPLE: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"#;

    #[test]
    fn reads_the_4_9_sample() {
        let f = PlainAclFile::parse(SAMPLE).unwrap();
        assert_eq!(
            f.global_white_remote_addresses,
            ["10.10.103.*", "192.168.0.*"]
        );
        assert_eq!(f.accounts.len(), 2);
        assert_eq!(f.accounts[0].secret_key, "12345678");
        assert_eq!(f.accounts[0].white_remote_address, "");
        assert_eq!(f.accounts[0].topic_perms[1], "topicB=PUB|SUB");
        assert!(f.accounts[1].admin);
        assert_eq!(f.version(), FileDataVersion::default());
        let again = PlainAclFile::parse(&f.render()).unwrap();
        assert_eq!(again, f);
        assert_eq!(PlainAclFile::parse("").unwrap(), PlainAclFile::default());
        assert!(PlainAclFile::parse("accounts: [").is_err());
    }
}
