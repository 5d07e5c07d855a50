//! The lease between real processes: a child process of this test holds the home's endpoint and is
//! SIGKILLed; this process takes over within seconds, with the home's id, and a linked machine reaches it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dsh_session_mail_link::node::{Handler, NodeConfig};
use dsh_session_mail_link::{lease, MachineId, Machines, Relay};
use serde_json::{json, Value};

fn cfg() -> NodeConfig {
    NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        request_deadline: Duration::from_secs(5),
        frame_deadline: Duration::from_secs(2),
        connect_deadline: Duration::from_secs(3),
        ..NodeConfig::default()
    }
}

fn tagged(tag: &'static str) -> Handler {
    std::sync::Arc::new(move |_: MachineId, v: Value| {
        Box::pin(async move { Ok(json!({"by": tag, "v": v})) })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_killed_the_next_process_takes_over_within_seconds() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // b links with a while the child holds a's endpoint
    let note = ha.path().join("invite.txt");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holder",
            "--ignored",
            "--test-threads",
            "1",
        ])
        .env("DSHM_LINK_CHILD_HOME", ha.path())
        .env("DSHM_LINK_CHILD_NOTE", &note)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let invite = loop {
        if let Ok(s) = std::fs::read_to_string(&note) {
            if s.ends_with('\n') {
                break s.trim().to_string();
            }
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the child writes its invite"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(lease::holder(ha.path()).unwrap().pid, child.id());
    let b = Machines::new(hb.path(), cfg(), tagged("b"));
    let l = b.accept_invite(&invite, "alpha").await.unwrap();
    assert_eq!(b.call(&l.id, json!(1)).await.unwrap()["by"], json!("child"));

    // this process watches a's lease; the child dies without a word
    let a = Machines::new(ha.path(), cfg(), tagged("parent"));
    a.watch();
    assert!(a.node().await.is_none());
    let t = Instant::now();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    while a.node().await.is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "taken over within seconds"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = t.elapsed();
    assert_eq!(a.node().await.unwrap().id(), l.id, "the home's id");
    assert_eq!(lease::holder(ha.path()).unwrap().pid, std::process::id());
    // b reaches the new holder on the home's port
    let t2 = Instant::now();
    let v = loop {
        match b.call(&l.id, json!(2)).await {
            Ok(v) => break v,
            Err(_) if t2.elapsed() < Duration::from_secs(15) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(v["by"], json!("parent"));
    eprintln!(
        "takeover after SIGKILL: {took:?}; first call answered {:?} after it",
        t2.elapsed()
    );
    a.stop().await;
    b.stop().await;
}

/// The child: hold the home's endpoint (an invite binds it), print the invite, and wait to be killed.
#[test]
#[ignore]
fn child_holder() {
    let Ok(home) = std::env::var("DSHM_LINK_CHILD_HOME") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let m = Machines::new(std::path::Path::new(&home), cfg(), tagged("child"));
        m.watch();
        let inv = m
            .invite(Relay::None, Duration::from_secs(120))
            .await
            .unwrap();
        let note = std::env::var("DSHM_LINK_CHILD_NOTE").unwrap();
        std::fs::write(&note, format!("{inv}\n")).unwrap();
        tokio::time::sleep(Duration::from_secs(120)).await;
    });
}
