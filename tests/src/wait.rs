//! Waiting in tests: the runtime the suites drive their clients on, and polling until a
//! condition holds.

use std::time::{Duration, Instant};

/// A two-worker runtime, like the CI machine's two cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Polls `f` every 50 ms until it is true; panics naming `what` after `within`.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
