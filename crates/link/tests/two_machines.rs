//! Two and three homes, each with its own endpoint on 127.0.0.1, relays disabled, no address lookup: the
//! link handshake, requests, and every refusal of issue 31's bad-input list.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session_mail_link::node::{Handler, Invite, Node, NodeConfig};
use dsh_session_mail_link::wire::{self, WireError};
use dsh_session_mail_link::{store, CallError, LinkError, Relay};
use serde_json::{json, Value};

fn cfg() -> NodeConfig {
    NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        request_deadline: Duration::from_secs(5),
        frame_deadline: Duration::from_millis(500),
        connect_deadline: Duration::from_secs(5),
        max_conns: 8,
        max_streams: 4,
        ..NodeConfig::default()
    }
}

/// A handler that answers `{"echo": body, "from": <proved sender>, "name": <its link's name here>}`.
fn echo() -> Handler {
    Arc::new(|from: store::Link, body: Value| {
        Box::pin(async move {
            if body == json!("refuse") {
                return Err(WireError {
                    code: "refused".into(),
                    message: "no".into(),
                });
            }
            Ok(json!({"echo": body, "from": from.id.as_str(), "name": from.name}))
        })
    })
}

async fn node(h: &tempfile::TempDir) -> Node {
    Node::start(h.path(), cfg(), echo()).await.unwrap()
}

async fn linked() -> (tempfile::TempDir, tempfile::TempDir, Node, Node) {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (a, b) = (node(&ha).await, node(&hb).await);
    let inv = a
        .invite(Relay::None, Duration::from_secs(300))
        .await
        .unwrap();
    let l = b
        .accept_invite(&inv.encode(), "alpha", "beta-host")
        .await
        .unwrap();
    assert_eq!(l.id, a.id());
    (ha, hb, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invite_links_both_ends_and_each_proves_who_calls() {
    let (ha, hb, a, b) = linked().await;
    // both ends recorded each other: the joiner under the name its human gave, the inviter under the
    // joiner's suggestion
    let la = store::links(ha.path(), a.secret_key());
    assert_eq!(la.len(), 1);
    assert_eq!(la[0].id, b.id());
    assert_eq!(la[0].name, "beta-host");
    assert_eq!(store::links(hb.path(), b.secret_key())[0].name, "alpha");
    // a call each way; the handler is handed the link the accept path found: the id the handshake
    // proved, the name this home gave it
    let r = b.call(&a.id(), json!({"x": 1})).await.unwrap();
    assert_eq!(
        r,
        json!({"echo": {"x": 1}, "from": b.id().as_str(), "name": "beta-host"})
    );
    let r = a.call(&b.id(), json!("hi")).await.unwrap();
    assert_eq!(r["from"], json!(a.id().as_str()));
    assert_eq!(r["name"], json!("alpha"));
    // a refusal comes back as data, not as a success
    assert_eq!(
        b.call(&a.id(), json!("refuse")).await,
        Err(CallError::Remote(WireError {
            code: "refused".into(),
            message: "no".into()
        }))
    );
    assert!(b.ping(&a.id()).await.unwrap() < Duration::from_secs(5));
    // the invite is used up: the waiting list is empty again
    assert!(store::read(ha.path(), a.secret_key())
        .doc()
        .invites
        .is_empty());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_or_expired_invite_is_refused() {
    let (ha, hb, hc) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let (a, b, c) = (node(&ha).await, node(&hb).await, node(&hc).await);
    let inv = a
        .invite(Relay::None, Duration::from_secs(300))
        .await
        .unwrap()
        .encode();
    b.accept_invite(&inv, "alpha", "beta").await.unwrap();
    // the same invite again, from a third machine: used up
    let e = c.accept_invite(&inv, "alpha", "gamma").await.unwrap_err();
    assert!(
        matches!(e, LinkError::NoInviteWaiting | LinkError::InviteUnknown),
        "{e:?}"
    );
    assert!(store::links(ha.path(), a.secret_key())
        .iter()
        .all(|l| l.id != c.id()));
    // an invite whose time is up: refused by the joiner before it dials ...
    let mut old = a
        .invite(Relay::None, Duration::from_millis(1))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let e = c
        .accept_invite(&old.encode(), "alpha", "gamma")
        .await
        .unwrap_err();
    assert_eq!(e, LinkError::InviteExpired);
    // ... and by the inviter when the joiner lies about the expiry (the inviter keeps its own)
    old.exp = i64::MAX;
    let e = c
        .accept_invite(&old.encode(), "alpha", "gamma")
        .await
        .unwrap_err();
    assert!(
        matches!(e, LinkError::NoInviteWaiting | LinkError::InviteUnknown),
        "{e:?}"
    );
    // a forged secret against a waiting invite: refused, and the real one still works after
    let real = a
        .invite(Relay::None, Duration::from_secs(300))
        .await
        .unwrap();
    let mut forged = real.clone();
    forged.secret = "00".repeat(32);
    let e = c
        .accept_invite(&forged.encode(), "alpha", "gamma")
        .await
        .unwrap_err();
    // the inviter's refusal arrives typed
    assert_eq!(e, LinkError::InviteUnknown);
    c.accept_invite(&real.encode(), "alpha", "gamma")
        .await
        .unwrap();
    // garbage
    assert!(c.accept_invite("dshm1!!!", "x", "g").await.is_err());
    assert!(Invite::decode("hello").is_err());
    for n in [a, b, c] {
        n.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unlinked_endpoint_is_closed_before_any_data_is_read() {
    let (ha, hc) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = calls.clone();
    let h: Handler = Arc::new(move |_, _| {
        c2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async { Ok(Value::Null) })
    });
    let a = Node::start(ha.path(), cfg(), h).await.unwrap();
    // c has never been linked; it makes itself a link record naming a (sealed with its own key: a's is
    // what a believes)
    let c = node(&hc).await;
    let a_id = a.id();
    let addrs = a.addrs();
    store::update(hc.path(), c.secret_key(), 0, |d| {
        d.links.push(store::Link {
            id: a_id.clone(),
            name: "alpha".into(),
            relay: Relay::None,
            addrs,
            linked_at: 0,
        });
        Ok(())
    })
    .unwrap();
    let r = c.call(&a_id, json!({"steal": true})).await;
    assert_eq!(r, Err(CallError::UnlinkedByPeer));
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the handler never ran"
    );
    // and c drops its own record of a, having been told (TLS-proved) that a has not linked it
    assert!(store::links(hc.path(), c.secret_key()).is_empty());
    // the link ALPN without a waiting invite is closed the same way
    let inv = Invite {
        id: a.id(),
        addrs: a.addrs(),
        relay: Relay::None,
        secret: "11".repeat(32),
        exp: i64::MAX,
    };
    let e = c
        .accept_invite(&inv.encode(), "alpha", "gamma")
        .await
        .unwrap_err();
    assert_eq!(e, LinkError::NoInviteWaiting);
    a.close().await;
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlink_is_refused_at_once_on_both_ends() {
    let (ha, hb, a, b) = linked().await;
    b.call(&a.id(), json!(1)).await.unwrap();
    let (l, told) = b.unlink("alpha").await.unwrap();
    assert_eq!(l.id, a.id());
    assert!(told, "a confirmed");
    assert!(store::links(hb.path(), b.secret_key()).is_empty());
    assert!(store::links(ha.path(), a.secret_key()).is_empty());
    assert_eq!(b.call(&a.id(), json!(1)).await, Err(CallError::NotLinked));
    assert_eq!(a.call(&b.id(), json!(1)).await, Err(CallError::NotLinked));
    a.close().await;
    b.close().await;
}

/// The handler is handed the link the accept path read after the request arrived (the binding reads
/// the links no more): a machine unlinked here while its connection stays open — by another process of
/// the home, which tells no node — is refused at its next request, and no handler runs for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_unlinked_while_its_connection_stays_open_is_refused_at_its_next_request_unhandled(
) {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let c2 = calls.clone();
    let counting: Handler = Arc::new(move |_, v: Value| {
        c2.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { Ok(v) })
    });
    let a = Node::start(ha.path(), cfg(), counting).await.unwrap();
    let b = node(&hb).await;
    let inv = a
        .invite(Relay::None, Duration::from_secs(300))
        .await
        .unwrap();
    b.accept_invite(&inv.encode(), "alpha", "beta")
        .await
        .unwrap();
    assert_eq!(b.call(&a.id(), json!(1)).await, Ok(json!(1)));
    assert!(b.connected(&a.id()), "the connection stays open");
    let served = calls.load(std::sync::atomic::Ordering::SeqCst);
    let b_id = b.id();
    store::update(ha.path(), a.secret_key(), 1, |d| {
        d.links.retain(|l| l.id != b_id);
        Ok(())
    })
    .unwrap();
    assert_eq!(
        b.call(&a.id(), json!(2)).await,
        Err(CallError::UnlinkedByPeer)
    );
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        served,
        "no handler ran for it"
    );
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unlink_while_the_peer_is_offline_refuses_here_at_once_and_there_at_its_next_contact() {
    let (ha, hb, a, b) = linked().await;
    let a_id = a.id();
    a.close().await;
    let t = Instant::now();
    let (_, told) = b.unlink("alpha").await.unwrap();
    assert!(!told);
    assert!(t.elapsed() < Duration::from_secs(8));
    assert!(store::links(hb.path(), b.secret_key()).is_empty());
    assert_eq!(b.call(&a_id, json!(1)).await, Err(CallError::NotLinked));
    // a comes back (same key, new port: b never learned it, so a dials b) and is refused: it forgets b
    let a = node(&ha).await;
    assert_eq!(
        a.call(&b.id(), json!(1)).await,
        Err(CallError::UnlinkedByPeer)
    );
    assert!(store::links(ha.path(), a.secret_key()).is_empty());
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_over_the_bound_is_refused_before_it_is_sent() {
    let (_ha, _hb, a, b) = linked().await;
    let big = "x".repeat(wire::MAX_FRAME + 1);
    assert!(matches!(
        b.call(&a.id(), json!(big)).await,
        Err(CallError::TooLarge(_))
    ));
    // the link still works
    b.call(&a.id(), json!(1)).await.unwrap();
    a.close().await;
    b.close().await;
}

/// A change of links.json waits for `links.lock` (any process of the user can keep it, up to
/// `store::LOCK_WAIT`) on the blocking pool, not on a runtime worker: on a runtime of ONE thread, a handshake
/// whose change waits for a kept lock does not stop the endpoint from serving another linked machine's
/// request meanwhile, and it lands once the lock is free. (Waiting on the worker, the thread is parked until
/// LOCK_WAIT and the handshake is refused.)
#[tokio::test(flavor = "current_thread")]
async fn a_kept_links_lock_holds_a_handshake_but_not_another_machines_request() {
    let (ha, _hb, a, b) = linked().await;
    let hd = tempfile::tempdir().unwrap();
    let d = node(&hd).await;
    let inv = a
        .invite(Relay::None, Duration::from_secs(300))
        .await
        .unwrap();
    let lock = dsh_session_mail_link::machine_dir(ha.path()).join("links.lock");
    let kept = base::fsafe::Flock::lock(&lock).unwrap();
    let join = tokio::spawn(async move {
        let r = d.accept_invite(&inv.encode(), "alpha", "delta").await;
        (d, r)
    });
    // the joiner's handshake reaches a's side, whose change of links.json waits for the kept lock
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = b.call(&a.id(), json!("meanwhile")).await.unwrap();
    assert_eq!(r["echo"], json!("meanwhile"));
    assert!(
        !join.is_finished(),
        "the handshake did not wait for the kept lock"
    );
    drop(kept);
    let (d, r) = join.await.unwrap();
    assert_eq!(r.unwrap().id, a.id());
    let la = store::links(ha.path(), a.secret_key());
    assert!(
        la.iter().any(|l| l.id == d.id() && l.name == "delta"),
        "{la:?}"
    );
    a.close().await;
    b.close().await;
    d.close().await;
}
