//! The one handle a process of a home uses: it routes every operation to the home's endpoint — its own,
//! when this process holds the lease, else the holder's over [`crate::holder`] — and, with
//! [`Machines::watch`], takes the lease over when the holder goes. Nothing is bound while the home has no
//! link and no waiting invite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex;

use crate::holder::{self, Answer, Ask};
use crate::lease::{self, Lease};
use crate::node::{CallError, Handler, Node, NodeConfig};

struct Held {
    node: Node,
    lease: Lease,
    server: tokio::task::JoinHandle<()>,
}

pub struct Machines {
    home: PathBuf,
    cfg: NodeConfig,
    handler: Handler,
    held: Mutex<Option<Held>>,
    watcher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// One link as `links` shows it.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub holder_pid: Option<u32>,
    pub this_process_holds: bool,
    pub links: Value,
}

impl Machines {
    pub fn new(home: &Path, cfg: NodeConfig, handler: Handler) -> Arc<Machines> {
        Arc::new(Machines {
            home: home.to_path_buf(),
            cfg,
            handler,
            held: Mutex::new(None),
            watcher: std::sync::Mutex::new(None),
        })
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Whether the home has anything to bind for: a link or a waiting invite.
    pub fn has_links(&self) -> bool {
        match crate::identity::read(&self.home) {
            Ok(Some(sk)) => {
                let d = crate::store::read(&self.home, &sk).doc();
                !d.links.is_empty()
                    || d.invites
                        .iter()
                        .any(|p| p.expires_at > base::clock::now_ms())
            }
            _ => false,
        }
    }

    /// This process's node, if it holds the lease.
    pub async fn node(&self) -> Option<Node> {
        self.held.lock().await.as_ref().map(|h| h.node.clone())
    }

    /// Become the holder if the lease is free: bind the endpoint and serve the socket.
    pub async fn try_hold(&self) -> Result<bool, String> {
        let mut g = self.held.lock().await;
        if g.is_some() {
            return Ok(true);
        }
        let Some(lease) = lease::try_take(&self.home).map_err(|e| format!("the lease: {e}"))?
        else {
            return Ok(false);
        };
        let node = Node::start(&self.home, self.cfg.clone(), self.handler.clone()).await?;
        let server = match holder::serve(node.clone()) {
            Ok(s) => s,
            Err(e) => {
                node.close().await;
                return Err(format!("the holder's socket: {e}"));
            }
        };
        *g = Some(Held {
            node,
            lease,
            server,
        });
        Ok(true)
    }

    /// Run `a` where the home's endpoint is: here (holding, or taking the free lease) or at the holder.
    pub async fn ask(&self, a: Ask, deadline: Duration) -> Result<Value, CallError> {
        for _ in 0..3 {
            if let Some(n) = self.node().await {
                return match holder::run(&n, a).await {
                    Answer::Ok(v) => Ok(v),
                    Answer::Err(e) => Err(e),
                };
            }
            if lease::holder(&self.home).is_some() {
                match holder::ask(&self.home, &a, deadline).await {
                    Err(CallError::NoHolder(_)) => {} // it went meanwhile: try to take over
                    r => return r,
                }
            }
            if !self.try_hold().await.map_err(CallError::NoHolder)? {
                // another process took the lease just now: give it a moment to serve
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Err(CallError::NoHolder(
            "the lease holder does not answer".into(),
        ))
    }

    /// Run `body` on a linked machine. `NotLinked` at once (before binding anything) when it is not linked.
    pub async fn call(&self, machine: &crate::MachineId, body: Value) -> Result<Value, CallError> {
        let linked = crate::identity::read(&self.home)
            .ok()
            .flatten()
            .map(|sk| {
                crate::store::read(&self.home, &sk)
                    .doc()
                    .by_id(machine)
                    .is_some()
            })
            .unwrap_or(false);
        if !linked {
            return Err(CallError::NotLinked);
        }
        let dl = self.cfg.request_deadline + Duration::from_secs(2);
        self.ask(
            Ask::Call {
                machine: machine.clone(),
                body,
            },
            dl,
        )
        .await
    }

    /// Typed [`Machines::call`].
    pub async fn call_typed<Q: serde::Serialize, R: serde::de::DeserializeOwned>(
        &self,
        machine: &crate::MachineId,
        q: &Q,
    ) -> Result<R, CallError> {
        let v = serde_json::to_value(q).map_err(|e| CallError::Protocol(e.to_string()))?;
        let r = self.call(machine, v).await?;
        serde_json::from_value(r).map_err(|e| CallError::Protocol(e.to_string()))
    }

    /// Keep the lease: renew it while held; while not, take it over when the holder goes (every second,
    /// only while the home has something to bind for).
    pub fn watch(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        let t = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(lease::RENEW_MS)).await;
                let Some(m) = weak.upgrade() else { break };
                let g = m.held.lock().await;
                if let Some(h) = g.as_ref() {
                    let _ = h.lease.renew();
                    continue;
                }
                drop(g);
                if m.has_links() && lease::holder(&m.home).is_none() {
                    let _ = m.try_hold().await;
                }
            }
        });
        if let Ok(mut w) = self.watcher.lock() {
            if let Some(old) = w.replace(t) {
                old.abort();
            }
        }
    }

    /// Give up the endpoint and the lease (orderly: the endpoint closed and awaited first).
    pub async fn stop(&self) {
        if let Some(t) = self.watcher.lock().ok().and_then(|mut w| w.take()) {
            t.abort();
        }
        if let Some(h) = self.held.lock().await.take() {
            h.server.abort();
            h.node.close().await;
            let _ = std::fs::remove_file(holder::socket_path(&self.home));
            lease::clear(&self.home);
            drop(h.lease);
        }
    }
}
