//! Waiting in tests: the runtime the suites drive their clients on, and polling until a
//! condition holds. A suite waits for the event it needs (a message stored, a metric
//! moved, a member registered), never for a fixed time: a loaded CI machine only makes
//! the wait longer, not the test wrong.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

/// How long the helpers pause between two looks at the condition.
const POLL: Duration = Duration::from_millis(50);

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
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `f` every 50 ms until it answers `Ok`, and returns that value. `Err` says what
/// was seen instead; after `within` the last one goes into the panic naming `what`.
pub async fn eventually_ok<T, E, F, Fut>(within: Duration, what: &str, mut f: F) -> T
where
    E: Display,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let deadline = Instant::now() + within;
    loop {
        match f().await {
            Ok(value) => return value,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; last seen: {seen}"
            ),
        }
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for code outside a runtime (the process harness, `rmqctl` runs).
pub fn eventually_sync(within: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        std::thread::sleep(POLL);
    }
}

/// [`eventually_ok`] for code outside a runtime.
pub fn eventually_ok_sync<T, E: Display>(
    within: Duration,
    what: &str,
    mut f: impl FnMut() -> Result<T, E>,
) -> T {
    let deadline = Instant::now() + within;
    loop {
        match f() {
            Ok(value) => return value,
            Err(seen) => assert!(
                Instant::now() < deadline,
                "timed out after {within:?} waiting for {what}; last seen: {seen}"
            ),
        }
        std::thread::sleep(POLL);
    }
}

/// A description built only when it is shown, for an `Err` of [`eventually_ok`] that
/// names something costly (a process log): `Err(Lazy(|| format!("{seen:?}\n{}", log())))`.
pub struct Lazy<F: Fn() -> String>(pub F);

impl<F: Fn() -> String> Display for Lazy<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&(self.0)())
    }
}
