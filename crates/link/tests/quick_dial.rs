//! A machine not heard from lately gets a short first dial (`NodeConfig::quick_dial`): a send to a linked
//! machine that is down fails `Unreachable` (nothing written, so the core's outbox keeps it with
//! "nothing arrived") after the quick dial instead of the whole connect deadline, while the dial goes on
//! in the background and, when the machine answers, the `heard` notify fires (the outbox drain runs). A
//! machine heard from lately gets the whole connect deadline; a live connection is used as it is, its
//! request cut by nothing but the request deadline. Times are printed, not asserted, except that a quick
//! dial's failure comes before the connect deadline and a whole dial's not before it (a timer cannot fire
//! early).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session_mail_link::node::{Handler, Node, NodeConfig};
use dsh_session_mail_link::{store, CallError};
use serde_json::{json, Value};

const QUICK: Duration = Duration::from_millis(1000);
const CONNECT: Duration = Duration::from_secs(8);

fn cfg() -> NodeConfig {
    NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        request_deadline: Duration::from_secs(10),
        connect_deadline: CONNECT,
        quick_dial: QUICK,
        ..NodeConfig::default()
    }
}

/// Answers `{"ok": body}`, after `"slow"` the quick dial's time and half as much again.
fn handler() -> Handler {
    Arc::new(|_, body: Value| {
        Box::pin(async move {
            if body == json!("slow") {
                tokio::time::sleep(QUICK * 3 / 2).await;
            }
            Ok(json!({ "ok": body }))
        })
    })
}

async fn linked() -> (tempfile::TempDir, tempfile::TempDir, Node, Node) {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Node::start(ha.path(), cfg(), handler()).await.unwrap();
    let b = Node::start(hb.path(), cfg(), handler()).await.unwrap();
    common::join(&a, &b).await;
    (ha, hb, a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_that_went_down_fails_within_the_quick_dial_and_the_dial_goes_on() {
    let (_ha, hb, a, b) = linked().await;
    let (ida, idb) = (a.id(), b.id());
    // never heard from by A's endpoint: a quick first dial
    assert_eq!(a.dial_wait(&idb), QUICK);
    // B calls A: A has heard from B lately, so B would get the whole dial
    b.call(&ida, json!("hello")).await.unwrap();
    assert_eq!(a.dial_wait(&idb), CONNECT);
    // A's own connection to B, live: a request slower than the quick dial still gets its answer
    assert_eq!(
        a.call(&idb, json!("slow")).await.unwrap(),
        json!({"ok": "slow"})
    );
    assert!(a.connected(&idb));

    // B goes down (its endpoint closed, as a host that stops)
    b.close().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t = Instant::now();
    let r = a.call(&idb, json!("to the outbox")).await;
    let took = t.elapsed();
    println!("a call to a machine that went down failed after {took:?} (quick dial {QUICK:?}, connect deadline {CONNECT:?})");
    assert!(
        matches!(&r, Err(CallError::Unreachable(_))),
        "nothing was written: Unreachable, got {r:?}"
    );
    assert!(took < CONNECT, "it waited out the whole dial: {took:?}");
    assert_eq!(a.dial_wait(&idb), QUICK, "its last contact failed");
    assert!(!a.connected(&idb));

    // B back on its port (the same key) announces itself: A hears it, and its next call dials afresh —
    // it does not join the dial started while B was down, which would not connect before its deadline
    let heard = Arc::new(tokio::sync::Notify::new());
    a.notify_when_heard(heard.clone());
    let b = Node::start(hb.path(), cfg(), handler()).await.unwrap();
    b.announce();
    tokio::time::timeout(CONNECT, heard.notified())
        .await
        .expect("A heard B's announce");
    assert_eq!(a.dial_wait(&idb), CONNECT, "heard from again");
    let t = Instant::now();
    assert_eq!(
        a.call(&idb, json!("back")).await.unwrap(),
        json!({"ok": "back"})
    );
    println!("B back: A's call answered after {:?}", t.elapsed());
    assert!(a.connected(&idb));
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_heard_from_lately_gets_the_whole_dial() {
    let (_ha, _hb, a, b) = linked().await;
    let idb = b.id();
    // B called A (A has no connection of its own to B), then B went down without A dialing it since
    b.call(&a.id(), json!("hello")).await.unwrap();
    b.close().await;
    assert_eq!(a.dial_wait(&idb), CONNECT);
    let t = Instant::now();
    let r = a.call(&idb, json!("x")).await;
    let took = t.elapsed();
    println!("a call to a machine heard from lately, now down, failed after {took:?} (connect deadline {CONNECT:?})");
    assert!(matches!(&r, Err(CallError::Unreachable(_))), "{r:?}");
    assert!(took >= CONNECT, "the dial was cut short: {took:?}");
    // its contact failed: the next call gets the quick dial
    assert_eq!(a.dial_wait(&idb), QUICK);
    a.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dial_slower_than_the_quick_wait_goes_on_and_connects() {
    let (ha, _hb, a, b) = linked().await;
    let idb = b.id();
    // A's endpoint afresh (B dialed A to link: the old one knows B's own address from that)
    a.close().await;
    let a = Node::start(ha.path(), cfg(), handler()).await.unwrap();
    // A reaches B only through a path of 1.2 s round trip: a handshake takes longer than the quick wait
    let (face, _) =
        common::udp_path(a.addrs()[0], b.addrs()[0], QUICK * 3 / 5, Arc::default()).await;
    store::update(ha.path(), a.secret_key(), 0, |d| {
        d.links.iter_mut().find(|l| l.id == idb).unwrap().addrs = vec![face];
        Ok(())
    })
    .unwrap();
    let heard = Arc::new(tokio::sync::Notify::new());
    a.notify_when_heard(heard.clone());
    assert_eq!(a.dial_wait(&idb), QUICK, "never heard from by A");
    let t = Instant::now();
    let r = a.call(&idb, json!("first")).await;
    println!(
        "the first call over the slow path: {r:?} after {:?}",
        t.elapsed()
    );
    assert!(matches!(&r, Err(CallError::Unreachable(_))), "{r:?}");
    // the dial it stopped waiting for goes on, connects, and A hears of it (the outbox drain runs)
    tokio::time::timeout(CONNECT, heard.notified())
        .await
        .expect("the dial connected within the connect deadline");
    println!("the dial connected after {:?}", t.elapsed());
    assert!(a.connected(&idb));
    assert_eq!(a.dial_wait(&idb), CONNECT);
    assert_eq!(
        a.call(&idb, json!("second")).await.unwrap(),
        json!({"ok": "second"})
    );
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_written_before_the_machine_went_down_is_never_said_not_to_have_arrived() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Node::start(ha.path(), cfg(), handler()).await.unwrap();
    // B's handler runs the request, then B's endpoint closes before it answers (a host that stops)
    let slot: Arc<std::sync::OnceLock<Node>> = Arc::new(std::sync::OnceLock::new());
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (s2, r2) = (slot.clone(), runs.clone());
    let dying: Handler = Arc::new(move |_, _| {
        let (n, runs) = (s2.get().cloned(), r2.clone());
        Box::pin(async move {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if let Some(n) = n {
                tokio::spawn(async move { n.close().await });
            }
            tokio::time::sleep(Duration::from_secs(5)).await;
            Ok(json!("too late"))
        })
    });
    let b = Node::start(hb.path(), cfg(), dying).await.unwrap();
    let _ = slot.set(b.clone());
    common::join(&a, &b).await;
    let t = Instant::now();
    let r = a.call(&b.id(), json!("run then die")).await;
    println!(
        "a request B ran before it went down: {r:?} after {:?}",
        t.elapsed()
    );
    assert_eq!(
        runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "B ran it once"
    );
    // the connection was lost after the request was written, and the retry found B down: may have arrived
    assert_eq!(r, Err(CallError::Timeout));
    a.close().await;
}
