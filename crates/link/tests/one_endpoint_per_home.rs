//! Two "processes" of one home (two `Machines` handles: each takes the lease through its own descriptor,
//! as two processes would): one holds the endpoint, the other reaches linked machines through it over the
//! holder's Unix socket, and takes over within seconds when the holder stops.

use std::sync::Arc;
use std::time::{Duration, Instant};

use dsh_session_mail_link::holder::Ask;
use dsh_session_mail_link::node::{Handler, NodeConfig};
use dsh_session_mail_link::store::Link;
use dsh_session_mail_link::{lease, store, CallError, MachineId, Machines, Relay};
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

fn tagged(tag: &'static str) -> Handler {
    Arc::new(move |from: Link, v: Value| {
        Box::pin(async move { Ok(json!({"by": tag, "from": from.id.as_str(), "v": v})) })
    })
}

/// An invite of `a`'s home (made by its holder, asked through `a`).
async fn invite(a: &Machines) -> Value {
    a.ask(
        Ask::Invite {
            relay: Relay::None,
            ttl_ms: 60_000,
        },
        Duration::from_secs(5),
    )
    .await
    .unwrap()
}

/// `b` accepts `inv`, naming that home "alpha" and itself "beta": the link.
async fn accept(b: &Machines, inv: &Value) -> Value {
    b.ask(
        Ask::Accept {
            invite: inv.as_str().unwrap().into(),
            name: "alpha".into(),
            my_name: "beta".into(),
        },
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_holder_calls_through_the_holder_and_takes_over_when_it_stops() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a1 = Machines::new(ha.path(), cfg(), tagged("a1"));
    let a2 = Machines::new(ha.path(), cfg(), tagged("a2"));
    let b = Machines::new(hb.path(), cfg(), tagged("b"));
    // nothing bound yet: no link, no lease taken, and a call is refused at once
    assert!(!a1.has_links());
    assert!(lease::read_record(ha.path()).is_none());
    let someone = MachineId::of(&iroh::SecretKey::generate().public());
    assert_eq!(a2.call(&someone, json!(1)).await, Err(CallError::NotLinked));
    assert!(
        lease::read_record(ha.path()).is_none(),
        "nothing bound for a refused call"
    );

    assert!(a1.try_hold().await.unwrap());
    assert!(!a2.try_hold().await.unwrap(), "one endpoint per home");
    // a2 asks for the invite: the holder (a1) makes it
    let inv = invite(&a2).await;
    assert!(a2.node().await.is_none());
    b.try_hold().await.unwrap();
    let l = accept(&b, &inv).await;
    let a_id: MachineId = serde_json::from_value(l["id"].clone()).unwrap();
    let b_node = b.node().await.unwrap();
    let b_id = b_node.id();

    // a2 (not the holder) calls b through a1; b's handler sees a's proved id
    let r = a2.call(&b_id, json!("via holder")).await.unwrap();
    assert_eq!(
        r,
        json!({"by": "b", "from": a_id.as_str(), "v": "via holder"})
    );
    // b calls a: a1 (the holder) serves it
    assert_eq!(b.call(&a_id, json!(2)).await.unwrap()["by"], json!("a1"));

    // the holder stops: a2's watcher takes over within seconds (same key, same id)
    a2.watch();
    let t = Instant::now();
    a1.stop().await;
    while a2.node().await.is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "taken over within seconds"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(a2.node().await.unwrap().id(), a_id);
    assert_eq!(lease::holder(ha.path()).unwrap().pid, std::process::id());
    // b reaches a again (the new holder bound the port the home used before, so b's record of a holds)
    let t = Instant::now();
    loop {
        match b.call(&a_id, json!(3)).await {
            Ok(v) => {
                assert_eq!(v["by"], json!("a2"));
                break;
            }
            Err(e) if t.elapsed() < Duration::from_secs(15) => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        store::links(
            ha.path(),
            &dsh_session_mail_link::identity::read(ha.path())
                .unwrap()
                .unwrap()
        )
        .len(),
        1
    );
    a2.stop().await;
    b.stop().await;
}

/// `Machines::call_checked`: the links the caller read a moment ago stand for the ones in force (the
/// binding reads them as a tool call begins): a machine not in them is refused at once, before anything
/// is bound; one in them is called by the holder or through it; past `Checked::FRESH` the document is
/// read again, so a machine unlinked since is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_by_the_links_read_a_moment_ago_refuses_what_they_do_not_link_and_reads_again_when_old(
) {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a1 = Machines::new(ha.path(), cfg(), tagged("a1"));
    let a2 = Machines::new(ha.path(), cfg(), tagged("a2"));
    let b = Machines::new(hb.path(), cfg(), tagged("b"));
    let someone = MachineId::of(&iroh::SecretKey::generate().public());
    let none = store::checked(ha.path());
    assert!(none.links().is_empty());
    assert_eq!(
        a2.call_checked(&none, &someone, json!(1)).await,
        Err(CallError::NotLinked)
    );
    assert!(
        lease::read_record(ha.path()).is_none(),
        "nothing bound for a refused call"
    );
    assert!(a1.try_hold().await.unwrap());
    b.try_hold().await.unwrap();
    let inv = invite(&a1).await;
    accept(&b, &inv).await;
    let b_id = b.node().await.unwrap().id();
    let a_id = a1.node().await.unwrap().id();
    // a reading from before the link does not stand for long: past FRESH it is read again
    tokio::time::sleep(store::Checked::FRESH + Duration::from_millis(50)).await;
    assert_eq!(
        a1.call_checked(&none, &b_id, json!(0)).await.unwrap()["by"],
        json!("b")
    );
    // a reading with b: called by the holder, and by the other process through it
    let now = store::checked(ha.path());
    assert_eq!(now.links().len(), 1);
    assert_eq!(
        a1.call_checked(&now, &b_id, json!("held")).await.unwrap(),
        json!({"by": "b", "from": a_id.as_str(), "v": "held"})
    );
    assert_eq!(
        a2.call_checked(&now, &b_id, json!("via holder"))
            .await
            .unwrap(),
        json!({"by": "b", "from": a_id.as_str(), "v": "via holder"})
    );
    assert_eq!(
        a1.call_checked(&now, &someone, json!(1)).await,
        Err(CallError::NotLinked)
    );
    // b is unlinked here: a reading from before, once old, is read again and refuses it at once
    a1.ask(
        Ask::Unlink {
            name: "beta".into(),
        },
        Duration::from_secs(10),
    )
    .await
    .unwrap();
    tokio::time::sleep(store::Checked::FRESH + Duration::from_millis(50)).await;
    assert_eq!(
        a1.call_checked(&now, &b_id, json!(2)).await,
        Err(CallError::NotLinked)
    );
    assert_eq!(
        a2.call_checked(&store::checked(ha.path()), &b_id, json!(2))
            .await,
        Err(CallError::NotLinked)
    );
    a1.stop().await;
    b.stop().await;
}
