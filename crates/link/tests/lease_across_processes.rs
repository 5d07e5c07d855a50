//! The lease between real processes: a child process of this test holds the home's endpoint and is
//! SIGKILLed; this process takes over within seconds, with the home's id, and a linked machine reaches it.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use dsh_session_mail_link::node::{Handler, NodeConfig};
use dsh_session_mail_link::{lease, CallError, Machines, Relay};
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
    std::sync::Arc::new(move |_: dsh_session_mail_link::Link, v: Value| {
        Box::pin(async move { Ok(json!({"by": tag, "v": v})) })
    })
}

/// A child process of this test ([`child_holder`]) holding `home`'s endpoint, and the invite it made.
async fn child_holding(home: &std::path::Path) -> (std::process::Child, String) {
    let note = home.join("invite.txt");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_holder",
            "--ignored",
            "--test-threads",
            "1",
        ])
        .env("DSHM_LINK_CHILD_HOME", home)
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
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the child wrote no invite within 30 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    (child, invite)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_holder_killed_the_next_process_takes_over_within_seconds() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    // b links with a while the child holds a's endpoint
    let (mut child, invite) = child_holding(ha.path()).await;
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

/// A call handed to the holder, which dies before it answers (here: B's handler SIGKILLs it after running
/// the call), ends `Timeout` — it may have reached the machine — and is not run again through the process
/// that takes the lease over. Before, the asking process took the lease and sent it a second time: B ran it
/// twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_holder_took_before_it_died_is_not_sent_again_by_the_next_holder() {
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (mut child, invite) = child_holding(ha.path()).await;
    // B runs each call, and SIGKILLs A's holder (the child) when the body says so, before it answers
    let runs: Arc<Mutex<Vec<Value>>> = Arc::default();
    let (r2, home_a) = (runs.clone(), ha.path().to_path_buf());
    let killing: Handler = Arc::new(move |_, v: Value| {
        r2.lock().unwrap().push(v.clone());
        let home_a = home_a.clone();
        Box::pin(async move {
            if v == json!("kill the holder") {
                // (never this process: a second run comes through it when it holds the lease)
                if let Some(h) = lease::holder(&home_a).filter(|h| h.pid != std::process::id()) {
                    // SAFETY: a signal to the test's own child process
                    unsafe { libc::kill(h.pid as i32, libc::SIGKILL) };
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Ok(v)
        })
    });
    let b = Machines::new(hb.path(), cfg(), killing);
    let l = b.accept_invite(&invite, "alpha").await.unwrap();
    // this process asks A's holder (the child) to call B
    let a = Machines::new(ha.path(), cfg(), tagged("parent"));
    let idb = b.node().await.unwrap().id();
    assert_eq!(a.call(&idb, json!("hello")).await.unwrap(), json!("hello"));
    assert!(a.node().await.is_none(), "the child holds A's endpoint");
    let r = a.call(&idb, json!("kill the holder")).await;
    child.wait().unwrap();
    println!("a call whose holder died before it answered: {r:?}");
    assert_eq!(r, Err(CallError::Timeout), "it may have arrived");
    // the next call goes through this process (it takes the lease now) and runs once
    let t = Instant::now();
    let mut r = a.call(&idb, json!("next")).await;
    while r.is_err() && t.elapsed() < Duration::from_secs(15) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        r = a.call(&idb, json!("next")).await;
    }
    assert_eq!(r, Ok(json!("next")));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let n = |v: Value| runs.lock().unwrap().iter().filter(|x| **x == v).count();
    assert_eq!(n(json!("kill the holder")), 1, "{:?}", runs.lock().unwrap());
    assert_eq!(n(json!("next")), 1);
    let _ = l;
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
