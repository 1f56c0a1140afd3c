//! The broker's outbound remoting (to its nameservers and, on a slave, to its master):
//! the shared kept-connection client.

pub use remoting::client::{ClientError, RemotingClient};
