//! The one handle a process of a home uses: it routes every operation to the home's endpoint — its own,
//! when this process holds the lease, else the holder's over [`crate::holder`] — and, with
//! [`Machines::watch`], takes the lease over when the holder goes. Nothing is bound while the home has no
//! link and no waiting invite.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Mutex;

use crate::error::LinkError;
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
    /// The node of [`Machines::held`], while held: what a call goes by, read without waiting for `held`,
    /// which the lease's renewal (every second) and a takeover keep while they run.
    now: std::sync::Mutex<Option<Node>>,
    /// Whether the lease's record is this process's to write: a renewal (on the blocking pool) writes it only
    /// while set, and `stop` unsets it before it removes the record, so a renewal whose watcher was
    /// aborted mid-write never puts the record back after it.
    recording: Arc<std::sync::Mutex<bool>>,
    watcher: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Handed to every node this process binds ([`Node::notify_when_heard`]).
    heard: std::sync::OnceLock<Arc<tokio::sync::Notify>>,
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
            now: std::sync::Mutex::new(None),
            recording: Arc::new(std::sync::Mutex::new(false)),
            watcher: std::sync::Mutex::new(None),
            heard: std::sync::OnceLock::new(),
        })
    }

    /// Notify `n` whenever the endpoint this process holds serves a linked machine's request (set once).
    pub fn notify_when_heard(&self, n: Arc<tokio::sync::Notify>) {
        let _ = self.heard.set(n);
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

    /// This process's node, if it holds the lease. Held: at once, never behind the lease's renewal (a
    /// file write, which the file system can stall). Not held: once a takeover in progress is done.
    pub async fn node(&self) -> Option<Node> {
        if let Some(n) = self.now.lock().ok().and_then(|n| n.clone()) {
            return Some(n);
        }
        self.held.lock().await.as_ref().map(|h| h.node.clone())
    }

    /// Become the holder if the lease is free: bind the endpoint and serve the socket.
    pub async fn try_hold(&self) -> Result<bool, LinkError> {
        let mut g = self.held.lock().await;
        if g.is_some() {
            return Ok(true);
        }
        let Some(lease) = lease::try_take(&self.home).map_err(|e| LinkError::Lease {
            detail: e.to_string(),
        })?
        else {
            return Ok(false);
        };
        let node = Node::start(&self.home, self.cfg.clone(), self.handler.clone()).await?;
        let server = match holder::serve(node.clone()) {
            Ok(s) => s,
            Err(e) => {
                node.close().await;
                return Err(LinkError::Socket {
                    detail: e.to_string(),
                });
            }
        };
        if let Some(n) = self.heard.get() {
            node.notify_when_heard(n.clone());
        }
        // the machines this home is linked to hear that it is (back) up: what waits there for it goes now
        node.announce();
        if let Ok(mut now) = self.now.lock() {
            *now = Some(node.clone());
        }
        if let Ok(mut r) = self.recording.lock() {
            *r = true;
        }
        *g = Some(Held {
            node,
            lease,
            server,
        });
        Ok(true)
    }

    /// Run `a` where the home's endpoint is: here (holding, or taking the free lease) or at the holder.
    pub async fn ask(&self, a: Ask, deadline: Duration) -> Result<Value, LinkError> {
        for _ in 0..3 {
            if let Some(n) = self.node().await {
                return match holder::run(&n, a).await {
                    Answer::Ok(v) => Ok(v),
                    Answer::Err(e) => Err(e),
                };
            }
            if lease::holder(&self.home).is_some() {
                match holder::ask(&self.home, &a, deadline).await {
                    Err(LinkError::Call {
                        error: CallError::NoHolder(_),
                    }) => {} // it went before it had the ask: try to take over (a call it had ends `Timeout`)
                    r => return r,
                }
            }
            if !self.try_hold().await? {
                // another process took the lease just now: give it a moment to serve
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Err(CallError::NoHolder("the lease holder does not answer".into()).into())
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
        .map_err(|e| match e {
            LinkError::Call { error } => error,
            // the holder could not be had (its lease, its endpoint): nobody can reach the machine now
            other => CallError::NoHolder(other.to_string()),
        })
    }

    /// [`Machines::call`] by the links `checked` read a moment ago for this same call: within
    /// [`Checked::FRESH`] of that reading a machine not in it is `NotLinked` at once, and one in it is
    /// called without reading and verifying the document again (by this process's own endpoint; the
    /// holder of another process checks it itself). An older reading: [`Machines::call`].
    pub async fn call_checked(
        &self,
        checked: &crate::store::Checked,
        machine: &crate::MachineId,
        body: Value,
    ) -> Result<Value, CallError> {
        match checked.fresh(machine) {
            Some(None) => Err(CallError::NotLinked),
            Some(Some(link)) => match self.node().await {
                Some(n) => n.call_link(link, body).await,
                None => self.call(machine, body).await,
            },
            None => self.call(machine, body).await,
        }
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
                if g.is_some() {
                    // on the blocking pool, never on a worker the endpoint and the calls need; `held`
                    // kept meanwhile, so `stop` clears the record only after it (a call does not wait
                    // for it: `node`)
                    let (home, recording) = (m.home.clone(), m.recording.clone());
                    let _ =
                        base::offload::run(base::offload::FILE_DEADLINE, move || {
                            match recording.lock() {
                                Ok(r) if *r => lease::renew_record(&home),
                                _ => Ok(()),
                            }
                        })
                        .await;
                    drop(g);
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
        let mut g = self.held.lock().await;
        if let Ok(mut now) = self.now.lock() {
            *now = None;
        }
        if let Some(h) = g.take() {
            h.server.abort();
            h.node.close().await;
            let _ = std::fs::remove_file(holder::socket_path(&self.home));
            let (home, recording) = (self.home.clone(), self.recording.clone());
            let _ = base::offload::run(base::offload::FILE_DEADLINE, move || {
                if let Ok(mut r) = recording.lock() {
                    *r = false;
                }
                lease::clear(&home);
            })
            .await;
            drop(h.lease);
        }
    }
}

/// This machine's host name, the name it suggests for itself when it joins.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "machine".into())
}

impl Machines {
    fn key(&self) -> Result<iroh::SecretKey, LinkError> {
        crate::identity::read(&self.home)?.ok_or(LinkError::NoIdentity)
    }

    /// `link`: a one-time invite made by the home's endpoint (bound here when no process holds it).
    pub async fn invite(&self, relay: crate::Relay, ttl: Duration) -> Result<String, LinkError> {
        // the public choice under the guard: refused before a key is made or anything bound
        relay.allowed()?;
        crate::identity::load_or_make(&self.home)?;
        // the holder may bind its endpoint again for a relay it does not run with yet
        let v = self
            .ask(
                Ask::Invite {
                    relay,
                    ttl_ms: ttl.as_millis() as u64,
                },
                self.cfg.frame_deadline + self.cfg.connect_deadline,
            )
            .await?;
        v.as_str().map(str::to_string).ok_or(LinkError::Holder {
            detail: "it answered no invite".into(),
        })
    }

    /// Wait until the invite is used (`true`) or expires or `limit` passes (`false`).
    pub async fn wait_invite(&self, invite: &str, limit: Duration) -> Result<bool, LinkError> {
        let inv = crate::node::Invite::decode(invite)?;
        let sk = self.key()?;
        let secret = crate::unhex::<32>(&inv.secret).ok_or(LinkError::BadInvite {
            what: "it is damaged (its secret)".into(),
        })?;
        let hash = crate::node::invite_hash(&sk, &secret);
        let t = std::time::Instant::now();
        loop {
            let d = crate::store::read(&self.home, &sk).doc();
            if !d.invites.iter().any(|p| p.hash == hash) {
                return Ok(inv.exp > base::clock::now_ms());
            }
            if inv.exp <= base::clock::now_ms() || t.elapsed() >= limit {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `link <invite> --name <name>`: both ends record each other.
    pub async fn accept_invite(&self, invite: &str, name: &str) -> Result<crate::Link, LinkError> {
        crate::node::Invite::decode(invite)?.relay.allowed()?;
        if !crate::valid_name(name) {
            return Err(LinkError::BadName { name: name.into() });
        }
        crate::identity::load_or_make(&self.home)?;
        let dl = self.cfg.connect_deadline + self.cfg.frame_deadline * 2;
        let v = self
            .ask(
                Ask::Accept {
                    invite: invite.into(),
                    name: name.into(),
                    my_name: host_name(),
                },
                dl,
            )
            .await?;
        serde_json::from_value(v).map_err(|e| LinkError::Holder {
            detail: e.to_string(),
        })
    }

    /// `unlink <name>`: refused here at once, the other machine told when it can be reached.
    pub async fn unlink(&self, name: &str) -> Result<(crate::Link, bool), LinkError> {
        let sk = self.key()?;
        if crate::store::read(&self.home, &sk)
            .doc()
            .by_name(name)
            .is_none()
        {
            return Err(LinkError::NoSuchLink { name: name.into() });
        }
        let v = self
            .ask(
                Ask::Unlink { name: name.into() },
                self.cfg.connect_deadline * 2,
            )
            .await?;
        let link = serde_json::from_value(v["link"].clone()).map_err(|e| LinkError::Holder {
            detail: e.to_string(),
        })?;
        Ok((link, v["told"].as_bool().unwrap_or(false)))
    }

    /// `machines rename <name> <new>`: this home's name for a linked machine (the id stays).
    pub async fn rename(&self, name: &str, new: &str) -> Result<crate::Link, LinkError> {
        if !crate::valid_name(new) {
            return Err(LinkError::BadName { name: new.into() });
        }
        let sk = self.key()?;
        use crate::store::StoreError::Refused;
        let (name, new) = (name.to_string(), new.to_string());
        Ok(
            crate::store::update_off(&self.home, &sk, base::clock::now_ms(), move |d| {
                if d.by_name(&new).is_some() {
                    return Err(Refused(LinkError::NameTaken { name: new }));
                }
                let l = d
                    .links
                    .iter_mut()
                    .find(|l| l.name == name)
                    .ok_or_else(|| Refused(LinkError::NoSuchLink { name: name.clone() }))?;
                l.name = new;
                Ok(l.clone())
            })
            .await?,
        )
    }

    /// `links`: every link with, when `probe`, whether it answers now and its round trip (asked in
    /// parallel, each within the connect deadline).
    pub async fn list(self: &Arc<Self>, probe: bool) -> Value {
        let sk = crate::identity::read(&self.home).ok().flatten();
        let id = sk.as_ref().map(|k| crate::MachineId::of(&k.public()));
        let reading = sk.as_ref().map(|k| crate::store::read(&self.home, k));
        let unverified = match &reading {
            Some(crate::store::Reading::Unverified(why)) => Some(why.to_string()),
            _ => None,
        };
        let links = reading.map(|r| r.doc().links).unwrap_or_default();
        let mut rows = Vec::new();
        let mut tasks = Vec::new();
        for l in &links {
            if probe {
                let me = self.clone();
                let mid = l.id.clone();
                tasks.push(tokio::spawn(async move {
                    let r = tokio::time::timeout(
                        me.cfg.connect_deadline + Duration::from_secs(1),
                        me.ask(Ask::Ping { machine: mid }, me.cfg.connect_deadline),
                    )
                    .await;
                    match r {
                        Ok(Ok(v)) => (true, v.as_f64(), None),
                        Ok(Err(e)) => (false, None, Some(e.to_string())),
                        Err(_) => (false, None, Some("no answer in time".to_string())),
                    }
                }));
            }
        }
        let mut results = Vec::new();
        for t in tasks {
            results.push(t.await.unwrap_or((false, None, Some("failed".into()))));
        }
        let seen = self.node().await;
        for (i, l) in links.iter().enumerate() {
            let (online, rtt, error) = results
                .get(i)
                .cloned()
                .map(|(a, b, c)| (Some(a), b, c))
                .unwrap_or((None, None, None));
            let last = seen.as_ref().and_then(|n| n.last_seen(&l.id)).map(|s| s.0);
            let last = if online == Some(true) {
                Some(base::clock::now_ms())
            } else {
                last
            };
            rows.push(serde_json::json!({
                "id": l.id, "name": l.name, "relay": l.relay, "addrs": l.addrs, "linkedAt": l.linked_at,
                "online": online, "lastSeen": last, "rttMs": rtt, "error": error,
            }));
        }
        let holder = lease::holder(&self.home).map(|r| r.pid);
        serde_json::json!({
            "id": id, "holderPid": holder, "thisProcessHolds": self.node().await.is_some(),
            "unverified": unverified, "links": rows,
        })
    }

    /// `doctor`'s rows: `{name, status: ok|fail|skip, detail}` for the identity, the lease holder, and
    /// each link (its relay, whether it answers).
    pub async fn doctor(self: &Arc<Self>) -> Vec<Value> {
        let row = |name: &str, status: &str, detail: String| serde_json::json!({"name": name, "status": status, "detail": detail});
        let mut rows = Vec::new();
        match crate::identity::read(&self.home) {
            Ok(Some(k)) => rows.push(row(
                "machine identity",
                "ok",
                format!("machine {}", crate::MachineId::of(&k.public())),
            )),
            Ok(None) => {
                rows.push(row(
                    "machine identity",
                    "skip",
                    "none yet (made by the first `dsh-session-mail link`)".into(),
                ));
                return rows;
            }
            Err(e) => {
                rows.push(row("machine identity", "fail", e.to_string()));
                return rows;
            }
        }
        let list = self.list(true).await;
        if let Some(u) = list["unverified"].as_str() {
            rows.push(row(
                "links",
                "fail",
                format!("{u}: read as no links; link again to re-seal"),
            ));
        }
        let links = list["links"].as_array().cloned().unwrap_or_default();
        match lease::holder(&self.home) {
            Some(r) => rows.push(row(
                "lease holder",
                "ok",
                format!("pid {} holds the machine's endpoint", r.pid),
            )),
            None if links.is_empty() => rows.push(row(
                "lease holder",
                "skip",
                "no link: nothing is bound".into(),
            )),
            None => rows.push(row(
                "lease holder",
                "fail",
                "links exist but no live process holds the endpoint (start DSH)".into(),
            )),
        }
        for l in links {
            let name = format!("link {}", l["name"].as_str().unwrap_or("?"));
            let relay = match l["relay"].as_str().unwrap_or("none") {
                "public" => "public: Iroh's public relays, run by n0".to_string(),
                r => r.to_string(),
            };
            if l["online"] == Value::Bool(true) {
                rows.push(row(
                    &name,
                    "ok",
                    format!(
                        "answers in {:.1} ms (relay {relay})",
                        l["rttMs"].as_f64().unwrap_or(0.0)
                    ),
                ));
            } else {
                rows.push(row(
                    &name,
                    "fail",
                    format!(
                        "{} (relay {relay})",
                        l["error"].as_str().unwrap_or("does not answer")
                    ),
                ));
            }
        }
        rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lease's renewal keeps `held` while it writes the record (every second; a file write and a
    /// rename the file system can stall): a call takes this process's node without waiting for it — the
    /// node is there at the first poll of `node()` while `held` is taken. After `stop`, no node and no record.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_call_finds_the_held_node_while_the_lease_is_renewed() {
        let h = tempfile::tempdir().unwrap();
        let cfg = NodeConfig {
            bind: Some("127.0.0.1:0".parse().unwrap()),
            ..NodeConfig::default()
        };
        let m = Machines::new(h.path(), cfg, crate::node::refusing_handler());
        assert!(m.try_hold().await.unwrap());
        let id = m.node().await.expect("held").id();
        let renewing = m.held.lock().await;
        let mut asked = std::pin::pin!(m.node());
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match std::future::Future::poll(asked.as_mut(), &mut cx) {
            std::task::Poll::Ready(n) => assert_eq!(n.map(|n| n.id()), Some(id)),
            std::task::Poll::Pending => panic!("node() waited for the lease's renewal"),
        }
        drop(renewing);
        assert!(lease::read_record(h.path()).is_some());
        m.stop().await;
        assert!(m.node().await.is_none());
        assert!(lease::read_record(h.path()).is_none());
    }
}
