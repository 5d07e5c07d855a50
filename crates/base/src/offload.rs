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
    start(f).finish(deadline).await
}

/// Blocking work started now and awaited later ([`start`]): it runs on the blocking pool while the
/// caller does something else (a send makes its queued record's file while its POST is in flight).
#[derive(Debug)]
pub enum Started<T> {
    /// On the blocking pool.
    Spawned(tokio::task::JoinHandle<T>),
    /// Run inline already (no runtime).
    Done(Result<T, Offload>),
}

/// Start `f` on the blocking pool without waiting for it; [`Started::finish`] waits for its result.
/// Without a tokio runtime it runs inline, as [`run`] does.
pub fn start<T, F>(f: F) -> Started<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    match tokio::runtime::Handle::try_current() {
        Ok(h) => Started::Spawned(h.spawn_blocking(f)),
        Err(_) => Started::Done(
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
                .map_err(|_| Offload::Panicked),
        ),
    }
}

impl<T: Send + 'static> Started<T> {
    /// Its result, waiting at most `deadline` from now (past it, the work finishes in the background
    /// and its result is dropped).
    pub async fn finish(self, deadline: Duration) -> Result<T, Offload> {
        match self {
            Started::Done(r) => r,
            Started::Spawned(h) => match tokio::time::timeout(deadline, h).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(_)) => Err(Offload::Panicked),
                Err(_) => Err(Offload::TimedOut(deadline)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 1)]
    async fn a_started_job_runs_while_the_caller_waits_elsewhere() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let job = start(move || {
            tx.send(()).unwrap();
            3
        });
        // it ran without being awaited
        rx.recv_timeout(Duration::from_secs(10)).unwrap();
        assert_eq!(job.finish(Duration::from_secs(5)).await, Ok(3));
        // a job not done when it is asked for is not waited for past the deadline
        let (go, wait) = std::sync::mpsc::channel::<()>();
        let slow = start(move || wait.recv_timeout(Duration::from_secs(10)).is_ok());
        assert_eq!(
            slow.finish(Duration::ZERO).await,
            Err(Offload::TimedOut(Duration::ZERO))
        );
        go.send(()).ok();
        // without a runtime it runs inline
        assert!(matches!(
            std::thread::spawn(|| start(|| 4)).join().unwrap(),
            Started::Done(Ok(4))
        ));
    }

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
