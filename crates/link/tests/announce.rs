//! A machine whose endpoint comes back (a restart, a new lease holder) tells its linked machines at once:
//! `Node::announce` pings each, and a node serving a linked machine's request notifies the `Notify` handed
//! to `notify_when_heard` — the binding's outbox drain runs on it instead of waiting for its 2 s poll
//! (test/real-host-outbox.test.mjs measures the landing after the machine is back).

mod common;

use std::sync::Arc;
use std::time::Duration;

use dsh_session_mail_link::node::{refusing_handler, Node, NodeConfig};

fn cfg() -> NodeConfig {
    NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        ..NodeConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_machine_that_comes_back_announces_itself_and_the_other_side_hears_it_at_once() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Node::start(ha.path(), cfg(), refusing_handler())
        .await
        .unwrap();
    let b = Node::start(hb.path(), cfg(), refusing_handler())
        .await
        .unwrap();
    common::join(&a, &b).await;
    let heard = Arc::new(tokio::sync::Notify::new());
    a.notify_when_heard(heard.clone());
    // nothing was served since: no permit waits
    assert!(
        tokio::time::timeout(Duration::from_millis(300), heard.notified())
            .await
            .is_err(),
        "notified without a request"
    );
    // B's endpoint goes and comes back on its port (the same key): it announces itself, A hears it
    b.close().await;
    let b = Node::start(hb.path(), cfg(), refusing_handler())
        .await
        .unwrap();
    b.announce();
    tokio::time::timeout(Duration::from_secs(5), heard.notified())
        .await
        .expect("A heard B's announce within 5 s");
    a.close().await;
    b.close().await;
}
