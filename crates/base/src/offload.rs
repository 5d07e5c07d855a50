//! Blocking file work (the session store, the audit ledger, the credentials file) runs on tokio's
//! blocking pool, never on the async executor, and with a deadline: a slow or stuck file under
//! DSH_HOME delays only the call that touches it, never an unrelated call of the same process.

use std::time::Duration;

/// How long the send path waits for its file work (store lookups, ledger read and write).
pub const FILE_DEADLINE: Duration = Duration::from_secs(15);

/// Why blocking work gave no result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    /// Still running at the deadline (it finishes in the background; its result is dropped).
    TimedOut(Duration),
    /// It panicked.
    Panicked,
}

/// Run `f` on the blocking pool and wait at most `deadline`. Without a tokio runtime (plain unit
/// tests, the CLI's sync paths) it runs inline.
pub async fn run<T, F>(deadline: Duration, f: F) -> Result<T, Offload>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(h) => match tokio::time::timeout(deadline, h.spawn_blocking(f)).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err(Offload::Panicked),
            Err(_) => Err(Offload::TimedOut(deadline)),
        },
        Err(_) => {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| Offload::Panicked)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_stuck_job_times_out_and_the_executor_stays_free() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let stuck = tokio::spawn(run(Duration::from_millis(200), move || {
            // Blocks until the test lets it go (a FIFO open, a hung NFS read).
            let _ = rx.recv_timeout(Duration::from_secs(10));
            1
        }));
        // The current-thread executor still runs other work while the job is stuck.
        let other = run(Duration::from_secs(5), || 2).await;
        assert_eq!(other, Ok(2));
        assert_eq!(
            stuck.await.unwrap(),
            Err(Offload::TimedOut(Duration::from_millis(200)))
        );
        drop(tx);
    }
}
