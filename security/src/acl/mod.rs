//! RocketMQ 4.9's plain ACL: the account file, its address patterns and permissions,
//! and the decision for one request.

mod addr;
mod file;
mod perm;
mod store;
mod table;

pub use addr::{AddrPattern, BadPattern};
pub use file::{AccountEntry, FileDataVersion, PlainAclFile};
pub use perm::Perm;
pub use store::{AccountEdit, AclError, AclStore, ReloadOutcome};
pub use table::{Account, AclTable, Denial, Grant, Requirement, Resource, TableError};
