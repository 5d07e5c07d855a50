//! The sealed links document, `machine/links.json`: the machines this home's human linked, the invites not
//! yet used (their secrets kept only hashed), and the port the endpoint binds (so a new lease holder is found
//! at the address the peers know). Sealed as the policy is, by the one reader and writer
//! (`base::seal::Numbered`): HMAC-SHA256 under a key derived from the machine key, with a sequence number
//! raised on every write. A document that does not verify — forged, torn, oversized, a link, a foreign owner,
//! or older than one this process already read — reads as **no links and no invites** (nothing can be
//! reached or accepted through it); the human links again to re-seal. Read-modify-write goes under `flock`
//! of `machine/links.lock`, so two processes of the home never lose each other's change. Written only by
//! the human's commands (CLI, web routes) and the link handshake the human started; never by a tool.

use std::io;
use std::path::{Path, PathBuf};

use base::fsafe::Flock;
use base::seal;
use serde::{Deserialize, Serialize};

use crate::error::LinkError;
use crate::MachineId;

/// Largest document read.
pub const MAX_DOC_BYTES: u64 = 256 * 1024;
/// How long a change waits for another one in progress (`machine/links.lock`, in the home: any process
/// of the user can take it and keep it).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);
/// Most links one home keeps.
pub const MAX_LINKS: usize = 64;
/// Most invites waiting at once.
pub const MAX_INVITES: usize = 16;

/// How a link reaches its machine: direct addresses only, Iroh's public relays (run by n0: the human's
/// explicit choice, never a default), or the human's own relay.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Relay {
    None,
    Public,
    Url(String),
}

/// The environment variable that forbids the public choice in this process: `1` makes every use of
/// [`Relay::Public`] (an invite made or used with it, an endpoint bound for a link that names it) fail with
/// [`LinkError::PublicNetworkRefused`] before anything is bound, dialed or looked up. scripts/test.sh, the
/// benchmarks and scripts/demo.sh set it: no test, bench or demo may send a packet to a public relay.
pub const NO_PUBLIC_NETWORK_VAR: &str = "DSH_SESSION_MAIL_NO_PUBLIC_NETWORK";

/// Whether this process forbids the public network ([`NO_PUBLIC_NETWORK_VAR`] is `1`).
pub fn public_network_forbidden() -> bool {
    std::env::var_os(NO_PUBLIC_NETWORK_VAR).is_some_and(|v| v == "1")
}

/// The one place that maps [`Relay::Public`] to relays: Iroh's own production relay map (its URLs; the
/// endpoint gives each the default `RelayConfig`, as that map does). Refused when `forbidden` (the guard,
/// [`public_network_forbidden`]) — before anything is bound or resolved: building the list opens no socket
/// and looks nothing up. `crates/link/tests/no_public_network.rs` fails if the map is named anywhere else.
fn public_relay_urls(forbidden: bool) -> Result<Vec<iroh::RelayUrl>, LinkError> {
    if forbidden {
        return Err(LinkError::PublicNetworkRefused {
            var: NO_PUBLIC_NETWORK_VAR.into(),
        });
    }
    Ok(iroh::defaults::prod::default_relay_map().urls())
}

impl Relay {
    /// `none`, `public`, or an `http(s)://` URL of an iroh-relay (checked by Iroh's own parser: a URL parse,
    /// no lookup of its host). Parsing is data only: the guard applies where the choice is used
    /// ([`Relay::allowed`], [`Relay::urls`]).
    pub fn parse(s: &str) -> Result<Relay, LinkError> {
        if s == "none" {
            return Ok(Relay::None);
        }
        if s == "public" {
            return Ok(Relay::Public);
        }
        let bad = |detail: String| LinkError::BadRelay {
            relay: s.chars().take(80).collect(),
            detail,
        };
        if !(s.starts_with("https://") || s.starts_with("http://")) || s.len() > 512 {
            return Err(bad("neither 'none', 'public' nor an http(s) URL".into()));
        }
        s.parse::<iroh::RelayUrl>()
            .map_err(|e| bad(e.to_string()))?;
        Ok(Relay::Url(s.to_string()))
    }
    /// Refused here when it is the public choice and this process forbids the public network.
    pub fn allowed(&self) -> Result<(), LinkError> {
        match self {
            Relay::Public => public_relay_urls(public_network_forbidden()).map(|_| ()),
            _ => Ok(()),
        }
    }
    /// The relay URLs this choice stands for: none; Iroh's public ones (refused under the guard); the
    /// human's one.
    pub fn urls(&self) -> Result<Vec<iroh::RelayUrl>, LinkError> {
        match self {
            Relay::None => Ok(vec![]),
            Relay::Public => public_relay_urls(public_network_forbidden()),
            Relay::Url(u) => Ok(u.parse().ok().into_iter().collect()),
        }
    }
}

impl std::fmt::Display for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Relay::None => f.write_str("none"),
            Relay::Public => f.write_str("public"),
            Relay::Url(u) => f.write_str(u),
        }
    }
}

impl TryFrom<String> for Relay {
    type Error = LinkError;
    fn try_from(s: String) -> Result<Relay, LinkError> {
        Relay::parse(&s)
    }
}
impl From<Relay> for String {
    fn from(r: Relay) -> String {
        r.to_string()
    }
}

/// One linked machine, as this home's human named it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    pub id: MachineId,
    pub name: String,
    pub relay: Relay,
    /// Its direct addresses as last learned (from the invite, the handshake, or its later connections).
    pub addrs: Vec<std::net::SocketAddr>,
    pub linked_at: i64,
}

/// An invite not yet used: only the hash of its secret is kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Pending {
    pub hash: String,
    pub expires_at: i64,
    pub relay: Relay,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Doc {
    pub v: u32,
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(default)]
    pub links: Vec<Link>,
    #[serde(default)]
    pub invites: Vec<Pending>,
}

impl Doc {
    pub fn by_id(&self, id: &MachineId) -> Option<&Link> {
        self.links.iter().find(|l| &l.id == id)
    }
    pub fn by_name(&self, name: &str) -> Option<&Link> {
        self.links.iter().find(|l| l.name == name)
    }
    /// Drop invites past their expiry.
    pub fn prune(&mut self, now_ms: i64) {
        self.invites.retain(|p| p.expires_at > now_ms);
    }
}

/// Why a document is not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unverified {
    Unreadable(String),
    ForeignOwner,
    NotADocument,
    BadSeal,
    WentBack { seen: u64, seq: u64 },
}

impl std::fmt::Display for Unverified {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unverified::Unreadable(e) => write!(f, "links.json cannot be read: {e}"),
            Unverified::ForeignOwner => f.write_str("links.json is owned by another user"),
            Unverified::NotADocument => f.write_str("links.json is not a sealed links document"),
            Unverified::BadSeal => {
                f.write_str("links.json's seal does not verify (forged or damaged)")
            }
            Unverified::WentBack { seen, seq } => {
                write!(
                    f,
                    "links.json went back from seq {seen} to {seq} (an older copy)"
                )
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reading {
    Absent,
    Verified(Doc),
    Unverified(Unverified),
}

impl Reading {
    /// What is in force: a document that does not verify is no links, no invites.
    pub fn doc(self) -> Doc {
        match self {
            Reading::Verified(d) => d,
            _ => Doc::default(),
        }
    }
}

pub fn doc_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("links.json")
}
fn lock_path(home: &Path) -> PathBuf {
    crate::machine_dir(home).join("links.lock")
}

/// The links document's kind: sealed in the domain "links", the document under "doc"; the highest
/// sequence this process read or wrote per home (a lower one is a replayed copy).
static DOC: seal::Numbered = seal::Numbered::new("links", "doc", MAX_DOC_BYTES);

impl seal::Sequenced for Doc {
    fn seq(&self) -> u64 {
        self.seq
    }
    fn set_seq(&mut self, seq: u64) {
        self.seq = seq;
    }
}

/// Read the document (bounded, never through a link, never blocking on a FIFO).
pub fn read(home: &Path, sk: &iroh::SecretKey) -> Reading {
    let key = || Ok::<_, std::convert::Infallible>(crate::identity::seal_key(sk));
    match DOC.read(home, &doc_path(home), key) {
        Ok(None) => Reading::Absent,
        Ok(Some(doc)) => Reading::Verified(doc),
        Err(why) => Reading::Unverified(match why {
            seal::Refused::Removed => Unverified::Unreadable("removed".into()),
            seal::Refused::Unreadable(e) => Unverified::Unreadable(e.to_string()),
            seal::Refused::ForeignOwner => Unverified::ForeignOwner,
            seal::Refused::Key(never) => match never {},
            seal::Refused::NotADocument => Unverified::NotADocument,
            seal::Refused::BadSeal => Unverified::BadSeal,
            seal::Refused::WentBack { seen, seq } => Unverified::WentBack { seen, seq },
        }),
    }
}

/// The links in force.
pub fn links(home: &Path, sk: &iroh::SecretKey) -> Vec<Link> {
    read(home, sk).doc().links
}

/// The links in force as read and verified at one moment ([`checked`]). A call made within
/// [`Checked::FRESH`] of it may go by them ([`crate::Machines::call_checked`]) instead of reading and
/// verifying the document again: the binding reads them as a tool call begins and hands them down.
#[derive(Debug, Clone)]
pub struct Checked {
    links: Vec<Link>,
    at: std::time::Instant,
}

impl Checked {
    /// How long a reading stands for the links in force (a tool call's own checks before its call; a
    /// longer one, such as a lookup that asks every machine, reads them again).
    pub const FRESH: std::time::Duration = std::time::Duration::from_millis(200);

    pub fn links(&self) -> &[Link] {
        &self.links
    }

    /// `Some(Some(link))`: `id` was linked when read, `Some(None)`: it was not; `None`: the reading is
    /// older than [`Checked::FRESH`] (read again).
    pub fn fresh(&self, id: &MachineId) -> Option<Option<&Link>> {
        (self.at.elapsed() <= Self::FRESH).then(|| self.links.iter().find(|l| &l.id == id))
    }
}

/// The links in force now: the home's key read, the document read and verified (none without a key).
pub fn checked(home: &Path) -> Checked {
    let links = match crate::identity::read(home) {
        Ok(Some(sk)) => links(home, &sk),
        _ => Vec::new(),
    };
    Checked {
        links,
        at: std::time::Instant::now(),
    }
}

#[derive(Debug)]
pub enum StoreError {
    Io(io::Error),
    /// The change itself is refused.
    Refused(LinkError),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "links.json: {e}"),
            StoreError::Refused(e) => write!(f, "{e}"),
        }
    }
}

impl From<StoreError> for LinkError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Io(e) => LinkError::Store {
                detail: e.to_string(),
            },
            StoreError::Refused(e) => e,
        }
    }
}

/// Change the document under the home's lock: `f` sees what is in force (a document that does not verify
/// is seen as empty), and what it leaves is sealed with the next sequence number and written atomically.
pub fn update<R>(
    home: &Path,
    sk: &iroh::SecretKey,
    now_ms: i64,
    f: impl FnOnce(&mut Doc) -> Result<R, StoreError>,
) -> Result<R, StoreError> {
    let dir = crate::ensure_machine_dir(home).map_err(StoreError::Io)?;
    let _lock = Flock::lock_within(&lock_path(home), LOCK_WAIT).map_err(StoreError::Io)?;
    let mut doc = read(home, sk).doc();
    doc.prune(now_ms);
    let r = f(&mut doc)?;
    doc.v = 1;
    DOC.write(
        home,
        &dir,
        &doc_path(home),
        &crate::identity::seal_key(sk),
        &mut doc,
    )
    .map_err(|e| {
        StoreError::Io(match e {
            seal::WriteError::Encode(e) => io::Error::other(e),
            seal::WriteError::Io(e) => e,
        })
    })?;
    Ok(r)
}

/// [`update`] from async code: the wait for `links.lock` (up to [`LOCK_WAIT`]: any process of the user can take
/// it and keep it) and the document's read and write run on the blocking pool (`base::offload`), never on a
/// runtime worker, so a kept lock never parks a worker the endpoint serves other machines' requests on.
pub async fn update_off<R: Send + 'static>(
    home: &Path,
    sk: &iroh::SecretKey,
    now_ms: i64,
    f: impl FnOnce(&mut Doc) -> Result<R, StoreError> + Send + 'static,
) -> Result<R, StoreError> {
    let (home, sk) = (home.to_path_buf(), sk.clone());
    match base::offload::run(base::offload::FILE_DEADLINE, move || {
        update(&home, &sk, now_ms, f)
    })
    .await
    {
        Ok(r) => r,
        Err(base::offload::Offload::TimedOut(d)) => Err(StoreError::Io(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("links.json not changed within {d:?}"),
        ))),
        Err(base::offload::Offload::Panicked) => Err(StoreError::Io(io::Error::other(
            "the change of links.json panicked",
        ))),
    }
}

/// A name not yet used in `doc`, from `want` (sanitized: `[a-z0-9-]`, at most 32): `want`, `want-2`, …
pub fn free_name(doc: &Doc, want: &str) -> String {
    let mut base: String = want
        .to_ascii_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .collect::<String>()
        .trim_matches('-')
        .chars()
        .take(28)
        .collect();
    if base.is_empty() {
        base = "machine".into();
    }
    if doc.by_name(&base).is_none() {
        return base;
    }
    (2..)
        .map(|i| format!("{base}-{i}"))
        .find(|n| doc.by_name(n).is_none())
        .unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn link(id: u8, name: &str) -> Link {
        Link {
            id: MachineId::of(&iroh::SecretKey::from_bytes(&[id; 32]).public()),
            name: name.into(),
            relay: Relay::None,
            addrs: vec!["127.0.0.1:4000".parse().unwrap()],
            linked_at: 1,
        }
    }

    #[test]
    fn a_sealed_document_reads_back_and_a_forged_or_replayed_one_reads_as_no_links() {
        let h = tempfile::tempdir().unwrap();
        let sk = crate::identity::load_or_make(h.path()).unwrap();
        assert_eq!(read(h.path(), &sk), Reading::Absent);
        update(h.path(), &sk, 0, |d| {
            d.links.push(link(1, "laptop"));
            Ok(())
        })
        .unwrap();
        let old = fs::read(doc_path(h.path())).unwrap();
        update(h.path(), &sk, 0, |d| {
            d.links.push(link(2, "box"));
            Ok(())
        })
        .unwrap();
        assert_eq!(links(h.path(), &sk).len(), 2);
        // replayed: the older sealed copy put back
        fs::write(doc_path(h.path()), &old).unwrap();
        assert!(matches!(
            read(h.path(), &sk),
            Reading::Unverified(Unverified::WentBack { .. })
        ));
        assert!(links(h.path(), &sk).is_empty());
        // forged: a link added by hand without the key
        let mut s: serde_json::Value = serde_json::from_slice(&old).unwrap();
        s["doc"]["seq"] = serde_json::json!(99);
        fs::write(doc_path(h.path()), serde_json::to_vec(&s).unwrap()).unwrap();
        assert_eq!(
            read(h.path(), &sk),
            Reading::Unverified(Unverified::BadSeal)
        );
        // another machine's key does not verify it either
        let other = iroh::SecretKey::from_bytes(&[9; 32]);
        update(h.path(), &sk, 0, |d| {
            d.links = vec![link(3, "x")];
            Ok(())
        })
        .unwrap();
        assert_eq!(
            read(h.path(), &other),
            Reading::Unverified(Unverified::BadSeal)
        );
    }

    /// links.lock taken and kept by another process of the user: a change fails after
    /// [`LOCK_WAIT`] instead of waiting for ever, and the document is as it was.
    #[test]
    fn a_change_waits_for_a_kept_lock_only_so_long() {
        let h = tempfile::tempdir().unwrap();
        let sk = crate::identity::load_or_make(h.path()).unwrap();
        update(h.path(), &sk, 0, |d| {
            d.links.push(link(1, "laptop"));
            Ok(())
        })
        .unwrap();
        let kept = Flock::lock(&lock_path(h.path())).unwrap();
        let t0 = std::time::Instant::now();
        let r = update(h.path(), &sk, 0, |d| {
            d.links.clear();
            Ok(())
        });
        assert!(
            matches!(&r, Err(StoreError::Io(e)) if e.kind() == io::ErrorKind::TimedOut),
            "{r:?}"
        );
        assert!(t0.elapsed() >= LOCK_WAIT);
        assert_eq!(links(h.path(), &sk).len(), 1);
        drop(kept);
    }

    #[test]
    fn names_are_checked_and_made_unique() {
        assert!(crate::valid_name("lap-top2"));
        assert!(!crate::valid_name("-x") && !crate::valid_name("Lap") && !crate::valid_name(""));
        let mut d = Doc::default();
        d.links.push(link(1, "box"));
        assert_eq!(free_name(&d, "Box"), "box-2");
        assert_eq!(free_name(&d, "My Laptop!"), "my-laptop");
        assert_eq!(free_name(&d, "!!"), "machine");
        assert!(Relay::parse("ftp://x").is_err());
        assert_eq!(Relay::parse("none").unwrap(), Relay::None);
    }

    #[test]
    fn the_public_choice_reads_back_as_itself_and_maps_to_irohs_relays_only_when_allowed() {
        let p = Relay::parse("public").unwrap();
        assert_eq!(p, Relay::Public);
        assert_eq!(p.to_string(), "public");
        assert_eq!(serde_json::to_string(&p).unwrap(), "\"public\"");
        assert_eq!(serde_json::from_str::<Relay>("\"public\"").unwrap(), p);
        // a link that chose it keeps the choice in the sealed document, not the relays it stands for
        let mut l = link(1, "box");
        l.relay = Relay::Public;
        let j = serde_json::to_value(&l).unwrap();
        assert_eq!(j["relay"], "public");
        assert_eq!(serde_json::from_value::<Link>(j).unwrap(), l);
        // the map: Iroh's production relays (https), nothing looked up to make the list
        let urls = public_relay_urls(false).unwrap();
        assert!(urls.len() >= 2, "{urls:?}");
        assert!(urls.iter().all(|u| u.scheme() == "https"), "{urls:?}");
        // the guard refuses it, typed, as a refusal
        let e = public_relay_urls(true).unwrap_err();
        assert_eq!(
            e,
            LinkError::PublicNetworkRefused {
                var: NO_PUBLIC_NETWORK_VAR.into()
            }
        );
        assert!(e.is_refusal());
        assert_eq!(e.to_json()["kind"], "public-network-refused");
        // none and the human's URL are never refused by it
        assert_eq!(Relay::None.urls().unwrap(), vec![]);
        let own = Relay::parse("http://10.77.3.1:3340").unwrap();
        assert!(own.allowed().is_ok());
        assert_eq!(own.urls().unwrap().len(), 1);
        assert!(matches!(
            Relay::parse("publik"),
            Err(LinkError::BadRelay { .. })
        ));
    }
}
