//! The endpoint of a home: bound only by the process that holds the lease ([`crate::lease`]), with this
//! home's machine key, on [`wire::ALPN`] and [`wire::LINK_ALPN`]. Relays: none unless a link (or a waiting
//! invite) names the human's relay URL or Iroh's public relays (`store::Relay`, refused under the guard
//! `store::NO_PUBLIC_NETWORK_VAR`); no address lookup of any kind; Iroh built without portmapper or metrics.
//!
//! Incoming connections pass [`Gate`] (Iroh's `after_handshake` hook) before the accept loop sees them: on
//! the main ALPN only an endpoint this home has linked (its TLS-proved `EndpointId`, read fresh from the
//! sealed links on every handshake, so an unlink is in force at once) is let through, on the link ALPN only
//! while an invite waits; everything else is closed with a code before any stream of it is read. At most
//! [`NodeConfig::max_conns`] connections are served at once (more are refused at the QUIC level, before
//! their handshake), each with at most [`NodeConfig::max_streams`] requests open and every frame bounded
//! ([`wire::MAX_FRAME`]) and timed ([`NodeConfig::frame_deadline`]).

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iroh::endpoint::{
    AfterHandshakeOutcome, ConnectOptions, Connection, ConnectionError, EndpointHooks, IdleTimeout,
    QuicTransportConfig, Side, VarInt,
};
use iroh::{Endpoint, EndpointAddr, RelayMap, RelayMode, SecretKey, TransportAddr};
use serde_json::Value;

use crate::error::LinkError;
use crate::store::{self, Link, Pending, Relay, StoreError};
use crate::wire::{self, close, FrameError, Join, Joined, Request, Response, WireError};
use crate::MachineId;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// A dial in flight: `None` until it connects or fails (the failure's words).
type Dialing = tokio::sync::watch::Receiver<Option<Result<Connection, String>>>;

/// What runs a request that arrived from a linked machine (core's `serve`, through the binding): handed
/// the machine's link as the accept path found it in the verified links after reading the request (its
/// id the one the QUIC/TLS handshake proved), so the handler need not read the links again. A machine not
/// linked then never reaches it.
pub type Handler = Arc<dyn Fn(Link, Value) -> BoxFuture<Result<Value, WireError>> + Send + Sync>;

/// A handler that refuses everything (a process that only relays for others, or a test).
pub fn refusing_handler() -> Handler {
    Arc::new(|_, _| {
        Box::pin(async {
            Err(WireError {
                code: "unavailable".into(),
                message: "this machine serves no requests".into(),
            })
        })
    })
}

#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// The IPv4 or IPv6 socket address to bind; `None`: every interface, on the port the home bound before.
    pub bind: Option<SocketAddr>,
    /// A request's whole round trip, from the caller's side.
    pub request_deadline: Duration,
    /// One frame must arrive whole within this.
    pub frame_deadline: Duration,
    /// Dialing a machine.
    pub connect_deadline: Duration,
    /// How long a request waits for the dial to a machine not heard from lately (no live connection, and
    /// its last contact failed or is older than [`NodeConfig::recent`]) before it fails `Unreachable` —
    /// a send then goes to the outbox at once instead of after the whole dial. The dial itself goes on in
    /// the background up to [`NodeConfig::connect_deadline`]; when it connects, the `Notify` of
    /// [`Node::notify_when_heard`] fires (the outbox drain runs).
    pub quick_dial: Duration,
    /// A machine heard from within this (an answer, a request it sent, a dial that connected), with no
    /// failed contact since, gets the whole dial.
    pub recent: Duration,
    /// Connections served at once (handshakes included).
    pub max_conns: usize,
    /// Requests open at once on one connection.
    pub max_streams: u32,
    /// QUIC keep-alive: a connection with nothing else to send pings its peer this often, so a live peer is
    /// heard from (its ack) well within [`NodeConfig::idle_timeout`].
    pub keep_alive: Duration,
    /// A connection that hears nothing from its peer for this long is closed (QUIC's idle timeout; the
    /// smaller of both sides', and never under three of QUIC's probe timeouts on a slow path). A peer
    /// killed without closing (SIGKILL, a cable pulled) is known gone within it: a request written to it
    /// fails `Timeout` (it may have run) at most this long after the peer's last packet, and a request
    /// after that finds the connection closed and gets the quick dial.
    pub idle_timeout: Duration,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            bind: None,
            request_deadline: Duration::from_secs(30),
            frame_deadline: Duration::from_secs(10),
            connect_deadline: Duration::from_secs(10),
            quick_dial: Duration::from_millis(1500),
            recent: Duration::from_secs(60),
            max_conns: 64,
            max_streams: 16,
            keep_alive: Duration::from_millis(750),
            idle_timeout: Duration::from_millis(2500),
        }
    }
}

impl NodeConfig {
    /// The defaults, with `DSH_SESSION_MAIL_LINK_BIND` (e.g. `127.0.0.1:0` for tests and the demo) when set.
    pub fn from_env() -> NodeConfig {
        let mut c = NodeConfig::default();
        if let Ok(s) = std::env::var("DSH_SESSION_MAIL_LINK_BIND") {
            c.bind = s.parse().ok();
        }
        c
    }
}

pub use crate::error::CallError;

/// The hook that closes a connection before any of its data is read unless it may be served.
#[derive(Debug)]
struct Gate {
    home: PathBuf,
    sk: SecretKey,
}

impl EndpointHooks for Gate {
    async fn after_handshake<'a>(&'a self, conn: &'a Connection) -> AfterHandshakeOutcome {
        if conn.side() == Side::Client {
            return AfterHandshakeOutcome::accept();
        }
        let from = MachineId::of(&conn.remote_id());
        let doc = store::read(&self.home, &self.sk).doc();
        let (ok, code, why): (bool, u32, &[u8]) = match conn.alpn() {
            a if a == wire::ALPN => (doc.by_id(&from).is_some(), close::NOT_LINKED, b"not linked"),
            a if a == wire::LINK_ALPN => (
                doc.invites
                    .iter()
                    .any(|p| p.expires_at > base::clock::now_ms()),
                close::NO_INVITE,
                b"no invite is waiting",
            ),
            _ => (false, close::PROTOCOL, b"unknown protocol"),
        };
        if ok {
            AfterHandshakeOutcome::accept()
        } else {
            AfterHandshakeOutcome::Reject {
                error_code: VarInt::from_u32(code),
                reason: why.to_vec(),
            }
        }
    }
}

struct Inner {
    home: PathBuf,
    sk: SecretKey,
    /// The endpoint; replaced when a relay is added to one bound without any ([`Node::ensure_relay`]).
    ep: Mutex<Endpoint>,
    /// The relays the endpoint runs with; `None`: bound without a relay transport (relay none everywhere).
    relays: Mutex<Option<Vec<iroh::RelayUrl>>>,
    /// One relay change at a time.
    rebinding: tokio::sync::Mutex<()>,
    tc: QuicTransportConfig,
    /// What a dial of ours runs with ([`Node::dial`]).
    dial_tc: QuicTransportConfig,
    cfg: NodeConfig,
    handler: Handler,
    conns: Mutex<HashMap<MachineId, Connection>>,
    seen: Mutex<HashMap<MachineId, (i64, Option<Duration>)>>,
    /// When a contact with a machine last failed (a dial, a request that timed out, its connection found
    /// closed): a machine whose last contact failed gets the quick dial ([`Node::dial_wait`]).
    down: Mutex<HashMap<MachineId, i64>>,
    /// The dial in flight to each machine (and when it started), shared by every request that waits for
    /// it — until the machine is heard from after it started (it came back: a dial started while it was
    /// down may never connect, so the next request dials afresh).
    dialing: Mutex<HashMap<MachineId, (i64, Dialing)>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Connections being served (tests read it).
    serving: Arc<tokio::sync::Semaphore>,
    /// Notified whenever a linked machine's request is served, or a dial to one connects
    /// ([`Node::notify_when_heard`]).
    heard: std::sync::OnceLock<Arc<tokio::sync::Notify>>,
}

/// This home's bound endpoint. Cheap to clone.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

/// The relays the home's links and waiting invites name (Iroh's public ones when one chose them: refused
/// under the guard, `store::NO_PUBLIC_NETWORK_VAR`, before anything is bound).
fn relay_urls(doc: &store::Doc) -> Result<Vec<iroh::RelayUrl>, LinkError> {
    let mut urls: Vec<iroh::RelayUrl> = vec![];
    for r in doc
        .links
        .iter()
        .map(|l| &l.relay)
        .chain(doc.invites.iter().map(|p| &p.relay))
    {
        for u in r.urls()? {
            if !urls.contains(&u) {
                urls.push(u);
            }
        }
    }
    Ok(urls)
}

fn relay_mode(urls: &[iroh::RelayUrl]) -> RelayMode {
    if urls.is_empty() {
        RelayMode::Disabled
    } else {
        RelayMode::Custom(urls.iter().cloned().collect::<RelayMap>())
    }
}

/// Bind an endpoint with this home's key on `want` (any port when that one is taken).
async fn bind(
    home: &Path,
    sk: &SecretKey,
    tc: &QuicTransportConfig,
    want: SocketAddr,
    relays: &[iroh::RelayUrl],
) -> Result<Endpoint, LinkError> {
    let build = |addr: SocketAddr| -> Result<iroh::endpoint::Builder, LinkError> {
        Endpoint::builder(iroh::endpoint::presets::Minimal)
            .secret_key(sk.clone())
            .alpns(vec![wire::ALPN.to_vec(), wire::LINK_ALPN.to_vec()])
            .relay_mode(relay_mode(relays))
            .clear_address_lookup()
            .clear_ip_transports()
            .bind_addr(addr)
            .map_err(|e| LinkError::Bind {
                detail: e.to_string(),
            })
            .map(|b| {
                b.transport_config(tc.clone()).hooks(Gate {
                    home: home.to_path_buf(),
                    sk: sk.clone(),
                })
            })
    };
    let failed = |e: iroh::endpoint::BindError| LinkError::Bind {
        detail: e.to_string(),
    };
    match build(want)?.bind().await {
        Ok(ep) => Ok(ep),
        // the port the home used before is taken now: any port (peers learn it on the next contact)
        Err(_) if want.port() != 0 => build(SocketAddr::new(want.ip(), 0))?
            .bind()
            .await
            .map_err(failed),
        Err(e) => Err(failed(e)),
    }
}

fn ms_now() -> i64 {
    base::clock::now_ms()
}

fn random32() -> [u8; 32] {
    let mut b = [0u8; 32];
    let mut got = 0;
    while got < 32 {
        // SAFETY: writes at most the remaining bytes into our buffer.
        let n = unsafe { libc::getrandom(b[got..].as_mut_ptr().cast(), 32 - got, 0) };
        if n > 0 {
            got += n as usize;
        }
    }
    b
}

pub fn invite_hash(sk: &SecretKey, secret: &[u8]) -> String {
    crate::hex(&base::seal::mac(
        &crate::identity::seal_key(sk),
        &[b"invite\0", secret],
    ))
}

/// What an invite string carries.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Invite {
    pub id: MachineId,
    pub addrs: Vec<SocketAddr>,
    pub relay: Relay,
    pub secret: String,
    /// Unix ms.
    pub exp: i64,
}

pub const INVITE_PREFIX: &str = "dshm1";

impl Invite {
    pub fn encode(&self) -> String {
        format!(
            "{INVITE_PREFIX}{}",
            crate::b64::encode(&serde_json::to_vec(self).unwrap_or_default())
        )
    }
    pub fn decode(s: &str) -> Result<Invite, LinkError> {
        let bad = |what: &str| LinkError::BadInvite { what: what.into() };
        let s = s.trim();
        let body = s
            .strip_prefix(INVITE_PREFIX)
            .ok_or_else(|| bad("not an invite of dsh-session-mail (it starts with dshm1)"))?;
        if body.len() > 8192 {
            return Err(bad("it is too long"));
        }
        let bytes = crate::b64::decode(body).ok_or_else(|| bad("it is damaged (not base64url)"))?;
        let inv: Invite =
            serde_json::from_slice(&bytes).map_err(|e| bad(&format!("it is damaged ({e})")))?;
        if crate::unhex::<32>(&inv.secret).is_none() {
            return Err(bad("it is damaged (its secret)"));
        }
        Ok(inv)
    }
}

fn endpoint_addr(id: &MachineId, addrs: &[SocketAddr], relay: &Relay) -> EndpointAddr {
    let mut t: Vec<TransportAddr> = addrs.iter().map(|a| TransportAddr::Ip(*a)).collect();
    // the public choice names every public relay: with no address lookup, the machine is found on whichever
    // of them is its home relay (Iroh tries each path)
    t.extend(
        relay
            .urls()
            .unwrap_or_default()
            .into_iter()
            .map(TransportAddr::Relay),
    );
    EndpointAddr::from_parts(id.endpoint_id(), t)
}

fn app_close_code(e: &ConnectionError) -> Option<u64> {
    match e {
        ConnectionError::ApplicationClosed(a) => Some(a.error_code.into_inner()),
        _ => None,
    }
}

impl Node {
    /// Bind this home's endpoint. The caller must hold the home's lease (one endpoint per key).
    pub async fn start(home: &Path, cfg: NodeConfig, handler: Handler) -> Result<Node, LinkError> {
        let sk = crate::identity::load_or_make(home)?;
        let doc = store::read(home, &sk).doc();
        let transport = |idle: Duration| {
            QuicTransportConfig::builder()
                .max_concurrent_bidi_streams(VarInt::from_u32(cfg.max_streams))
                .max_concurrent_uni_streams(VarInt::from_u32(0))
                .max_idle_timeout(IdleTimeout::try_from(idle).ok())
                .keep_alive_interval(cfg.keep_alive)
                .build()
        };
        let tc = transport(cfg.idle_timeout);
        // a dial hears nothing until the machine answers: its handshake is not given up before the connect
        // deadline. Once up, the connection idles out at the smaller of both sides' timeouts (ours).
        let dial_tc = transport(cfg.idle_timeout.max(cfg.connect_deadline));
        // the port the home bound before, so peers find a new holder where they found the old one
        let want = match cfg.bind {
            Some(b) if b.port() != 0 => b,
            Some(b) => SocketAddr::new(b.ip(), doc.port.unwrap_or(0)),
            None => SocketAddr::from(([0, 0, 0, 0], doc.port.unwrap_or(0))),
        };
        let urls = relay_urls(&doc)?;
        let ep = bind(home, &sk, &tc, want, &urls).await?;
        let port = ep.bound_sockets().first().map(|s| s.port());
        if port.is_some() && port != doc.port && cfg.bind.is_none_or(|b| b.port() == 0) {
            let _ = store::update_off(home, &sk, ms_now(), move |d| {
                d.port = port;
                Ok(())
            })
            .await;
        }
        let node = Node {
            inner: Arc::new(Inner {
                home: home.to_path_buf(),
                sk,
                ep: Mutex::new(ep),
                relays: Mutex::new((!urls.is_empty()).then_some(urls)),
                rebinding: tokio::sync::Mutex::new(()),
                tc,
                dial_tc,
                serving: Arc::new(tokio::sync::Semaphore::new(cfg.max_conns)),
                cfg,
                handler,
                conns: Mutex::new(HashMap::new()),
                seen: Mutex::new(HashMap::new()),
                down: Mutex::new(HashMap::new()),
                dialing: Mutex::new(HashMap::new()),
                task: Mutex::new(None),
                heard: std::sync::OnceLock::new(),
            }),
        };
        node.accept_loop();
        Ok(node)
    }

    /// The endpoint now.
    fn ep(&self) -> Endpoint {
        self.inner.ep.lock().unwrap().clone()
    }

    /// Serve what the endpoint accepts (replacing the loop of an endpoint bound before).
    fn accept_loop(&self) {
        let weak = Arc::downgrade(&self.inner);
        let ep = self.ep();
        let sem = self.inner.serving.clone();
        let task = tokio::spawn(async move {
            while let Some(incoming) = ep.accept().await {
                // a flood: past the bound, refused before its handshake costs anything
                let Ok(permit) = sem.clone().try_acquire_owned() else {
                    incoming.refuse();
                    continue;
                };
                let Some(inner) = weak.upgrade() else { break };
                tokio::spawn(async move {
                    let _permit = permit;
                    let Ok(accepting) = incoming.accept() else {
                        return;
                    };
                    let conn =
                        match tokio::time::timeout(inner.cfg.connect_deadline, accepting).await {
                            Ok(Ok(c)) => c,
                            _ => return, // refused by the gate, or a handshake that did not finish in time
                        };
                    let node = Node { inner };
                    if conn.alpn() == wire::LINK_ALPN {
                        node.serve_join(conn).await;
                    } else {
                        node.serve_conn(conn).await;
                    }
                });
            }
        });
        if let Some(old) = self.inner.task.lock().unwrap().replace(task) {
            old.abort();
        }
    }

    /// Make sure the endpoint runs with `relay` (an invite or a link that names the human's relay): added
    /// to the running endpoint when it has relays already; an endpoint bound without any (every link
    /// `none`, so no relay transport at all) is bound again, on the same port, with the home's relays and
    /// this one. Its open connections close then; peers dial again.
    pub async fn ensure_relay(&self, relay: &Relay) -> Result<(), LinkError> {
        let add = relay.urls()?;
        if add.is_empty() {
            return Ok(());
        }
        let _one = self.inner.rebinding.lock().await;
        let have = self.inner.relays.lock().unwrap().clone();
        match have {
            Some(v) if add.iter().all(|u| v.contains(u)) => return Ok(()),
            Some(v) => {
                let ep = self.ep();
                for url in add.into_iter().filter(|u| !v.contains(u)) {
                    ep.insert_relay(url.clone(), Arc::new(iroh::RelayConfig::from(url.clone())))
                        .await;
                    if let Some(v) = self.inner.relays.lock().unwrap().as_mut() {
                        v.push(url);
                    }
                }
            }
            None => {
                let mut urls = relay_urls(&store::read(&self.inner.home, &self.inner.sk).doc())?;
                for url in add {
                    if !urls.contains(&url) {
                        urls.push(url);
                    }
                }
                let old = self.ep();
                let want = old
                    .bound_sockets()
                    .first()
                    .copied()
                    .or(self.inner.cfg.bind)
                    .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
                if let Some(t) = self.inner.task.lock().unwrap().take() {
                    t.abort();
                }
                self.inner.conns.lock().unwrap().clear();
                old.close().await;
                let ep = bind(
                    &self.inner.home,
                    &self.inner.sk,
                    &self.inner.tc,
                    want,
                    &urls,
                )
                .await?;
                *self.inner.ep.lock().unwrap() = ep;
                *self.inner.relays.lock().unwrap() = Some(urls);
                self.accept_loop();
            }
        }
        // reachable through it before the invite or the link says so (bounded: a relay that does not
        // answer leaves the direct addresses)
        let _ = tokio::time::timeout(self.inner.cfg.connect_deadline, self.ep().online()).await;
        Ok(())
    }

    pub fn id(&self) -> MachineId {
        MachineId::of(&self.ep().id())
    }
    pub fn home(&self) -> &Path {
        &self.inner.home
    }
    pub fn secret_key(&self) -> &SecretKey {
        &self.inner.sk
    }
    pub fn config(&self) -> &NodeConfig {
        &self.inner.cfg
    }

    /// The direct addresses to tell a peer: the bound socket when it is a specific address, else the
    /// interfaces' addresses on the bound port.
    pub fn addrs(&self) -> Vec<SocketAddr> {
        let ep = self.ep();
        let bound = ep.bound_sockets();
        let specific: Vec<SocketAddr> = bound
            .iter()
            .filter(|s| !s.ip().is_unspecified())
            .copied()
            .collect();
        if !specific.is_empty() {
            return specific;
        }
        let mut v: Vec<SocketAddr> = ep
            .addr()
            .ip_addrs()
            .filter(|s| !s.ip().is_unspecified())
            .copied()
            .collect();
        v.truncate(16);
        v
    }

    /// Connections being served now.
    pub fn serving(&self) -> usize {
        self.inner.cfg.max_conns - self.inner.serving.available_permits()
    }

    /// Make a one-time invite: its secret is kept only hashed, until used or `ttl` passes. A relay the
    /// endpoint does not run with yet is added first ([`Node::ensure_relay`]).
    pub async fn invite(&self, relay: Relay, ttl: Duration) -> Result<Invite, LinkError> {
        self.ensure_relay(&relay).await?;
        let secret = random32();
        let now = ms_now();
        let exp = now + ttl.as_millis().min(24 * 3600 * 1000) as i64;
        let hash = invite_hash(&self.inner.sk, &secret);
        let relay2 = relay.clone();
        store::update_off(&self.inner.home, &self.inner.sk, now, move |d| {
            if d.invites.len() >= store::MAX_INVITES {
                return Err(StoreError::Refused(LinkError::TooManyInvites {
                    max: store::MAX_INVITES,
                }));
            }
            d.invites.push(Pending {
                hash,
                expires_at: exp,
                relay: relay2,
            });
            Ok(())
        })
        .await?;
        Ok(Invite {
            id: self.id(),
            addrs: self.addrs(),
            relay,
            secret: crate::hex(&secret),
            exp,
        })
    }

    /// The inviter's side of the handshake: the secret must hash to a waiting invite, which is used up
    /// (replay refused); the joiner is recorded under the id its handshake proved.
    async fn serve_join(&self, conn: Connection) {
        let from = MachineId::of(&conn.remote_id());
        let Ok(Ok((mut send, mut recv))) =
            tokio::time::timeout(self.inner.cfg.frame_deadline, conn.accept_bi()).await
        else {
            conn.close(VarInt::from_u32(close::PROTOCOL), b"no join");
            return;
        };
        let join: Join = match wire::read_frame(&mut recv, self.inner.cfg.frame_deadline).await {
            Ok(j) => j,
            Err(_) => {
                conn.close(VarInt::from_u32(close::PROTOCOL), b"bad join");
                return;
            }
        };
        let secret = crate::unhex::<32>(&join.secret);
        let hash = secret.map(|s| invite_hash(&self.inner.sk, &s));
        let now = ms_now();
        let res = store::update_off(&self.inner.home, &self.inner.sk, now, move |d| {
            let Some(i) = hash
                .as_ref()
                .and_then(|h| d.invites.iter().position(|p| &p.hash == h))
            else {
                return Err(StoreError::Refused(LinkError::InviteUnknown));
            };
            let p = d.invites.remove(i);
            let addrs: Vec<SocketAddr> = join.addrs.iter().take(16).copied().collect();
            if let Some(l) = d.links.iter_mut().find(|l| l.id == from) {
                l.addrs = addrs;
                l.relay = p.relay;
                return Ok(l.name.clone());
            }
            if d.links.len() >= store::MAX_LINKS {
                return Err(StoreError::Refused(LinkError::TooManyLinks {
                    max: store::MAX_LINKS,
                }));
            }
            let name = store::free_name(d, &join.name);
            d.links.push(Link {
                id: from.clone(),
                name: name.clone(),
                relay: p.relay,
                addrs,
                linked_at: now,
            });
            Ok(name)
        })
        .await;
        let answer = match res {
            Ok(name) => Joined {
                ok: true,
                error: None,
                refusal: None,
                name: Some(name),
                addrs: self.addrs(),
            },
            Err(e) => {
                let e = LinkError::from(e);
                Joined {
                    ok: false,
                    error: Some(e.to_string()),
                    refusal: Some(e),
                    name: None,
                    addrs: vec![],
                }
            }
        };
        let _ = wire::write_frame(&mut send, &answer).await;
        let _ = send.finish();
        // the joiner closes once it has read the answer (awaiting it, so it is not lost to a timeout)
        let _ = tokio::time::timeout(self.inner.cfg.frame_deadline, conn.closed()).await;
    }

    /// Use an invite made on another machine: both ends record each other.
    pub async fn accept_invite(
        &self,
        invite: &str,
        name: &str,
        my_name: &str,
    ) -> Result<Link, LinkError> {
        let inv = Invite::decode(invite)?;
        if !crate::valid_name(name) {
            return Err(LinkError::BadName { name: name.into() });
        }
        if inv.exp <= ms_now() {
            return Err(LinkError::InviteExpired);
        }
        if inv.id == self.id() {
            return Err(LinkError::OwnInvite);
        }
        let doc = store::read(&self.inner.home, &self.inner.sk).doc();
        if let Some(l) = doc.by_name(name) {
            if l.id != inv.id {
                return Err(LinkError::NameTaken { name: name.into() });
            }
        }
        // this end is reached through the invite's relay too, from now on
        self.ensure_relay(&inv.relay).await?;
        let addr = endpoint_addr(&inv.id, &inv.addrs, &inv.relay);
        let dl = self.inner.cfg.connect_deadline;
        let conn = tokio::time::timeout(dl, self.ep().connect(addr, wire::LINK_ALPN))
            .await
            .map_err(|_| LinkError::from(CallError::Unreachable("no answer in time".into())))?
            .map_err(|e| LinkError::from(CallError::Unreachable(e.to_string())))?;
        let r = async {
            let (mut send, mut recv) = conn
                .open_bi()
                .await
                .map_err(|e| refused_or(&conn, FrameError::Io(e.to_string())))?;
            let join = Join {
                secret: inv.secret.clone(),
                name: my_name.to_string(),
                addrs: self.addrs(),
            };
            wire::write_frame(&mut send, &join)
                .await
                .map_err(|e| refused_or(&conn, e))?;
            let _ = send.finish();
            let joined: Joined = wire::read_frame(&mut recv, self.inner.cfg.frame_deadline)
                .await
                .map_err(|e| refused_or(&conn, e))?;
            Ok::<Joined, LinkError>(joined)
        }
        .await;
        conn.close(VarInt::from_u32(close::BYE), b"linked");
        let joined = r?;
        if !joined.ok {
            return Err(joined.refusal.unwrap_or(LinkError::PeerRefused {
                message: joined.error.unwrap_or_default(),
            }));
        }
        let mut addrs: Vec<SocketAddr> = joined.addrs.iter().take(16).copied().collect();
        for a in &inv.addrs {
            if !addrs.contains(a) && addrs.len() < 16 {
                addrs.push(*a);
            }
        }
        let now = ms_now();
        let link = Link {
            id: inv.id.clone(),
            name: name.to_string(),
            relay: inv.relay.clone(),
            addrs,
            linked_at: now,
        };
        let l2 = link.clone();
        store::update_off(&self.inner.home, &self.inner.sk, now, move |d| {
            d.links.retain(|l| l.id != l2.id);
            if d.by_name(&l2.name).is_some() {
                return Err(StoreError::Refused(LinkError::NameTaken { name: l2.name }));
            }
            d.links.push(l2);
            Ok(())
        })
        .await?;
        Ok(link)
    }

    /// Serve a linked machine's connection: one request per stream, until it closes or goes idle.
    async fn serve_conn(&self, conn: Connection) {
        let from = MachineId::of(&conn.remote_id());
        loop {
            let (mut send, mut recv) = match conn.accept_bi().await {
                Ok(s) => s,
                Err(_) => return,
            };
            let node = self.clone();
            let from = from.clone();
            let conn2 = conn.clone();
            tokio::spawn(async move {
                let req: Request =
                    match wire::read_frame(&mut recv, node.inner.cfg.frame_deadline).await {
                        Ok(r) => r,
                        Err(e) => {
                            // over the bound, garbage, or stalled mid-frame: the peer is dropped
                            let why = e.to_string();
                            conn2.close(VarInt::from_u32(close::PROTOCOL), why.as_bytes());
                            return;
                        }
                    };
                // unlinked meanwhile: refused at once, the connection closed (the links are read after
                // the request: an unlink that finished before it arrived is always seen)
                let Some(link) = store::read(&node.inner.home, &node.inner.sk)
                    .doc()
                    .by_id(&from)
                    .cloned()
                else {
                    conn2.close(VarInt::from_u32(close::NOT_LINKED), b"not linked");
                    return;
                };
                node.note_seen(&from, None);
                if let Some(n) = node.inner.heard.get() {
                    n.notify_one();
                }
                let resp = match req {
                    Request::Ping => Response::Ok(Value::Null),
                    Request::Unlink => {
                        let f = from.clone();
                        let r = store::update_off(
                            &node.inner.home,
                            &node.inner.sk,
                            ms_now(),
                            move |d| {
                                d.links.retain(|l| l.id != f);
                                Ok(())
                            },
                        )
                        .await;
                        match r {
                            Ok(()) => Response::Ok(Value::Null),
                            Err(e) => Response::Err(WireError {
                                code: "store".into(),
                                message: e.to_string(),
                            }),
                        }
                    }
                    Request::Call { body } => {
                        let h = (node.inner.handler)(link, body);
                        match tokio::time::timeout(node.inner.cfg.request_deadline, h).await {
                            Ok(Ok(v)) => Response::Ok(v),
                            Ok(Err(e)) => Response::Err(e),
                            Err(_) => Response::Err(WireError {
                                code: "timeout".into(),
                                message: "the request did not finish in time".into(),
                            }),
                        }
                    }
                };
                let resp = match wire::write_frame(&mut send, &resp).await {
                    Err(FrameError::TooLarge(n)) => Response::Err(WireError {
                        code: "too-large".into(),
                        message: format!("the answer is {n} bytes, over the bound"),
                    }),
                    _ => {
                        let _ = send.finish();
                        return;
                    }
                };
                let _ = wire::write_frame(&mut send, &resp).await;
                let _ = send.finish();
            });
        }
    }

    fn note_seen(&self, id: &MachineId, rtt: Option<Duration>) {
        if let Ok(mut m) = self.inner.seen.lock() {
            let e = m.entry(id.clone()).or_insert((0, None));
            e.0 = ms_now();
            if rtt.is_some() {
                e.1 = rtt;
            }
        }
    }

    /// When this process last heard from `id`, and the last round trip measured.
    pub fn last_seen(&self, id: &MachineId) -> Option<(i64, Option<Duration>)> {
        self.inner.seen.lock().ok()?.get(id).copied()
    }

    /// Whether a connection to `id` is open now.
    pub fn connected(&self, id: &MachineId) -> bool {
        self.inner
            .conns
            .lock()
            .ok()
            .and_then(|m| m.get(id).map(|c| c.close_reason().is_none()))
            .unwrap_or(false)
    }

    fn note_down(&self, id: &MachineId) {
        if let Ok(mut m) = self.inner.down.lock() {
            m.insert(id.clone(), ms_now());
        }
    }

    /// How long a request waits for a dial to `id` now: the whole [`NodeConfig::connect_deadline`] when
    /// the machine was heard from within [`NodeConfig::recent`] and no contact with it failed since, else
    /// [`NodeConfig::quick_dial`] (never heard from by this process, heard from long ago, or its last
    /// contact failed). A live connection needs no dial at all.
    pub fn dial_wait(&self, id: &MachineId) -> Duration {
        let cfg = &self.inner.cfg;
        let heard = self.last_seen(id).map(|s| s.0);
        let down = self.inner.down.lock().ok().and_then(|m| m.get(id).copied());
        let recent = i64::try_from(cfg.recent.as_millis()).unwrap_or(i64::MAX);
        match heard {
            Some(h) if ms_now().saturating_sub(h) <= recent && down.is_none_or(|d| d < h) => {
                cfg.connect_deadline
            }
            _ => cfg.quick_dial.min(cfg.connect_deadline),
        }
    }

    /// The dial to `link` in flight (unless the machine was heard from since it started), or a new one.
    /// It runs in the background up to the connect deadline,
    /// whoever stops waiting for it: when it connects, the connection is kept for the next request, the
    /// machine counts as heard from, and the `heard` notify fires (what waits in the outbox goes now);
    /// when it fails, the machine's contact failed.
    fn dial(&self, link: &Link) -> Dialing {
        let heard = self.last_seen(&link.id).map_or(0, |s| s.0);
        let mut dialing = self.inner.dialing.lock().unwrap();
        if let Some((started, rx)) = dialing.get(&link.id) {
            if *started >= heard {
                return rx.clone();
            }
        }
        let (tx, rx) = tokio::sync::watch::channel(None);
        dialing.insert(link.id.clone(), (ms_now(), rx.clone()));
        let mine = rx.clone();
        let addr = endpoint_addr(&link.id, &link.addrs, &link.relay);
        let (ep, id, node) = (self.ep(), link.id.clone(), Arc::downgrade(&self.inner));
        let deadline = self.inner.cfg.connect_deadline;
        let opts = ConnectOptions::new().with_transport_config(self.inner.dial_tc.clone());
        tokio::spawn(async move {
            let go = async {
                let connecting = ep
                    .connect_with_opts(addr, wire::ALPN, opts)
                    .await
                    .map_err(|e| e.to_string())?;
                connecting.await.map_err(|e| e.to_string())
            };
            let r = match tokio::time::timeout(deadline, go).await {
                Err(_) => Err("no answer in time".to_string()),
                Ok(r) => r,
            };
            if let Some(inner) = node.upgrade() {
                let node = Node { inner };
                // still the machine's current dial (not one superseded when it was heard from since)
                let current = node.inner.dialing.lock().is_ok_and(|mut d| {
                    let cur = d.get(&id).is_some_and(|(_, rx)| rx.same_channel(&mine));
                    if cur {
                        d.remove(&id);
                    }
                    cur
                });
                match &r {
                    Ok(c) => {
                        if let Ok(mut m) = node.inner.conns.lock() {
                            m.insert(id.clone(), c.clone());
                        }
                        node.note_seen(&id, None);
                        if let Some(n) = node.inner.heard.get() {
                            n.notify_one();
                        }
                    }
                    Err(_) if current => node.note_down(&id),
                    Err(_) => {}
                }
            }
            let _ = tx.send(Some(r));
        });
        rx
    }

    /// A live connection to `link`, or one dialed now, waited for [`Node::dial_wait`] (`full`: the whole
    /// connect deadline). Nothing has been written to the machine when this fails.
    async fn connection(&self, link: &Link, full: bool) -> Result<Connection, CallError> {
        let found = self
            .inner
            .conns
            .lock()
            .ok()
            .and_then(|m| m.get(&link.id).cloned());
        if let Some(c) = found {
            if c.close_reason().is_none() {
                return Ok(c);
            }
            // closed since (by the machine going away, an idle timeout, or this side): its contact failed
            self.note_down(&link.id);
            if let Ok(mut m) = self.inner.conns.lock() {
                m.remove(&link.id);
            }
        }
        let wait = if full {
            self.inner.cfg.connect_deadline
        } else {
            self.dial_wait(&link.id)
        };
        let mut rx = self.dial(link);
        let got = tokio::time::timeout(wait, async {
            rx.wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|r| r.clone())
        })
        .await;
        match got {
            Ok(Some(Ok(c))) => Ok(c),
            Ok(Some(Err(e))) => Err(CallError::Unreachable(e)),
            Ok(None) => Err(CallError::Unreachable("the dial ended".into())),
            // no connection in the wait: this contact failed (the dial may still connect, which counts as heard)
            Err(_) => {
                self.note_down(&link.id);
                Err(if wait < self.inner.cfg.connect_deadline {
                    CallError::Unreachable(format!(
                        "not heard from lately, and no answer within {} ms (still dialing)",
                        wait.as_millis()
                    ))
                } else {
                    CallError::Unreachable("no answer in time".into())
                })
            }
        }
    }

    /// Send `req` to a linked machine and wait for its answer (within the request deadline).
    pub async fn request(&self, machine: &MachineId, req: &Request) -> Result<Value, CallError> {
        self.request_with(machine, req, false).await
    }

    /// [`Node::request`]; `full`: wait for a dial the whole connect deadline, however long ago the machine
    /// was heard from (a probe the human asked for).
    async fn request_with(
        &self,
        machine: &MachineId,
        req: &Request,
        full: bool,
    ) -> Result<Value, CallError> {
        let Some(link) = store::read(&self.inner.home, &self.inner.sk)
            .doc()
            .by_id(machine)
            .cloned()
        else {
            return Err(CallError::NotLinked);
        };
        self.request_link(&link, req, full).await
    }

    /// [`Node::request_with`] to `link`, the links in force as read by the caller.
    async fn request_link(
        &self,
        link: &Link,
        req: &Request,
        full: bool,
    ) -> Result<Value, CallError> {
        let machine = &link.id;
        let body = serde_json::to_vec(req).map_err(|e| CallError::Protocol(e.to_string()))?;
        if body.len() > wire::MAX_FRAME {
            return Err(CallError::TooLarge(body.len()));
        }
        let mut frame = Vec::with_capacity(4 + body.len());
        frame.extend_from_slice(&(body.len() as u32).to_be_bytes());
        frame.extend_from_slice(&body);
        let t0 = Instant::now();
        let dl = self.inner.cfg.request_deadline;
        let mut tries = 0;
        loop {
            tries += 1;
            // nothing is written to the machine when this fails
            let conn = self.connection(link, full).await?;
            let r = tokio::time::timeout(dl, async {
                let (mut send, mut recv) = conn
                    .open_bi()
                    .await
                    .map_err(|e| Fail::Stale(e.to_string()))?;
                // QUIC took less than the whole frame: the machine can never have all of it, and it runs
                // nothing before its last byte (`wire::read_frame`)
                send.write_all(&frame)
                    .await
                    .map_err(|e| Fail::Stale(e.to_string()))?;
                let _ = send.finish();
                wire::read_frame::<_, Response>(&mut recv, dl)
                    .await
                    .map_err(|e| match e {
                        FrameError::Io(_) => Fail::Lost,
                        // the answer's deadline is the request's: a partition mid-request ends here
                        FrameError::Timeout => Fail::Timeout,
                        other => Fail::Garbage(other.to_string()),
                    })
            })
            .await
            .unwrap_or(Err(Fail::Timeout));
            match r {
                Err(Fail::Timeout) => {
                    self.note_down(machine);
                    // a connection that does not answer (its peer killed without a close, a partition) is
                    // not used again: the next call dials afresh
                    if let Some(c) = self
                        .inner
                        .conns
                        .lock()
                        .ok()
                        .and_then(|mut m| m.remove(machine))
                    {
                        c.close(VarInt::from_u32(close::BYE), b"no answer");
                    }
                    return Err(CallError::Timeout);
                }
                Ok(resp) => {
                    self.note_seen(machine, Some(t0.elapsed()));
                    return match resp {
                        Response::Ok(v) => Ok(v),
                        Response::Err(e) => Err(CallError::Remote(e)),
                    };
                }
                Err(fail) => {
                    if let Some(code) = conn.close_reason().as_ref().and_then(app_close_code) {
                        if code == close::NOT_LINKED as u64 {
                            // the peer proved (TLS) it has unlinked this home: the link goes here too (it
                            // runs nothing of a machine it does not link)
                            self.forget(machine).await;
                            return Err(CallError::UnlinkedByPeer);
                        }
                    }
                    if let Ok(mut m) = self.inner.conns.lock() {
                        m.remove(machine);
                    }
                    self.note_down(machine);
                    match fail {
                        Fail::Garbage(msg) => return Err(CallError::Protocol(msg)),
                        // written whole, then the connection failed before the answer (the peer closed or
                        // went silent past the idle timeout): the machine may have run it. It is written at
                        // most once — no second try on a fresh connection — and never said not to have
                        // arrived: the core keeps it as `may have arrived` and settles it by asking later
                        Fail::Lost => return Err(CallError::Timeout),
                        Fail::Stale(msg) if tries >= 2 => return Err(CallError::Unreachable(msg)),
                        // the connection went stale before the request was written whole: once more on a
                        // fresh one
                        Fail::Stale(_) | Fail::Timeout => {}
                    }
                }
            }
        }
    }

    /// Run `body` on a linked machine's handler.
    pub async fn call(&self, machine: &MachineId, body: Value) -> Result<Value, CallError> {
        self.request(machine, &Request::Call { body }).await
    }

    /// [`Node::call`] on `link`, read from the links in force a moment ago by the caller
    /// ([`crate::Machines::call_checked`]): not read and verified again.
    pub async fn call_link(&self, link: &Link, body: Value) -> Result<Value, CallError> {
        self.request_link(link, &Request::Call { body }, false)
            .await
    }

    /// Notify `n` whenever a request of a linked machine is served here (a ping, a call), or a dial to one
    /// connects (also one a request stopped waiting for: [`NodeConfig::quick_dial`]): the process can try
    /// what waits for that machine at once instead of at its next poll (the binding's outbox drain).
    /// Set once; a second call is ignored.
    pub fn notify_when_heard(&self, n: Arc<tokio::sync::Notify>) {
        let _ = self.inner.heard.set(n);
    }

    /// Tell every linked machine this home's endpoint is up (a new holder, a restart): one ping each, in
    /// the background, best effort. Their holders hear from this home at once
    /// ([`Node::notify_when_heard`]), so what waits there for it goes now rather than at their next
    /// poll, and they learn where it is.
    pub fn announce(&self) {
        let links = store::read(&self.inner.home, &self.inner.sk)
            .doc()
            .links
            .clone();
        for l in links {
            let n = self.clone();
            tokio::spawn(async move {
                let _ = n.ping(&l.id).await;
            });
        }
    }

    /// One round trip (a probe: the dial is waited for the whole connect deadline).
    pub async fn ping(&self, machine: &MachineId) -> Result<Duration, CallError> {
        let t = Instant::now();
        self.request_with(machine, &Request::Ping, true).await?;
        Ok(t.elapsed())
    }

    async fn forget(&self, machine: &MachineId) {
        let m = machine.clone();
        let _ = store::update_off(&self.inner.home, &self.inner.sk, ms_now(), move |d| {
            d.links.retain(|l| l.id != m);
            Ok(())
        })
        .await;
        if let Some(c) = self
            .inner
            .conns
            .lock()
            .ok()
            .and_then(|mut c| c.remove(machine))
        {
            c.close(VarInt::from_u32(close::NOT_LINKED), b"unlinked");
        }
    }

    /// Unlink `name`: refused here at once (the link is removed before anything else), then the machine is
    /// told (best effort; when it is offline it learns at its next contact, which this home refuses).
    /// Returns the link and whether the machine confirmed.
    pub async fn unlink(&self, name: &str) -> Result<(Link, bool), LinkError> {
        let doc = store::read(&self.inner.home, &self.inner.sk).doc();
        let Some(link) = doc.by_name(name).cloned() else {
            return Err(LinkError::NoSuchLink { name: name.into() });
        };
        // tell it first on a connection opened while still linked, but never wait for it before refusing:
        // the local removal comes first
        let id = link.id.clone();
        store::update_off(&self.inner.home, &self.inner.sk, ms_now(), move |d| {
            d.links.retain(|l| l.id != id);
            Ok(())
        })
        .await?;
        if let Some(c) = self
            .inner
            .conns
            .lock()
            .ok()
            .and_then(|mut c| c.remove(&link.id))
        {
            c.close(VarInt::from_u32(close::BYE), b"unlinking");
        }
        let told = self.tell_unlink(&link).await;
        Ok((link, told))
    }

    async fn tell_unlink(&self, link: &Link) -> bool {
        let addr = endpoint_addr(&link.id, &link.addrs, &link.relay);
        let dl = Duration::from_secs(5).min(self.inner.cfg.connect_deadline);
        let Ok(Ok(conn)) = tokio::time::timeout(dl, self.ep().connect(addr, wire::ALPN)).await
        else {
            return false;
        };
        let ok = tokio::time::timeout(dl, async {
            let (mut send, mut recv) = conn.open_bi().await.ok()?;
            wire::write_frame(&mut send, &Request::Unlink).await.ok()?;
            let _ = send.finish();
            let r: Response = wire::read_frame(&mut recv, dl).await.ok()?;
            matches!(r, Response::Ok(_)).then_some(())
        })
        .await
        .ok()
        .flatten()
        .is_some();
        conn.close(VarInt::from_u32(close::BYE), b"unlinked");
        ok
    }

    /// Close the endpoint (awaited, so peers see a close, not a timeout).
    pub async fn close(&self) {
        if let Some(t) = self.inner.task.lock().ok().and_then(|mut t| t.take()) {
            t.abort();
        }
        if let Ok(mut m) = self.inner.conns.lock() {
            m.clear();
        }
        if let Ok(mut d) = self.inner.dialing.lock() {
            d.clear();
        }
        self.ep().close().await;
    }
}

/// How one try of a request failed.
enum Fail {
    /// The connection failed under it (closed, reset) before QUIC took the whole request: the machine cannot
    /// have run it. Another try on a fresh one.
    Stale(String),
    /// The connection failed after the request was written whole, before its answer: the machine may have
    /// run it. Never tried again (a request is written at most once); the call is `Timeout` (may have
    /// arrived), never `Unreachable`.
    Lost,
    /// The answer is not the protocol's.
    Garbage(String),
    /// No answer within the request's deadline.
    Timeout,
}

/// Why the link handshake failed: the other machine's close code when it closed it, else `failed`.
fn refused_or(conn: &Connection, failed: FrameError) -> LinkError {
    match conn.close_reason().as_ref().and_then(app_close_code) {
        Some(c) if c == close::NO_INVITE as u64 => LinkError::NoInviteWaiting,
        Some(c) if c == close::NOT_LINKED as u64 => CallError::UnlinkedByPeer.into(),
        _ => match failed {
            FrameError::Timeout => CallError::Timeout.into(),
            FrameError::Io(e) => CallError::Unreachable(e).into(),
            e => CallError::Protocol(e.to_string()).into(),
        },
    }
}
