//! Linked peers that misbehave on the wire, and floods: each is dropped or refused within its deadline,
//! and the endpoint goes on serving. The rogue side is a bare Iroh endpoint (127.0.0.1, relays disabled,
//! no address lookup) whose id the victim has linked.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{addr_of, code, link};
use dsh_session_mail_link::node::{Handler, Node, NodeConfig};
use dsh_session_mail_link::wire::{self, close};
use dsh_session_mail_link::Relay;
use iroh::Endpoint;
use serde_json::{json, Value};

fn cfg() -> NodeConfig {
    NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        request_deadline: Duration::from_secs(5),
        frame_deadline: Duration::from_millis(400),
        connect_deadline: Duration::from_secs(5),
        max_conns: 4,
        max_streams: 4,
        ..NodeConfig::default()
    }
}

fn ok_handler() -> Handler {
    Arc::new(|_, v: Value| Box::pin(async move { Ok(v) }))
}

async fn rogue() -> Endpoint {
    common::bare_endpoint("127.0.0.1").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_a_frame_over_the_bound_drop_the_peer() {
    let h = tempfile::tempdir().unwrap();
    let a = Node::start(h.path(), cfg(), ok_handler()).await.unwrap();
    let r = rogue().await;
    link(h.path(), &a, &r, "rogue");
    for bad in [
        b"\x00\x00\x00\x05{x]!}".to_vec(),
        ((wire::MAX_FRAME as u32) + 1).to_be_bytes().to_vec(),
    ] {
        let c = r.connect(addr_of(&a), wire::ALPN).await.unwrap();
        let (mut s, _rx) = c.open_bi().await.unwrap();
        s.write_all(&bad).await.unwrap();
        let t = Instant::now();
        tokio::time::timeout(Duration::from_secs(5), c.closed())
            .await
            .expect("dropped");
        assert_eq!(code(&c), Some(close::PROTOCOL as u64));
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    r.close().await;
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stalls_mid_frame_is_dropped_within_the_frame_deadline() {
    let h = tempfile::tempdir().unwrap();
    let a = Node::start(h.path(), cfg(), ok_handler()).await.unwrap();
    let r = rogue().await;
    link(h.path(), &a, &r, "rogue");
    let c = r.connect(addr_of(&a), wire::ALPN).await.unwrap();
    let (mut s, _rx) = c.open_bi().await.unwrap();
    // a frame announcing 100 bytes, 5 of them sent, then nothing (the stream left open)
    s.write_all(&100u32.to_be_bytes()).await.unwrap();
    s.write_all(b"{\"kin").await.unwrap();
    let t = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), c.closed())
        .await
        .expect("dropped");
    let took = t.elapsed();
    assert_eq!(code(&c), Some(close::PROTOCOL as u64));
    // the deadline is 400 ms; dropped after it, not long after (generous bound for a loaded machine)
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(4),
        "{took:?}"
    );
    r.close().await;
    a.close().await;
}

/// The promise is "at most `max_conns` served at once" (node.rs, `accept_loop`): a served connection that
/// ends frees its place for the next, so the count below is exact only while none of the four ends. Two
/// things ended one under load and let a fifth in: (1) the gate refused a linked rogue as "not linked"
/// when its check read links.json just as the test linked the next rogue (a real race, fixed in
/// `base::seal::Numbered::read`: the superseded document was taken for a replay); (2) with the default
/// 2.5 s idle timeout a machine stalled past it (reproduced by stopping the test process for 3.5 s
/// mid-flood) idled the four out on both sides, while `serving()` never passed 4. Here no connection
/// can idle out or miss its handshake deadline during the flood, and the four are asserted open, served
/// at once, after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_connections_is_bounded_and_the_endpoint_serves_after_it() {
    let (h, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let long = Duration::from_secs(120);
    let flood_cfg = NodeConfig {
        idle_timeout: long,
        connect_deadline: long,
        ..cfg()
    };
    let a = Node::start(h.path(), flood_cfg, ok_handler())
        .await
        .unwrap();
    // 12 linked endpoints each hold a connection open without a request: only max_conns (4) are served;
    // past the bound the refusal comes at once (the wait is only for a slow machine's handshakes)
    let mut rogues = vec![];
    let mut held = vec![];
    for i in 0..12 {
        let r = rogue().await;
        link(h.path(), &a, &r, &format!("r{i}"));
        if let Ok(Ok(c)) = tokio::time::timeout(long, r.connect(addr_of(&a), wire::ALPN)).await {
            held.push(c);
        }
        rogues.push(r);
    }
    assert_eq!(held.len(), 4, "only max_conns connections were let in");
    for c in &held {
        assert_eq!(
            c.close_reason(),
            None,
            "the four are still open, served at once"
        );
    }
    assert_eq!(a.serving(), 4);
    // unlinked endpoints flooding: refused, nothing served for them
    for _ in 0..8 {
        let r = rogue().await;
        let _ =
            tokio::time::timeout(Duration::from_secs(3), r.connect(addr_of(&a), wire::ALPN)).await;
        r.close().await;
    }
    assert!(a.serving() <= 4);
    // the flood goes away: a real linked machine is served again
    for c in &held {
        c.close(0u32.into(), b"bye");
    }
    for r in rogues {
        r.close().await;
    }
    let b = Node::start(hb.path(), cfg(), ok_handler()).await.unwrap();
    let inv = a
        .invite(Relay::None, Duration::from_secs(60))
        .await
        .unwrap();
    let t = Instant::now();
    loop {
        match b.accept_invite(&inv.encode(), "alpha", "beta").await {
            Ok(_) => break,
            Err(e) if t.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(b.call(&a.id(), json!(7)).await.unwrap(), json!(7));
    a.close().await;
    b.close().await;
}
