//! The seam's tests: two and three temporary homes, each with its own test host, linked by a test
//! implementation of [`Machines`] that carries every request and answer through the wire's bytes
//! (`wire::encode` → `decode_request` → the far home's [`serve`] → `encode` → `decode_response`), so
//! the DTOs are really serialized. The real transport is `crates/link`'s.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use super::*;
use crate::config::Config;
use crate::delivery::testserver::{ok_accepted, serve as host, Log, Recorded};
use crate::ledger::{self, LedgerOutcome};
use crate::machine::{wire, Call, Machine, MachineId, Machines};
use crate::outcome::{RemoteFate, SendOutcome};
use crate::policy::{self, Change, Inbound};
use crate::request::{Caller, HostInfo};

const A: &str = "session-aaaaaaaa-0000-4000-8000-000000000001";
const B: &str = "session-bbbbbbbb-0000-4000-8000-000000000002";
const C: &str = "session-cccccccc-0000-4000-8000-000000000003";

/// One DSH home with a test host that accepts every prompt.
struct Home {
    dir: tempfile::TempDir,
    base: String,
    log: Log,
    id: MachineId,
    config: Config,
}

impl Home {
    async fn new(c: char) -> Home {
        let (base, log) =
            host(|_, r: &Recorded| ok_accepted(r.json()["rpcId"].as_str().unwrap_or(""))).await;
        crate::delivery::dialect::forget(&base);
        Home {
            dir: tempfile::tempdir().unwrap(),
            base,
            log,
            id: MachineId::parse(&c.to_string().repeat(64)).unwrap(),
            config: Config {
                host_api: "rc8".into(),
                connect_timeout_ms: 500,
                request_timeout_ms: 1000,
                ..Config::default()
            },
        }
    }
    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
    /// A cold session of this home.
    fn cold(&self, id: &str, title: &str) {
        let dir = self.path().join("sessions").join("-w").join(id);
        std::fs::create_dir_all(&dir).unwrap();
        let h = json!({"type":"session","version":0,"id":id,"createdAt":1_700_000_000_000i64,"cwd":"/w","title":title});
        std::fs::write(dir.join("session.jsonl"), format!("{h}\n")).unwrap();
    }
    /// What this home's serving process knows of itself.
    fn here(&self) -> ToolRequest {
        ToolRequest {
            config: self.config.clone(),
            host: HostInfo {
                dsh_home: Some(self.path().to_string_lossy().into_owned()),
                base_url: Some(self.base.clone()),
                profile: Some("web".into()),
                started_at: Some(7),
                ..HostInfo::default()
            },
            peers: Some(vec![]),
            ..ToolRequest::default()
        }
    }
    /// A tool call by session `caller` of this home.
    fn call(&self, caller: &str, tool: &str, args: Value) -> ToolRequest {
        let mut r = self.here();
        r.tool = tool.into();
        r.args = args;
        r.caller = Some(Caller {
            session_id: Some(caller.into()),
            agent_id: None,
            title: Some("Planner".into()),
            turn: None,
        });
        r
    }
    /// The texts this home's host was asked to deliver, with their request ids.
    fn delivered(&self) -> Vec<(String, String)> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .map(|r| {
                let j = r.json();
                (
                    j["payload"]["requestId"]
                        .as_str()
                        .or(j["rpcId"].as_str())
                        .unwrap_or("")
                        .to_string(),
                    j["payload"]["content"][0]["text"]
                        .as_str()
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect()
    }
    fn lines(&self) -> Vec<ledger::Entry> {
        ledger::read_ledger(self.path(), &ledger::Filter::default())
            .map(|r| r.entries)
            .unwrap_or_default()
    }
}

/// The homes and who links whom (each home's own names for the others).
struct Net {
    homes: Vec<Home>,
    /// links[i]: the machines home i links (its names for them).
    links: Vec<Vec<Machine>>,
    /// Machines that answer nothing (offline).
    down: Mutex<HashSet<MachineId>>,
    /// Machines whose answers are lost on the way back (the request arrives and runs).
    lose_answers: Mutex<HashSet<MachineId>>,
    /// Requests that reached each machine.
    arrived: Mutex<Vec<(usize, Request)>>,
    /// Machines that take a request and never answer (its caller waits until it is dropped).
    hang: Mutex<HashSet<MachineId>>,
}

impl Net {
    async fn new(n: usize) -> Arc<Net> {
        let mut homes = Vec::new();
        for c in ['a', 'b', 'c'].into_iter().take(n) {
            homes.push(Home::new(c).await);
        }
        let names = ["a-box", "b-box", "c-box"];
        let links = (0..n)
            .map(|i| {
                (0..n)
                    .filter(|j| *j != i)
                    .map(|j| Machine {
                        id: homes[j].id.clone(),
                        name: names[j].into(),
                    })
                    .collect()
            })
            .collect();
        Arc::new(Net {
            homes,
            links,
            down: Mutex::new(HashSet::new()),
            lose_answers: Mutex::new(HashSet::new()),
            arrived: Mutex::new(Vec::new()),
            hang: Mutex::new(HashSet::new()),
        })
    }
    fn at(self: &Arc<Self>, i: usize) -> Link {
        Link {
            net: Arc::clone(self),
            me: i,
        }
    }
    fn machine(&self, from: usize, to: usize) -> Machine {
        self.links[from]
            .iter()
            .find(|m| m.id == self.homes[to].id)
            .unwrap()
            .clone()
    }
    fn unlink(self: &mut Arc<Self>, a: usize, b: usize) {
        let net = Arc::get_mut(self).expect("no link in use");
        let (ia, ib) = (net.homes[a].id.clone(), net.homes[b].id.clone());
        net.links[a].retain(|m| m.id != ib);
        net.links[b].retain(|m| m.id != ia);
    }
    fn sends_arrived(&self, to: usize) -> usize {
        self.arrived
            .lock()
            .unwrap()
            .iter()
            .filter(|(i, r)| *i == to && matches!(r, Request::Send(_)))
            .count()
    }
}

/// Home `me`'s view of the links: a call is a frame of bytes into the far home's `serve`.
struct Link {
    net: Arc<Net>,
    me: usize,
}

impl Machines for Link {
    fn linked(&self) -> Vec<Machine> {
        self.net.links[self.me].clone()
    }
    fn call(&self, to: &MachineId, req: Request, _deadline: Duration) -> Call<'_> {
        let net = Arc::clone(&self.net);
        let me = self.me;
        let to = to.clone();
        Box::pin(async move {
            if !net.links[me].iter().any(|m| m.id == to) {
                return Err(CallError::Unlinked);
            }
            if net.down.lock().unwrap().contains(&to) {
                return Err(CallError::Unreachable("connection refused".into()));
            }
            let far = net.homes.iter().position(|h| h.id == to).unwrap();
            // the far side knows the caller only by its own link (else the transport closes it)
            let Some(from) = net.links[far]
                .iter()
                .find(|m| m.id == net.homes[me].id)
                .cloned()
            else {
                return Err(CallError::Unreachable("not linked there".into()));
            };
            let bytes = wire::encode(&req);
            let req = wire::decode_request(&bytes).expect("a request frame");
            net.arrived.lock().unwrap().push((far, req));
            if net.hang.lock().unwrap().contains(&to) {
                return std::future::pending().await;
            }
            let answer = serve_bytes(&net.homes[far].here(), &from, &bytes).await;
            if net.lose_answers.lock().unwrap().contains(&to) {
                return Err(CallError::Timeout);
            }
            wire::decode_response(&answer).map_err(|e| CallError::Protocol(e.to_string()))
        })
    }
}

fn send_msg(to: &str, message: &str) -> Value {
    json!({"toSessionId": to, "message": message})
}

/// A `send_session_message` from A (of home 0) to B (of home 1) as it arrives on the wire.
fn send_req(request_id: &str, body: &str) -> wire::SendReq {
    wire::SendReq {
        request_id: request_id.into(),
        sender: A.into(),
        sender_title: None,
        target: B.into(),
        body: body.into(),
        mode: wire::WireMode::Queue,
        tool: wire::WireTool::SendSessionMessage,
        chain: None,
        hop: 1,
    }
}

/// [`send_req`] as the frame the binding hands to `serve_value_at`.
fn send_frame(request_id: &str, body: &str) -> Value {
    wire::encode_value(&Request::Send(send_req(request_id, body)))
}

/// Homes whose next answer record waits (`remote::serve_claimed` writes it after the answer left) until
/// the test sends on, or drops, the sender [`hold_record_of`] gave.
static HELD_RECORDS: Mutex<Vec<(std::path::PathBuf, std::sync::mpsc::Receiver<()>)>> =
    Mutex::new(Vec::new());

/// Hold the next answer record written in `home`.
fn hold_record_of(home: &std::path::Path) -> std::sync::mpsc::Sender<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    HELD_RECORDS.lock().unwrap().push((home.to_path_buf(), rx));
    tx
}

/// The answer record's task, before it writes: waits while the test holds `home`'s record.
pub(super) fn hold_record(home: &std::path::Path) {
    let rx = {
        let mut g = HELD_RECORDS.lock().unwrap_or_else(|p| p.into_inner());
        g.iter().position(|(h, _)| h == home).map(|i| g.remove(i).1)
    };
    if let Some(rx) = rx {
        let _ = rx.recv_timeout(Duration::from_secs(30));
    }
}

#[track_caller]
fn remote(r: &ToolResult) -> &RemoteReceipt {
    match r {
        ToolResult::Send(SendResult {
            outcome: SendOutcome::Remote(x),
            ..
        }) => x,
        other => panic!("expected a remote receipt, got {other:?}"),
    }
}

#[track_caller]
fn remote_refusal(r: &ToolResult) -> &RemoteRefusal {
    match r {
        ToolResult::Send(SendResult {
            outcome: SendOutcome::Refused(Refusal::Remote(x)),
            ..
        }) => x,
        other => panic!("expected a refusal there, got {other:?}"),
    }
}

/// A `send_session_message` from A on home 0 to B on home 1.
/// Home 0 lists the linked machines' sessions (it learns where B lives).
async fn list_from_0(net: &Arc<Net>) {
    let req = net.homes[0].call(A, "sessions_list", json!({}));
    assert!(matches!(
        run_result(req, &net.at(0)).await,
        ToolResult::List(_)
    ));
}

async fn a_to_b(net: &Arc<Net>, message: &str) -> ToolResult {
    let req = net.homes[0].call(A, "send_session_message", send_msg(B, message));
    run_result(req, &net.at(0)).await
}

#[tokio::test]
async fn a_send_lands_on_the_linked_machine_with_seed_003s_header_and_a_reply_goes_back() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    let r = a_to_b(&net, "build it").await;
    let rc = remote(&r);
    assert_eq!(rc.machine, net.machine(0, 1));
    assert_eq!(rc.target, B);
    assert!(
        matches!(
            rc.fate,
            RemoteFate::Accepted {
                repeated: false,
                ..
            }
        ),
        "{:?}",
        rc.fate
    );
    // what B's model sees: exactly seed 003's From header with the sender's own id
    let got = net.homes[1].delivered();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, format!("From {A} ：\nbuild it"));
    // the same request id on both sides; each side's ledger names the other machine
    assert_eq!(got[0].0, rc.request_id);
    let sent = net.homes[0].lines();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].outcome, LedgerOutcome::Accepted);
    // the sending home keeps its human's copy of the text (crossing::sent), vouched by its ledger line
    assert_eq!(
        crate::crossing::sent::text_of(
            net.homes[0].path(),
            &rc.request_id,
            sent[0].body_sha256.as_deref().unwrap(),
            sent[0].time_ms().unwrap(),
        )
        .as_deref(),
        Some("build it")
    );
    assert_eq!(
        sent[0].to_machine.as_deref(),
        Some(net.homes[1].id.as_str())
    );
    let took = net.homes[1].lines();
    assert_eq!(took.len(), 1);
    assert_eq!(took[0].sender.as_deref(), Some(A));
    assert_eq!(
        took[0].from_machine.as_deref(),
        Some(net.homes[0].id.as_str())
    );
    assert_eq!(took[0].request_id.as_deref(), Some(rc.request_id.as_str()));
    // B answers with the same tool, addressing the id from the header, in the turn the message opened:
    // it goes back to home 0
    let mut reply = net.homes[1].call(B, "send_session_message", send_msg(A, "done"));
    reply.caller.as_mut().unwrap().turn = Some(vec![crate::request::TurnMessage {
        kind: Some("user".into()),
        rpc_id: Some(rc.request_id.clone()),
        text: Some(format!("From {A} ：\nbuild it")),
        ..Default::default()
    }]);
    let r = run_result(reply, &net.at(1)).await;
    let back = remote(&r);
    assert_eq!(back.machine, net.machine(1, 0));
    assert_eq!(net.homes[0].delivered()[0].1, format!("From {B} ：\ndone"));
    // the reply is hop 2 of the chain the first message opened, on both sides
    assert_eq!(back.hop, 2);
    let a_took = net.homes[0]
        .lines()
        .into_iter()
        .find(|e| e.from_machine.is_some())
        .unwrap();
    assert_eq!(a_took.hop, Some(2));
    assert_eq!(a_took.chain, took[0].chain);
}

#[tokio::test]
async fn sessions_send_frames_on_arrival_and_verify_says_which_machine_took_it() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let req = net.homes[0].call(
        A,
        "sessions_send",
        json!({"session_id": B, "message": "hi", "mode": "steer"}),
    );
    let r = run_result(req, &net.at(0)).await;
    let rc = remote(&r).clone();
    assert_eq!(rc.mode, Mode::Steer);
    let text = &net.homes[1].delivered()[0].1;
    assert!(
        text.starts_with(
            "Cross-session message from another session of this harness.\nfrom-session: "
        ),
        "{text}"
    );
    assert!(
        text.contains(A) && text.contains("\"Planner\"") && text.contains("delivery: steer"),
        "{text}"
    );
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!(v.machine, net.homes[1].id);
    assert_eq!(v.machine_name.as_deref(), Some("b-box"));
    assert_eq!(v.target.as_deref(), Some(B));
    let there = v.there.expect("the machine answered");
    assert_eq!(there.request_id, rc.request_id);
    assert_eq!(there.target.as_deref(), Some(B));
    // a request id another machine never sent is unknown there
    assert!(
        verify(net.homes[0].path(), &net.at(0), "dsh-session-mail:nope")
            .await
            .is_none()
    );
}

#[tokio::test]
async fn a_listing_adds_the_linked_machines_sessions_and_an_unreachable_one_is_a_note() {
    let net = Net::new(3).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    net.homes[2].cold(C, "Tester");
    let list = |q: Value| {
        let net = Arc::clone(&net);
        async move {
            let req = net.homes[0].call(A, "sessions_list", q);
            match run_result(req, &net.at(0)).await {
                ToolResult::List(s) => s,
                other => panic!("{other:?}"),
            }
        }
    };
    let s = list(json!({})).await;
    let ids: Vec<(&str, Option<&str>)> = s
        .rows
        .iter()
        .map(|c| {
            (
                c.row.id.as_str(),
                c.row.machine.as_ref().map(|m| m.name.as_str()),
            )
        })
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains(&(B, Some("b-box"))) && ids.contains(&(C, Some("c-box"))));
    // the caller still last, and counted on this machine
    assert_eq!(ids[2], (A, None));
    assert_eq!(s.considered, 3);
    assert!(s.machines.is_empty());
    // `query` matches the machine's name
    let s = list(json!({"query": "c-box"})).await;
    let ids: Vec<&str> = s.rows.iter().map(|c| c.row.id.as_str()).collect();
    assert_eq!(ids, vec![C]);
    // a machine that does not answer: a note, the rest still listed
    net.down.lock().unwrap().insert(net.homes[2].id.clone());
    let s = list(json!({})).await;
    assert_eq!(s.rows.len(), 2);
    assert_eq!(s.machines.len(), 1);
    assert_eq!(s.machines[0].machine.name, "c-box");
    assert!(matches!(
        s.machines[0].trouble,
        MachineTrouble::NoAnswer(CallError::Unreachable(_))
    ));
    let text = ToolResult::List(s).render();
    assert!(text.contains(&format!("- {B} [cold, top-level, machine b-box] | cwd=/w | preset=(none) | send: delivered by machine b-box\n  (untitled)")), "{text}");
    assert!(text.ends_with("note: machine c-box did not answer (unreachable: connection refused): its sessions are not listed"), "{text}");
}

#[tokio::test]
async fn a_read_of_a_remote_session_is_run_there_and_names_its_machine() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    let req = net.homes[0].call(A, "sessions_read", json!({"session_id": B}));
    let r = run_result(req, &net.at(0)).await;
    let ToolResult::Read(res) = &r else {
        panic!("{r:?}")
    };
    assert_eq!(res.window.head.id, B);
    assert_eq!(res.window.head.machine, Some(net.machine(0, 1)));
    assert_eq!(res.window.head.cwd.as_deref(), Some("/w"));
    assert_eq!(res.max_chars, usize::MAX, "cut there, not again here");
    assert_eq!(net.sends_arrived(1), 0);
    assert!(r.render().starts_with(&format!("session {B} [cold, top-level, machine b-box] | cwd=/w\ntitle: (untitled)\nreadable messages: 0")), "{}", r.render());
    // a session nowhere: this home's own refusal
    let req = net.homes[0].call(A, "sessions_read", json!({"session_id": C}));
    let r = run_result(req, &net.at(0)).await;
    assert_eq!(r.code(), Some(RefusalCode::NotFound));
}

#[tokio::test]
async fn the_receivers_human_holds_or_refuses_and_its_machine_rule_applies() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let h1 = net.homes[1].path();
    // B on hold there: held for that human, nothing delivered, verify says held
    policy::apply(h1, &Change::Session(B.into(), Inbound::Hold), 1).unwrap();
    let r = a_to_b(&net, "one").await;
    let rc = remote(&r).clone();
    assert_eq!(rc.fate, RemoteFate::Held);
    assert!(net.homes[1].delivered().is_empty());
    assert_eq!(net.homes[0].lines()[0].outcome, LedgerOutcome::Held);
    // the sending home's page: the row shows what B answered at the send, as a remembered answer
    // (read off the runtime, as the command line does: the index is brought up to date before it answers)
    let (home0, rid0) = (net.homes[0].path().to_path_buf(), rc.request_id.clone());
    let row = move || {
        let (h, rid) = (home0.clone(), rid0.clone());
        std::thread::spawn(move || {
            let p = crate::mailindex::list(&h, &crate::mailindex::MailListArgs::default(), &[]);
            let r = p
                .rows
                .iter()
                .find(|r| r.request_id == rid)
                .cloned()
                .unwrap_or_else(|| panic!("the row: {:?} {:?}", p.index, p.rows));
            (r.fate, r.answered.map(|a| a.source))
        })
        .join()
        .unwrap()
    };
    use crate::crossing::fates::Source;
    assert_eq!(row(), (FateState::Held, Some(Source::Send)));
    // the sending session's mail tab says the same, and its line says whose answer it is
    let tab = crate::mailview::view(net.homes[0].path(), A, 50);
    let r = tab
        .rows
        .iter()
        .find(|r| r.request_id == rc.request_id)
        .unwrap();
    assert_eq!(
        (r.fate, r.answered.map(|a| a.source)),
        (FateState::Held, Some(Source::Send))
    );
    assert!(
        r.fate_text
            .starts_with("held: as that machine answered the send at "),
        "{}",
        r.fate_text
    );
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!(v.state, wire::FateState::Held);
    assert_eq!(row(), (FateState::Held, Some(Source::Verify)));
    // that human approves: `approved` there until it lands, then `landed`, as the log says (it was
    // `approved` for ever before: real-host-machines' hold case)
    crate::policy::held::decide(h1, B, &rc.request_id, true, 5).unwrap();
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!(v.state, wire::FateState::Approved);
    assert_eq!(row(), (FateState::Approved, Some(Source::Verify)));
    let msg = json!({"id":"m1","role":"user","content":[{"type":"text","text":"one"}],"source":{"kind":"user","rpcId":rc.request_id}});
    let log = h1.join("sessions").join("-w").join(B).join("session.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!(
        "{}\n{}\n",
        json!({"type":"turn/start","seq":1,"time":2,"data":{"turn":1}}),
        json!({"type":"user/message","seq":2,"time":2,"data":msg,"surfaceOp":"append"})
    ));
    std::fs::write(&log, text).unwrap();
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!(v.state, wire::FateState::Landed, "{v:?}");
    assert_eq!(row(), (FateState::Landed, Some(Source::Verify)));
    // the rule for home 0's machine refuses, over the session's hold
    policy::apply(
        h1,
        &Change::Machine(net.homes[0].id.clone(), Some(Inbound::Refuse)),
        2,
    )
    .unwrap();
    let r = a_to_b(&net, "two").await;
    let rf = remote_refusal(&r);
    assert_eq!(rf.refusal.code, RefusalCode::RefusedByHuman);
    assert_eq!(rf.machine.name, "b-box");
    assert!(net.homes[1].delivered().is_empty());
    // and stop-all there stops it before any rule
    policy::apply(h1, &Change::StopAll(true), 3).unwrap();
    let r = a_to_b(&net, "three").await;
    assert_eq!(remote_refusal(&r).refusal.code, RefusalCode::Stopped);
    assert_eq!(r.code(), Some(RefusalCode::Stopped));
}

#[tokio::test]
async fn a_sender_id_that_is_a_local_session_or_came_from_another_machine_is_refused() {
    let net = Net::new(3).await;
    net.homes[1].cold(B, "Builder");
    net.homes[1].cold(C, "B's own");
    // home 0 claims to be C, which is a session of home 1
    let req = net.homes[0].call(C, "send_session_message", send_msg(B, "hi"));
    let r = run_result(req, &net.at(0)).await;
    let rf = remote_refusal(&r);
    assert_eq!(rf.refusal.code, RefusalCode::ForeignSender);
    assert_eq!(rf.refusal.foreign, Some(wire::ForeignWhy::Local));
    // A first came from home 0; home 2 using the same id is refused
    assert!(matches!(
        remote(&a_to_b(&net, "hi").await).fate,
        RemoteFate::Accepted { .. }
    ));
    let req = net.homes[2].call(A, "send_session_message", send_msg(B, "me too"));
    let r = run_result(req, &net.at(2)).await;
    assert_eq!(
        remote_refusal(&r).refusal.foreign,
        Some(wire::ForeignWhy::OtherMachine)
    );
    assert_eq!(net.homes[1].delivered().len(), 1);
    // every attempt is one ledger line there, the refused ones too
    let lines = net.homes[1].lines();
    assert_eq!(lines.len(), 3);
    assert_eq!(
        lines
            .iter()
            .filter(|e| e.outcome == LedgerOutcome::Refused(RefusalCode::ForeignSender))
            .count(),
        2
    );
}

#[tokio::test]
async fn a_session_of_an_unlinked_machine_is_refused_and_nothing_is_sent() {
    let mut net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    assert!(matches!(
        remote(&a_to_b(&net, "hi").await).fate,
        RemoteFate::Accepted { .. }
    ));
    // home 1 knows A came from home 0; once unlinked, B's reply is refused here, unsent
    net.unlink(0, 1);
    let reply = net.homes[1].call(B, "send_session_message", send_msg(A, "back"));
    let r = run_result(reply, &net.at(1)).await;
    assert_eq!(r.code(), Some(RefusalCode::Unlinked));
    assert!(net.homes[0].delivered().is_empty());
    let l = net.homes[1].lines().into_iter().last().unwrap();
    assert_eq!(l.outcome, LedgerOutcome::Refused(RefusalCode::Unlinked));
}

#[tokio::test]
async fn the_hop_that_arrives_is_never_counted_lower_than_the_receivers_ledger_knows() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let h1 = net.homes[1].path();
    // home 1's ledger has chain K at hop 3 already
    let mut e = ledger::Entry::new(
        base::clock::now_ms(),
        Some(B),
        Some("session-x"),
        "sessions_send",
        Some("queue"),
        Some("dsh-session-mail:k"),
        LedgerOutcome::Accepted,
        Some("x"),
    );
    e.chain = Some("dsh-session-mail:k".into());
    e.hop = Some(3);
    ledger::append(h1, &e).unwrap();
    let from = net.machine(1, 0);
    let send = |hop: u32, rid: &str| wire::SendReq {
        chain: Some("dsh-session-mail:k".into()),
        hop,
        ..send_req(&format!("dsh-session-mail:{rid}"), "x")
    };
    let here = net.homes[1].here();
    let Response::Send(a) = serve(
        &here,
        &from,
        Request::Send(send(1, "00000000-0000-4000-8000-00000000000a")),
    )
    .await
    else {
        panic!()
    };
    assert_eq!(a.hop, 3);
    assert!(matches!(a.landing, Landing::Accepted { .. }));
    let line = net.homes[1].lines().into_iter().last().unwrap();
    assert_eq!(
        (line.chain.as_deref(), line.hop),
        (Some("dsh-session-mail:k"), Some(3))
    );
    // past maxRelayHops (4) there: refused by that machine's loop guard, nothing delivered
    let Response::Send(a) = serve(
        &here,
        &from,
        Request::Send(send(5, "00000000-0000-4000-8000-00000000000b")),
    )
    .await
    else {
        panic!()
    };
    match a.landing {
        Landing::Refused(w) => assert_eq!(
            (w.code, w.hop, w.max),
            (RefusalCode::RelayLimit, Some(5), Some(4))
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(net.homes[1].delivered().len(), 1);
}

#[tokio::test]
async fn a_machine_has_a_budget_of_its_own_on_top_of_the_pair_and_sender_budgets() {
    let mut net = Net::new(2).await;
    Arc::get_mut(&mut net).unwrap().homes[1]
        .config
        .budget_per_machine = 2;
    net.homes[1].cold(B, "Builder");
    // three different senders of home 0: no pair or sender budget is near its limit
    for (i, sender) in [A, C, "session-dddddddd-0000-4000-8000-000000000004"]
        .into_iter()
        .enumerate()
    {
        let req = net.homes[0].call(sender, "send_session_message", send_msg(B, "x"));
        let r = run_result(req, &net.at(0)).await;
        if i < 2 {
            assert!(
                matches!(remote(&r).fate, RemoteFate::Accepted { .. }),
                "{r:?}"
            );
        } else {
            let rf = remote_refusal(&r);
            assert_eq!(rf.refusal.code, RefusalCode::Budget);
            assert!(rf.refusal.machine_budget);
            assert!(rf.refusal.retry_at_ms.is_some());
        }
    }
    assert_eq!(net.homes[1].delivered().len(), 2);
}

#[tokio::test]
async fn a_request_id_delivered_twice_lands_once() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let s = send_req(
        "dsh-session-mail:00000000-0000-4000-8000-0000000000aa",
        "once",
    );
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let Response::Send(first) = serve(&here, &from, Request::Send(s.clone())).await else {
        panic!()
    };
    let Response::Send(again) = serve(&here, &from, Request::Send(s.clone())).await else {
        panic!()
    };
    assert!(!first.repeated && again.repeated);
    assert_eq!(first.landing, again.landing);
    assert_eq!(net.homes[1].delivered().len(), 1);
    // the same id from another machine is not its to repeat
    let other = Machine {
        id: MachineId::parse(&"c".repeat(64)).unwrap(),
        name: "c-box".into(),
    };
    let mut s2 = s.clone();
    s2.sender = C.into();
    let Response::Send(x) = serve(&here, &other, Request::Send(s2)).await else {
        panic!()
    };
    assert!(matches!(x.landing, Landing::Refused(_)));
    assert_eq!(net.homes[1].delivered().len(), 1);
}

/// The answer leaves before its record is written (`serve_claimed` writes it on a blocking task of its
/// own): a repeat in between is never delivered again — another process of the home finds the claim on
/// disk without an answer (in flight: `busy`, its sender tries later), this process answers it from
/// memory (repeated) —, and once the record is written a repeat is answered from it.
#[tokio::test]
async fn the_answer_leaves_before_its_record_and_a_repeat_in_between_is_never_delivered_twice() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path().to_path_buf();
    let rid = "dsh-session-mail:00000000-0000-4000-8000-0000000000f1";
    let served = || {
        let (here, from) = (here.clone(), from.clone());
        async move {
            match serve(&here, &from, Request::Send(send_req(rid, "early"))).await {
                Response::Send(a) => a,
                other => panic!("{other:?}"),
            }
        }
    };
    let record = hold_record_of(&h1);
    let first = tokio::time::timeout(Duration::from_secs(10), served())
        .await
        .expect("answered while its record waits");
    assert!(
        matches!(first.landing, Landing::Accepted { .. }) && !first.repeated,
        "{first:?}"
    );
    // on disk: the claim alone — what another process of the home reads is a claim in flight
    let arrival = arrivals::lookup(&h1, rid).expect("claimed");
    assert_eq!(
        arrival.answer, None,
        "the record was written before the answer left"
    );
    assert!(matches!(
        arrivals::claim(&h1, &arrival, base::clock::now_ms()).unwrap(),
        arrivals::Claim::InFlight(_)
    ));
    // this process answers the repeat from memory, delivering nothing
    let again = served().await;
    assert!(
        again.repeated && again.landing == first.landing,
        "{again:?}"
    );
    assert_eq!(net.homes[1].delivered().len(), 1);
    // the record written: a repeat is answered from it
    record.send(()).unwrap();
    let t0 = std::time::Instant::now();
    while arrivals::lookup(&h1, rid).and_then(|a| a.answer).is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the record never came"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(arrivals::given(&h1, &arrival), None, "still kept in memory");
    assert!(matches!(
        arrivals::claim(&h1, &arrival, base::clock::now_ms()).unwrap(),
        arrivals::Claim::Answered(a) if a.landing == first.landing
    ));
    let third = served().await;
    assert!(
        third.repeated && third.landing == first.landing,
        "{third:?}"
    );
    assert_eq!(net.homes[1].delivered().len(), 1);
}

/// After a send's answer has left, its record's task makes the file the next claim names
/// (`arrivals::prepare`): the next arriving send's claim is that file, not a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_send_leaves_the_next_claims_file_made_and_the_next_send_names_it() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path().to_path_buf();
    let serve_one = |rid: &'static str| {
        let (here, from) = (here.clone(), from.clone());
        async move {
            match serve(&here, &from, Request::Send(send_req(rid, "spare"))).await {
                Response::Send(a) => a,
                other => panic!("{other:?}"),
            }
        }
    };
    assert!(!arrivals::spare_waiting(&h1));
    let first = serve_one("dsh-session-mail:00000000-0000-4000-8000-0000000000f7").await;
    assert!(
        matches!(first.landing, Landing::Accepted { .. }),
        "{first:?}"
    );
    let t0 = std::time::Instant::now();
    while !arrivals::spare_waiting(&h1) {
        assert!(t0.elapsed() < Duration::from_secs(10), "no spare was made");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let rid = "dsh-session-mail:00000000-0000-4000-8000-0000000000f8";
    // the second's record task held (it makes the next spare after the record): the spare is gone once
    // the second is answered, named by its claim
    let record = hold_record_of(&h1);
    let second = serve_one(rid).await;
    assert!(
        matches!(second.landing, Landing::Accepted { .. }),
        "{second:?}"
    );
    assert!(arrivals::lookup(&h1, rid).is_some(), "claimed");
    assert!(!arrivals::spare_waiting(&h1), "the claim named the spare");
    assert_eq!(net.homes[1].delivered().len(), 2);
    record.send(()).unwrap();
    let t0 = std::time::Instant::now();
    while !arrivals::spare_waiting(&h1) {
        assert!(t0.elapsed() < Duration::from_secs(10), "no next spare");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The serving binding asks its host for its facts while the core starts a send (`serve_value_at`): a
/// sender this home recorded as the machine's (its second send on) is claimed — fsynced — while the host
/// is still asked; a sender seen the first time is not claimed before the host answers (whether its id
/// is one of this home's sessions is the host's to say); a request whose host facts never come is
/// refused with no claim left behind, and its retry lands once.
#[tokio::test]
async fn a_known_senders_claim_runs_beside_the_question_to_the_host_and_no_facts_leave_no_claim() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path().to_path_buf();
    let frame = |rid: &str| send_frame(rid, "beside");
    let landing = |v: Option<Value>| match wire::response_from_value(v.expect("served")).unwrap() {
        Response::Send(a) => a,
        other => panic!("{other:?}"),
    };
    // the first send of sender A: no claim until the host has answered
    let first = "dsh-session-mail:00000000-0000-4000-8000-0000000000e1";
    let (hh, hr) = (h1.clone(), here.clone());
    let asked = async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(
            arrivals::lookup(&hh, first).is_none(),
            "claimed before the host said whether the sender is local"
        );
        Some(hr)
    };
    let a = landing(serve_value_at(&h1, &from, frame(first), None, asked).await);
    assert!(matches!(a.landing, Landing::Accepted { .. }), "{a:?}");
    // its second send: the claim is on disk while the host has not answered yet
    let second = "dsh-session-mail:00000000-0000-4000-8000-0000000000e2";
    let (hh, hr) = (h1.clone(), here.clone());
    let asked = async move {
        let t0 = std::time::Instant::now();
        while arrivals::lookup(&hh, second).is_none() {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(10),
                "the claim waited for the host"
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        Some(hr)
    };
    let a = landing(serve_value_at(&h1, &from, frame(second), None, asked).await);
    assert!(
        matches!(a.landing, Landing::Accepted { .. }) && !a.repeated,
        "{a:?}"
    );
    // the host does not answer: refused (the binding says `unavailable`), no claim left, nothing delivered
    let third = "dsh-session-mail:00000000-0000-4000-8000-0000000000e3";
    let none = async { None::<ToolRequest> };
    assert!(serve_value_at(&h1, &from, frame(third), None, none)
        .await
        .is_none());
    assert!(arrivals::lookup(&h1, third).is_none());
    assert!(!net.homes[1].delivered().iter().any(|(r, _)| r == third));
    // its retry, with the host's facts: claimed anew and delivered, once
    let hr = here.clone();
    let a = landing(serve_value_at(&h1, &from, frame(third), None, async move { Some(hr) }).await);
    assert!(
        matches!(a.landing, Landing::Accepted { .. }) && !a.repeated,
        "{a:?}"
    );
    let hr = here.clone();
    let again =
        landing(serve_value_at(&h1, &from, frame(third), None, async move { Some(hr) }).await);
    assert!(again.repeated);
    let ids: Vec<String> = net.homes[1]
        .delivered()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    for rid in [first, second, third] {
        assert_eq!(
            ids.iter().filter(|r| *r == rid).count(),
            1,
            "{rid}: {ids:?}"
        );
    }
}

/// A sender id that another machine used first is refused by its record alone: also when the host's
/// facts never come (then nothing else could be answered), nothing claimed, nothing delivered.
#[tokio::test]
async fn a_sender_recorded_as_another_machines_is_refused_by_its_record_even_without_host_facts() {
    let net = Net::new(3).await;
    net.homes[1].cold(B, "Builder");
    let h1 = net.homes[1].path().to_path_buf();
    let (here, from_a, from_c) = (net.homes[1].here(), net.machine(1, 0), net.machine(1, 2));
    let frame = |rid: &str| send_frame(rid, "mine");
    let rid = "dsh-session-mail:00000000-0000-4000-8000-0000000000e4";
    let hr = here.clone();
    let _ = serve_value_at(&h1, &from_a, frame(rid), None, async move { Some(hr) }).await;
    // C claims A's sender id, and C's request gets no host facts: still refused ForeignSender
    let rid2 = "dsh-session-mail:00000000-0000-4000-8000-0000000000e5";
    let none = async { None::<ToolRequest> };
    let v = serve_value_at(&h1, &from_c, frame(rid2), None, none).await;
    match wire::response_from_value(v.expect("served")).unwrap() {
        Response::Send(a) => assert!(
            matches!(&a.landing, Landing::Refused(w) if w.code == RefusalCode::ForeignSender),
            "{a:?}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(arrivals::lookup(&h1, rid2).is_none());
    assert_eq!(net.homes[1].delivered().len(), 1);
}

/// A claim on disk without its answer: the receiving process died after delivering, or the
/// unsynced answer was lost with the system (`crossing::arrivals`).
#[tokio::test]
async fn a_claim_left_without_its_answer_is_settled_from_the_targets_log_not_delivered_twice() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path();
    let req = |rid: &str| send_req(rid, "once");
    let claim_at = |rid: &str, at: i64| {
        let a = arrivals::Arrival {
            request_id: rid.into(),
            from: from.id.clone(),
            target: B.into(),
            sender: A.into(),
            claimed_at: at,
            answer: None,
        };
        assert_eq!(arrivals::claim(h1, &a, at).unwrap(), arrivals::Claim::New);
    };
    let answer = |s: wire::SendReq| {
        let (here, from) = (here.clone(), from.clone());
        async move {
            match serve(&here, &from, Request::Send(s)).await {
                Response::Send(a) => a,
                other => panic!("{other:?}"),
            }
        }
    };
    let now = base::clock::now_ms();
    let long_ago = now - arrivals::STALE_CLAIM_MS - 1_000;

    // landed in the target's log: answered as accepted (a repeat), nothing delivered again
    let landed = "dsh-session-mail:00000000-0000-4000-8000-0000000000d1";
    claim_at(landed, long_ago);
    let log = h1.join("sessions").join("-w").join(B).join("session.jsonl");
    let msg = json!({"id":"m1","role":"user","content":[{"type":"text","text":format!("From {A} ：\nonce")}],"source":{"kind":"user","rpcId":landed}});
    let line = json!({"type":"user/message","seq":1,"time":2,"data":msg,"surfaceOp":"append"});
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!("{line}\n"));
    std::fs::write(&log, text).unwrap();
    let ans = answer(req(landed)).await;
    assert!(
        matches!(ans.landing, Landing::Accepted { .. }) && ans.repeated,
        "{ans:?}"
    );
    assert!(net.homes[1].delivered().is_empty());
    // and the answer is kept: asked again, the same
    let again = answer(req(landed)).await;
    assert_eq!(again.landing, ans.landing);
    assert!(net.homes[1].delivered().is_empty());

    // a fresh claim without an answer: in flight, busy, nothing delivered
    let fresh = "dsh-session-mail:00000000-0000-4000-8000-0000000000d2";
    claim_at(fresh, now);
    let busy = answer(req(fresh)).await;
    assert_eq!(
        busy.landing,
        Landing::Refused(WireRefusal::code(RefusalCode::Busy))
    );
    assert!(net.homes[1].delivered().is_empty());

    // stale and not in the log: delivered now, once; asked again, answered from the record
    let lost = "dsh-session-mail:00000000-0000-4000-8000-0000000000d3";
    claim_at(lost, long_ago);
    let first = answer(req(lost)).await;
    assert!(
        matches!(first.landing, Landing::Accepted { .. }) && !first.repeated,
        "{first:?}"
    );
    let again = answer(req(lost)).await;
    assert!(again.repeated);
    let ids: Vec<String> = net.homes[1]
        .delivered()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(ids, vec![lost.to_string()]);

    // held for the receiver's human: answered held, never delivered past the human
    let held = "dsh-session-mail:00000000-0000-4000-8000-0000000000d4";
    claim_at(held, long_ago);
    let env = crate::mailbox::Envelope {
        v: 1,
        request_id: held.into(),
        session_id: B.into(),
        mode: "queue".into(),
        text: format!("From {A} ：\nonce"),
        sender: Some(A.into()),
        owner_pid: 0,
        owner_started_at: 0,
        posted_at: now,
    };
    crate::policy::held::hold(h1, &env, now + 3_600_000).unwrap();
    let h = answer(req(held)).await;
    assert_eq!(h.landing, Landing::Held);
    assert_eq!(net.homes[1].delivered().len(), 1);
}

#[tokio::test]
async fn an_unreachable_machine_gets_its_message_from_the_outbox_once_when_it_is_back() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    list_from_0(&net).await;
    net.down.lock().unwrap().insert(net.homes[1].id.clone());
    let r = a_to_b(&net, "later").await;
    let rc = remote(&r).clone();
    let RemoteFate::Outbox { expires_at_ms, why } = &rc.fate else {
        panic!("{:?}", rc.fate)
    };
    assert!(!why.may_have_arrived());
    assert!(*expires_at_ms > base::clock::now_ms() + 23 * 3600 * 1000);
    // kept on disk before the receipt said so; verify: waiting in the outbox
    let p = crossing::outbox::get(net.homes[0].path(), &rc.request_id).unwrap();
    assert_eq!(p.state, crossing::outbox::State::Pending);
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!((v.state, v.in_outbox), (wire::FateState::Waiting, true));
    let remembered = || {
        let h = net.homes[0].path();
        let k = crate::crossing::fates::key(h).unwrap();
        let a = crate::crossing::fates::read(
            h,
            &k,
            &rc.request_id,
            net.homes[1].id.as_str(),
            p.created_at,
            base::clock::now_ms(),
        )
        .unwrap();
        (a.state, a.source)
    };
    use crate::crossing::fates::Source;
    assert_eq!(remembered(), (FateState::Waiting, Source::Outbox));
    // a drain while it is down delivers nothing
    let d = drain(
        net.homes[0].path(),
        &net.at(0),
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!((d.delivered, d.waiting), (0, 1));
    assert!(net.homes[1].delivered().is_empty());
    // back: the next drain delivers it once, with its request id; later drains deliver nothing
    net.down.lock().unwrap().clear();
    let d = drain(
        net.homes[0].path(),
        &net.at(0),
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(d.delivered, 1);
    // what B answered when the outbox delivered it is remembered for the human's row
    assert_eq!(remembered(), (FateState::Queued, Source::Delivery));
    drain(
        net.homes[0].path(),
        &net.at(0),
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    let got = net.homes[1].delivered();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0],
        (rc.request_id.clone(), format!("From {A} ：\nlater"))
    );
    assert_eq!(net.sends_arrived(1), 1);
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert!(!v.in_outbox);
    assert_eq!(v.there.unwrap().target.as_deref(), Some(B));
}

/// The request ids of the copies home `h` keeps of what it sent (crossing::sent's files, any day).
fn sent_copies(h: &std::path::Path) -> Vec<std::path::PathBuf> {
    let root = crossing::dir(h).join("sent");
    let mut out = Vec::new();
    for d in std::fs::read_dir(root).into_iter().flatten().flatten() {
        out.extend(
            std::fs::read_dir(d.path())
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path()),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_that_dies_while_its_send_is_in_flight_leaves_nothing_that_claims_it_went() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    list_from_0(&net).await;
    net.hang.lock().unwrap().insert(net.homes[1].id.clone());
    // the human's copy of the text is written while the request is in flight (remote::send_checked);
    // the sending process dies then: its send's future is dropped before any answer
    let n = Arc::clone(&net);
    let t = tokio::spawn(async move { a_to_b(&n, "in flight").await });
    let h0 = net.homes[0].path().to_path_buf();
    for _ in 0..500 {
        if net.sends_arrived(1) == 1 && !sent_copies(&h0).is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    t.abort();
    assert!(t.await.unwrap_err().is_cancelled());
    assert_eq!(net.sends_arrived(1), 1);
    let rid = net
        .arrived
        .lock()
        .unwrap()
        .iter()
        .find_map(|(_, r)| match r {
            Request::Send(s) => Some(s.request_id.clone()),
            _ => None,
        })
        .unwrap();
    // the copy is there, and nothing vouches for it: no ledger line, so the human's page shows no
    // message and no fate for it (a copy is shown only with the line that hashes to it)
    assert_eq!(sent_copies(&h0).len(), 1);
    assert!(net.homes[0].lines().is_empty());
    let h = h0.clone();
    let p = std::thread::spawn(move || {
        crate::mailindex::list(&h, &crate::mailindex::MailListArgs::default(), &[])
    })
    .join()
    .unwrap();
    assert!(p.rows.iter().all(|r| r.request_id != rid), "{:?}", p.rows);
    let tab = crate::mailview::view(&h0, A, 50);
    assert!(tab.rows.iter().all(|r| r.request_id != rid));
    assert!(crossing::fates::key(&h0).is_none_or(|k| {
        crossing::fates::read(
            &h0,
            &k,
            &rid,
            net.homes[1].id.as_str(),
            base::clock::now_ms(),
            base::clock::now_ms(),
        )
        .is_none()
    }));
    // a send the far side refuses leaves no copy either: the one written in flight is removed
    net.hang.lock().unwrap().clear();
    crossing::seen::remember(
        &h0,
        &net.homes[1].id,
        &[C.to_string()],
        base::clock::now_ms(),
    );
    let r = run_result(
        net.homes[0].call(A, "send_session_message", send_msg(C, "nobody")),
        &net.at(0),
    )
    .await;
    let refused = remote_refusal(&r);
    assert_eq!(refused.refusal.code, RefusalCode::NotFound);
    assert_eq!(net.sends_arrived(1), 2);
    assert_eq!(sent_copies(&h0).len(), 1, "only the dead send's copy");
    assert_eq!(net.homes[0].lines().len(), 1);
    // and an accepted one keeps its copy, vouched by its line
    let r = a_to_b(&net, "landed").await;
    let rc = remote(&r);
    assert_eq!(sent_copies(&h0).len(), 2);
    let line = net.homes[0].lines().pop().unwrap();
    assert_eq!(
        crossing::sent::text_of(
            &h0,
            &rc.request_id,
            line.body_sha256.as_deref().unwrap(),
            line.time_ms().unwrap()
        )
        .as_deref(),
        Some("landed")
    );
}

#[tokio::test]
async fn a_sender_that_crashes_after_the_receipt_leaves_the_message_to_the_next_process_which_lands_it_once(
) {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    // the request arrives and lands, its answer is lost: the sender cannot know, so it keeps it
    list_from_0(&net).await;
    net.lose_answers
        .lock()
        .unwrap()
        .insert(net.homes[1].id.clone());
    let r = a_to_b(&net, "exactly once").await;
    let rc = remote(&r).clone();
    assert!(matches!(&rc.fate, RemoteFate::Outbox { why, .. } if why.may_have_arrived()));
    assert_eq!(net.homes[1].delivered().len(), 1);
    // the sending process is gone; another one of home 0 (a new Link: the next endpoint holder) drains
    drop(r);
    net.lose_answers.lock().unwrap().clear();
    let next = net.at(0);
    let d = drain(
        net.homes[0].path(),
        &next,
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(d.delivered, 1);
    // it arrived twice and landed once
    assert_eq!(net.sends_arrived(1), 2);
    assert_eq!(net.homes[1].delivered().len(), 1);
    let p = crossing::outbox::get(net.homes[0].path(), &rc.request_id).unwrap();
    match p.state {
        crossing::outbox::State::Delivered { answer, .. } => assert!(answer.repeated),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_message_whose_machine_never_comes_back_expires_and_verify_says_so() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    list_from_0(&net).await;
    net.down.lock().unwrap().insert(net.homes[1].id.clone());
    let r = a_to_b(&net, "too late").await;
    let rc = remote(&r).clone();
    let RemoteFate::Outbox { expires_at_ms, .. } = rc.fate else {
        panic!()
    };
    net.down.lock().unwrap().clear();
    let d = drain(
        net.homes[0].path(),
        &net.at(0),
        expires_at_ms,
        Duration::from_secs(5),
    )
    .await;
    assert_eq!((d.expired, d.delivered), (1, 0));
    let v = verify(net.homes[0].path(), &net.at(0), &rc.request_id)
        .await
        .unwrap();
    assert_eq!(v.state, wire::FateState::Expired);
    // expired is final: a later drain delivers nothing
    drain(
        net.homes[0].path(),
        &net.at(0),
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    assert!(net.homes[1].delivered().is_empty());
    assert_eq!(net.sends_arrived(1), 0);
}

#[tokio::test]
async fn a_receipt_text_pins_the_machine_and_never_says_landed_for_the_outbox() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let r = a_to_b(&net, "hi").await;
    let rid = remote(&r).request_id.clone();
    assert_eq!(
        r.render(),
        format!("accepted for {B} on machine b-box | mode=queue | chars=2 (woke a cold session there)\nThat machine's host took it: the message is queued in that session's inbox there. Its reply will not return through this call; if that agent answers, the answer arrives here as a message headed From {B} ：.\nrequest: {rid}")
    );
    net.down.lock().unwrap().insert(net.homes[1].id.clone());
    let r = a_to_b(&net, "hi").await;
    let text = r.render();
    assert!(text.starts_with(&format!("waiting in the outbox for {B} on machine b-box | mode=queue | chars=2\nNot delivered yet: that machine could not be reached (unreachable: connection refused). The message is kept in this host's outbox and is delivered once when machine b-box answers, with the same request id, so it never lands twice.")), "{text}");
    assert!(!text.contains("accepted"), "{text}");
    // a refusal there names the machine and says nothing was delivered
    net.down.lock().unwrap().clear();
    policy::apply(net.homes[1].path(), &Change::StopAll(true), 1).unwrap();
    let r = a_to_b(&net, "hi").await;
    let rid = remote_refusal(&r).request_id.clone();
    assert_eq!(
        r.render(),
        format!("refused (stopped): machine b-box refused the message to \"{B}\": its human stopped all agent mail there.\nNothing was delivered there.\nDo not retry or route it through another session. Tell the user if the message matters.\nrequest: {rid}")
    );
}

#[tokio::test]
async fn a_parcel_whose_machine_is_unlinked_before_it_answers_is_never_delivered() {
    let mut net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    list_from_0(&net).await;
    net.down.lock().unwrap().insert(net.homes[1].id.clone());
    let rid = remote(&a_to_b(&net, "x").await).request_id.clone();
    net.down.lock().unwrap().clear();
    net.unlink(0, 1);
    let d = drain(
        net.homes[0].path(),
        &net.at(0),
        base::clock::now_ms(),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!((d.unlinked, d.delivered), (1, 0));
    let v = verify(net.homes[0].path(), &net.at(0), &rid).await.unwrap();
    assert_eq!(
        (v.state, v.machine_name.as_deref()),
        (wire::FateState::Refused, None)
    );
    assert!(net.homes[1].delivered().is_empty());
    // and a new send to that session is not made: its machine is not linked (its id is not one of ours)
    let r = a_to_b(&net, "y").await;
    assert_eq!(r.code(), Some(RefusalCode::NotFound));
    assert_eq!(net.sends_arrived(1), 0);
}

#[tokio::test]
async fn a_frame_that_does_not_decode_runs_nothing() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    for bad in [
        &b"{\"v\":1,\"body\":{\"op\":\"send\"}}"[..],
        b"\x00\x01",
        b"{\"v\":9,\"body\":{}}",
    ] {
        let out = serve_bytes(&here, &from, bad).await;
        match wire::decode_response(&out).unwrap() {
            Response::Refused(w) => assert_eq!(w.code, RefusalCode::BadArgument),
            other => panic!("{other:?}"),
        }
    }
    assert!(net.homes[1].delivered().is_empty());
    assert!(net.homes[1].lines().is_empty());
}

#[test]
fn a_read_answer_over_the_frame_bound_leaves_its_oldest_messages_out_as_omitted() {
    let msg = |seq: u64| WireMessage {
        role: "user".into(),
        seq,
        label: "user".into(),
        request: None,
        injected: false,
        replaced: false,
        error: false,
        body: "x".repeat(60_000),
    };
    let a = ReadAnswer {
        head: WireHead {
            id: B.into(),
            live: false,
            subagent: false,
            parent: None,
            cwd: None,
            title: None,
            readable: 100,
            captured_through: Some(100),
            since: None,
        },
        // newest first
        messages: (1..=100).rev().map(msg).collect(),
        omitted: 0,
        hidden_injected: 0,
        hidden_system: 0,
        notes: vec![],
    };
    let Response::Read(fit) = fit_read(Response::Read(a)) else {
        panic!()
    };
    assert!(fit.messages.len() < 100 && !fit.messages.is_empty());
    assert_eq!(fit.omitted as usize + fit.messages.len(), 100);
    assert_eq!(fit.messages[0].seq, 100, "the newest stay");
    let bytes = wire::encode(&Response::Read(fit));
    assert!(bytes.len() <= wire::MAX_RESPONSE_BYTES);
    assert!(wire::decode_response(&bytes).is_ok());
}

#[tokio::test]
async fn a_frame_carried_as_a_json_value_is_served_as_its_bytes_are() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let req = wire::encode_value(&Request::List { args: json!({}) });
    match wire::response_from_value(serve_value(&here, &from, req).await).unwrap() {
        Response::List(l) => assert_eq!(l.rows[0].id, B),
        other => panic!("{other:?}"),
    }
    match wire::response_from_value(serve_value(&here, &from, json!({"v": 1})).await).unwrap() {
        Response::Refused(w) => assert_eq!(w.code, RefusalCode::BadArgument),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_receivers_standing_rules_name_a_foreign_sender_and_its_machine() {
    let net = Net::new(3).await;
    net.homes[1].cold(B, "Builder");
    let h1 = net.homes[1].path();
    // "always refuse from A" on home 1, A being a session of home 0
    policy::apply(h1, &Change::Sender(A.into(), Some(Inbound::Refuse)), 1).unwrap();
    let r = a_to_b(&net, "one").await;
    assert_eq!(remote_refusal(&r).refusal.code, RefusalCode::RefusedByHuman);
    // home 2's machine on hold: its sender C is held there, while A is still refused by its own rule
    policy::apply(
        h1,
        &Change::Machine(net.homes[2].id.clone(), Some(Inbound::Hold)),
        2,
    )
    .unwrap();
    let req = net.homes[2].call(C, "send_session_message", send_msg(B, "two"));
    let r = run_result(req, &net.at(2)).await;
    assert_eq!(remote(&r).fate, RemoteFate::Held);
    assert!(net.homes[1].delivered().is_empty());
    // the rule removed: A's mail lands
    policy::apply(h1, &Change::Sender(A.into(), None), 3).unwrap();
    assert!(matches!(
        remote(&a_to_b(&net, "three").await).fate,
        RemoteFate::Accepted { .. }
    ));
    assert_eq!(net.homes[1].delivered().len(), 1);
}

#[tokio::test]
async fn a_ping_pong_across_two_machines_is_one_chain_stopped_at_max_relay_hops() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    // hop 1: A (home 0) to B (home 1), opened by A's human
    let first = a_to_b(&net, "ping 1").await;
    let mut rid = remote(&first).request_id.clone();
    let mut chain = None;
    // each next hop is sent by the session the last one landed in, in the turn that message opened
    for hop in 2..=5u32 {
        let (from, me, to, body) = if hop % 2 == 0 {
            (1, B, A, format!("pong {hop}"))
        } else {
            (0, A, B, format!("ping {hop}"))
        };
        let mut req = net.homes[from].call(me, "send_session_message", send_msg(to, &body));
        req.caller.as_mut().unwrap().turn = Some(vec![crate::request::TurnMessage {
            kind: Some("user".into()),
            rpc_id: Some(rid.clone()),
            text: Some(format!("From {to} ：\nx")),
            ..Default::default()
        }]);
        let r = run_result(req, &net.at(from)).await;
        if hop <= 4 {
            let rc = remote(&r);
            assert_eq!(rc.hop, hop);
            rid = rc.request_id.clone();
            let line = net.homes[from].lines().into_iter().last().unwrap();
            assert_eq!(line.hop, Some(hop));
            chain.get_or_insert(line.chain.clone());
            assert_eq!(Some(line.chain), chain, "one chain across both machines");
        } else {
            // past maxRelayHops (4): refused by the sender's own loop guard, nothing crosses
            assert_eq!(r.code(), Some(RefusalCode::RelayLimit));
        }
    }
    assert_eq!(net.homes[1].delivered().len(), 2);
    assert_eq!(net.homes[0].delivered().len(), 2);
    assert_eq!(net.sends_arrived(1), 2);
}

#[tokio::test]
async fn a_remote_session_found_by_asking_the_machines_is_remembered_and_read_there_directly() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    let lists = || {
        net.arrived
            .lock()
            .unwrap()
            .iter()
            .filter(|(i, r)| *i == 1 && matches!(r, Request::List { .. }))
            .count()
    };
    let read = || async {
        run_result(
            net.homes[0].call(A, "sessions_read", json!({"session_id": B})),
            &net.at(0),
        )
        .await
    };
    // never listed here: the machines are asked where it is (one listing), then it is read there
    let ToolResult::Read(r) = read().await else {
        panic!()
    };
    assert_eq!(r.window.head.machine, Some(net.machine(0, 1)));
    assert_eq!(lists(), 1);
    // remembered: the next reads go straight to that machine (before, every read asked again)
    for _ in 0..2 {
        let ToolResult::Read(r) = read().await else {
            panic!()
        };
        assert_eq!(r.window.head.machine, Some(net.machine(0, 1)));
    }
    assert_eq!(lists(), 1, "no listing asked again");
    let reads = net
        .arrived
        .lock()
        .unwrap()
        .iter()
        .filter(|(i, r)| *i == 1 && matches!(r, Request::Read { .. }))
        .count();
    assert_eq!(reads, 3);
    // a session nowhere is still this home's refusal (and nothing is remembered for it)
    let r = run_result(
        net.homes[0].call(A, "sessions_read", json!({"session_id": C})),
        &net.at(0),
    )
    .await;
    assert_eq!(r.code(), Some(RefusalCode::NotFound));
    assert_eq!(crossing::seen::machine_of(net.homes[0].path(), C), None);
}

#[test]
fn a_read_answers_json_never_exceeds_the_bound_fit_read_reckons_from_lengths() {
    // the worst escapes: control characters (6 bytes each), quotes and backslashes, non-ASCII, the
    // largest numbers
    let nasty: String = (0u8..32)
        .map(char::from)
        .chain("\"\\é€😀 x".chars())
        .collect();
    let m = WireMessage {
        role: nasty.clone(),
        seq: u64::MAX,
        label: nasty.repeat(3),
        request: Some(nasty.clone()),
        injected: true,
        replaced: true,
        error: true,
        body: nasty.repeat(50),
    };
    assert!(serde_json::to_vec(&m).unwrap().len() < json_bound_message(&m));
    let plain = WireMessage {
        request: None,
        body: String::new(),
        label: String::new(),
        role: String::new(),
        ..m.clone()
    };
    assert!(serde_json::to_vec(&plain).unwrap().len() < json_bound_message(&plain));
    let h = WireHead {
        id: nasty.clone(),
        live: true,
        subagent: true,
        parent: Some(nasty.clone()),
        cwd: Some(nasty.clone()),
        title: Some(nasty.clone()),
        readable: u64::MAX,
        captured_through: Some(u64::MAX),
        since: Some(u64::MAX),
    };
    assert!(serde_json::to_vec(&h).unwrap().len() <= json_bound_head(&h));
    // a window under the bound by its lengths is kept whole; one whose worst case is over the bound but
    // whose real bytes are not is measured, and kept whole too
    let answer = |body: &str, n: u64| ReadAnswer {
        head: WireHead {
            id: B.into(),
            parent: None,
            cwd: None,
            title: None,
            ..h.clone()
        },
        messages: (1..=n)
            .rev()
            .map(|seq| WireMessage {
                seq,
                body: body.into(),
                ..plain.clone()
            })
            .collect(),
        omitted: 0,
        hidden_injected: 0,
        hidden_system: 0,
        notes: vec![],
    };
    for (body, n) in [("x".repeat(1000), 100), ("x".repeat(60_000), 40)] {
        let Response::Read(fit) = fit_read(Response::Read(answer(&body, n))) else {
            panic!()
        };
        assert_eq!((fit.messages.len() as u64, fit.omitted), (n, 0));
        assert!(wire::encode(&Response::Read(fit)).len() <= wire::MAX_RESPONSE_BYTES);
    }
}

/// Session `id` of home `h` with user messages `texts` (seq 0 a turn start, then one per text).
fn with_messages(h: &Home, id: &str, texts: &[&str]) -> std::path::PathBuf {
    h.cold(id, "Builder");
    let log = h
        .path()
        .join("sessions")
        .join("-w")
        .join(id)
        .join("session.jsonl");
    let mut text = std::fs::read_to_string(&log).unwrap();
    text.push_str(&format!(
        "{}\n",
        json!({"type":"turn/start","seq":0,"time":1,"data":{"turn":1}})
    ));
    for (i, t) in texts.iter().enumerate() {
        append_message(&mut text, i as u64 + 1, t);
    }
    std::fs::write(&log, text).unwrap();
    log
}

fn append_message(text: &mut String, seq: u64, body: &str) {
    let msg = json!({"id": format!("m{seq}"),"role":"user","content":[{"type":"text","text":body}],"source":{"kind":"user"}});
    text.push_str(&format!(
        "{}\n",
        json!({"type":"user/message","seq":seq,"time":2,"data":msg,"surfaceOp":"append"})
    ));
}

fn read_answer(v: Value) -> ReadAnswer {
    match wire::response_from_value(v).unwrap() {
        Response::Read(a) => a,
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_read_started_beside_the_hosts_answer_is_kept_only_for_a_session_not_live_there() {
    let net = Net::new(2).await;
    let h = &net.homes[1];
    let log = with_messages(h, B, &["one 0123456789abcdef"]);
    let from = net.machine(1, 0);
    let frame = || {
        wire::encode_value(&Request::Read {
            args: json!({"session_id": B}),
        })
    };
    let plain = read_answer(serve_value(&h.here(), &from, frame()).await);
    assert_eq!(plain.messages[0].body, "one 0123456789abcdef");

    // not live here: the early read's answer, the same as one run after the host's answer
    let v = serve_value_at(h.path(), &from, frame(), Some(h.here()), async {
        Some(h.here())
    })
    .await;
    assert_eq!(read_answer(v.unwrap()), plain);

    // live here: the host flushes its newest turn before it answers (the log gets message "two"),
    // and the read is the one after the flush, not the early one
    let flushed = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut text = std::fs::read_to_string(&log).unwrap();
        append_message(&mut text, 2, "two");
        std::fs::write(&log, text).unwrap();
        let mut here = h.here();
        here.live = vec![crate::request::LiveSession {
            id: B.into(),
            status: "idle".into(),
            ..Default::default()
        }];
        here.live_seq = Some(3);
        here.live_flushed = Some(true);
        Some(here)
    };
    let a = read_answer(
        serve_value_at(h.path(), &from, frame(), Some(h.here()), flushed)
            .await
            .unwrap(),
    );
    assert!(a.head.live);
    assert_eq!(a.messages[0].body, "two", "{a:?}");

    // live at the last request, not now: no early read, the one after the host's answer
    let mut was_live = h.here();
    was_live.live = vec![crate::request::LiveSession {
        id: B.into(),
        ..Default::default()
    }];
    let v = serve_value_at(h.path(), &from, frame(), Some(was_live), async {
        Some(h.here())
    })
    .await;
    let a = read_answer(v.unwrap());
    assert!(!a.head.live && a.messages[0].body == "two", "{a:?}");

    // another configuration than the last one's: read again with the host's (its bodies cut at 8)
    let mut cut = h.here();
    cut.config.max_message_chars = 8;
    let a = read_answer(
        serve_value_at(h.path(), &from, frame(), Some(h.here()), async {
            Some(cut)
        })
        .await
        .unwrap(),
    );
    assert!(
        !a.messages.iter().any(|m| m.body.contains("abcdef")),
        "{a:?}"
    );

    // the host does not answer: no answer at all (the binding refuses it `unavailable`)
    assert!(
        serve_value_at(h.path(), &from, frame(), Some(h.here()), async { None })
            .await
            .is_none()
    );
    // a request that is not a read waits for the host's answer, as ever
    let list = wire::encode_value(&Request::List { args: json!({}) });
    let v = serve_value_at(h.path(), &from, list, Some(h.here()), async {
        Some(h.here())
    })
    .await
    .unwrap();
    assert!(
        matches!(wire::response_from_value(v).unwrap(), Response::List(l) if l.rows[0].id == B)
    );
}

/// What the binding asks its host for, read from the frame the core then decodes: a send its target and
/// sender (a local send's facts), a read its session, anything else every live session.
#[test]
fn the_host_is_asked_for_what_the_arriving_request_needs() {
    let send = send_frame("dsh-session-mail:00000000-0000-4000-8000-0000000000f2", "x");
    let ask = Ask::of(&send);
    assert_eq!(
        (
            ask.send.as_deref(),
            ask.sender.as_deref(),
            ask.read.as_deref()
        ),
        (Some(B), Some(A), None)
    );
    assert!(ask.is_send());
    assert_eq!(
        serde_json::from_str::<Value>(&ask.to_json()).unwrap(),
        json!({"send": B, "sender": A})
    );
    let read = wire::encode_value(&Request::Read {
        args: json!({"session_id": B}),
    });
    assert_eq!(
        Ask::of(&read),
        Ask {
            read: Some(B.into()),
            ..Ask::default()
        }
    );
    // a listing, a verify, and frames that do not decode (no target, not a string): every live session
    let list = wire::encode_value(&Request::List { args: json!({}) });
    let verify = wire::encode_value(&Request::Verify {
        request_id: "dsh-session-mail:x".into(),
    });
    for v in [
        list,
        verify,
        json!({"v": 1, "body": {"op": "send", "sender": A}}),
        json!({"v": 1, "body": {"op": "send", "target": 7}}),
        json!({"v": 1}),
        json!(null),
    ] {
        assert_eq!(Ask::of(&v), Ask::default(), "{v}");
        assert_eq!(Ask::of(&v).to_json(), "{}");
    }
}

/// The binding begins a call from the napi entry (`begin`) and awaits it in napi's future
/// (`Begun::result`): a send's place lookup and checks are on the blocking pool from `begin`, before
/// that future is first polled — one hand-over less on a remote send's path (branch aplace's timing
/// marks). Seen here by what the lookup does on the way: it reads this home's presence and removes a
/// dead process's record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sends_place_lookup_runs_from_begin_before_its_future_is_polled() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[1].cold(B, "Builder");
    list_from_0(&net).await;
    // a process that has ended: its presence record can never be true again
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let folder = crate::presence::dir(net.homes[0].path());
    std::fs::create_dir_all(&folder).unwrap();
    let record = folder.join(format!("{dead}.json"));
    std::fs::write(&record, "{}").unwrap();
    let mut req = net.homes[0].call(A, "send_session_message", send_msg(B, "early"));
    // presence read from the home, as the shim's requests have it
    req.peers = None;
    let link = net.at(0);
    let begun = begin(req, &link);
    let waited = std::time::Instant::now();
    while record.exists() && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(
        !record.exists(),
        "the lookup ran before the future was polled"
    );
    assert_eq!(
        net.sends_arrived(1),
        0,
        "nothing sent before the future runs"
    );
    let r = begun.result(&link).await;
    let rc = remote(&r);
    assert_eq!(
        (rc.machine.clone(), rc.target.as_str()),
        (net.machine(0, 1), B)
    );
    assert_eq!(net.sends_arrived(1), 1);
    let texts: Vec<String> = net.homes[1]
        .delivered()
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts.len(), 1);
    assert!(texts[0].contains("early"));
    // a session live in this process: nothing looked up from `begin` (this home's send, as locally)
    let mut req = net.homes[0].call(A, "send_session_message", send_msg(B, "x"));
    req.live = vec![crate::request::LiveSession {
        id: B.into(),
        ..Default::default()
    }];
    assert!(matches!(begin(req, &link).call, super::Call::Here(_)));
}

/// A send to a session live in this process, in a home with linked machines, starts this home's checks
/// from `begin` too (as an unlinked home's send does, `tools::begin`): they run before the call's future
/// is polled, once, and the send is this home's.
#[tokio::test]
async fn a_linked_homes_send_to_a_session_live_here_starts_its_checks_from_begin() {
    let net = Net::new(2).await;
    net.homes[0].cold(A, "Planner");
    net.homes[0].cold(C, "Reviewer");
    let h0 = net.homes[0].path().to_path_buf();
    let mut req = net.homes[0].call(A, "send_session_message", send_msg(C, "live here"));
    req.live = vec![crate::request::LiveSession {
        id: C.into(),
        status: "idle".into(),
        ..Default::default()
    }];
    let link = net.at(0);
    let before = send::tests::checks_run(&h0);
    let begun = begin(req, &link);
    let waited = std::time::Instant::now();
    while send::tests::checks_run(&h0) == before && waited.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        send::tests::checks_run(&h0) - before,
        1,
        "the checks ran before the future was polled"
    );
    let r = begun.result(&link).await;
    assert!(
        matches!(&r, ToolResult::Send(s) if s.request_id().is_some()),
        "{r:?}"
    );
    assert_eq!(send::tests::checks_run(&h0) - before, 1);
    assert_eq!(
        net.sends_arrived(1),
        0,
        "this home's send, not a remote one"
    );
}

/// Send `rid` from machine `from` into `home` with facts `kept` from the previous send, the host answering
/// `now` once the send's checks have begun (they must begin before it answers: not within 10 s fails
/// the test) and had time to make their plan: the answer, and how many times the checks ran for it.
async fn served_with_kept(
    home: &std::path::Path,
    from: &Machine,
    rid: &str,
    kept: ToolRequest,
    now: ToolRequest,
) -> (SendAnswer, usize) {
    let before = send::tests::checks_run(home);
    let h = home.to_path_buf();
    let asked = async move {
        let t0 = std::time::Instant::now();
        while send::tests::checks_run(&h) <= before {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the send's checks waited for the host's facts"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // (their plan made, not only begun)
        tokio::time::sleep(Duration::from_millis(50)).await;
        Some(now)
    };
    let frame = send_frame(rid, "kept facts");
    let v = serve_value_at(home, from, frame, Some(kept), asked).await;
    let a = match wire::response_from_value(v.expect("served")).unwrap() {
        Response::Send(a) => a,
        other => panic!("{other:?}"),
    };
    (a, send::tests::checks_run(home) - before)
}

/// B live in this process, idle, with `header`.
fn live_b(here: &mut ToolRequest, header: Value) {
    here.live = vec![crate::request::LiveSession {
        id: B.into(),
        status: "idle".into(),
        header,
        ..Default::default()
    }];
}

/// An arriving send's checks begin at arrival with the facts the host gave for the previous send (the
/// binding keeps them), beside the question to the host: when the host's answer is the same, that plan
/// is delivered and the checks never run a second time.
#[tokio::test]
async fn an_arriving_sends_checks_begin_with_the_last_facts_and_are_kept_when_the_host_says_the_same(
) {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path().to_path_buf();
    let rid = "dsh-session-mail:00000000-0000-4000-8000-0000000000d1";
    let (a, runs) = served_with_kept(&h1, &from, rid, here.clone(), here).await;
    assert!(
        matches!(a.landing, Landing::Accepted { .. }) && !a.repeated,
        "{a:?}"
    );
    assert_eq!(
        runs, 1,
        "the checks ran again although the host's facts were the kept ones"
    );
    let ids: Vec<String> = net.homes[1]
        .delivered()
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(ids.iter().filter(|r| *r == rid).count(), 1, "{ids:?}");
}

/// The facts kept from a send to another live session can never be the host's answer for this one
/// (they name a session it does not ask about): no early plan is begun from them, the checks run once,
/// with the host's answer.
#[tokio::test]
async fn no_early_plan_is_begun_from_facts_kept_for_a_send_to_another_session() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let (here, from) = (net.homes[1].here(), net.machine(1, 0));
    let h1 = net.homes[1].path().to_path_buf();
    let mut kept = here.clone();
    kept.live = vec![crate::request::LiveSession {
        id: C.into(),
        status: "idle".into(),
        ..Default::default()
    }];
    let before = send::tests::checks_run(&h1);
    let rid = "dsh-session-mail:00000000-0000-4000-8000-0000000000d7";
    let v = serve_value_at(
        &h1,
        &from,
        send_frame(rid, "elsewhere before"),
        Some(kept),
        async {
            // (time for an early plan to have begun, were one begun)
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some(here)
        },
    )
    .await;
    let a = match wire::response_from_value(v.expect("served")).unwrap() {
        Response::Send(a) => a,
        other => panic!("{other:?}"),
    };
    assert!(matches!(a.landing, Landing::Accepted { .. }), "{a:?}");
    assert_eq!(send::tests::checks_run(&h1) - before, 1);
}

/// An early plan is dropped when the host's answer differs from the facts it was made with, and the
/// answer's verdict wins: the target's live entry (live → not live, not live → live, its header), the
/// configuration, the host's web server and home. Each time the checks run again.
#[tokio::test]
async fn an_early_plan_made_from_other_facts_than_the_hosts_answer_is_dropped_and_the_answer_decides(
) {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let from = net.machine(1, 0);
    let h1 = net.homes[1].path().to_path_buf();
    let mut no_resume = net.homes[1].here();
    no_resume.config.allow_resume = false;
    let mut live = no_resume.clone();
    live_b(&mut live, json!({"type": "session", "id": B, "cwd": "/w"}));
    let mut subagent = no_resume.clone();
    live_b(
        &mut subagent,
        json!({"type": "session", "id": B, "cwd": "/w", "origin": "subagent", "parentSession": C}),
    );
    let mut short = live.clone();
    short.config.max_send_chars = 3;
    let mut dead_url = live.clone();
    dead_url.host.base_url = Some("http://127.0.0.1:9".into());
    let other = tempfile::tempdir().unwrap();
    let mut other_home = live.clone();
    other_home.host.dsh_home = Some(other.path().to_string_lossy().into_owned());
    // (kept, the host's answer, what must come of it)
    let cases: Vec<(ToolRequest, ToolRequest, Option<RefusalCode>)> = vec![
        // live when kept, cold now with allowResume off: never delivered
        (
            live.clone(),
            no_resume.clone(),
            Some(RefusalCode::ResumeDisabled),
        ),
        // cold when kept (refused then), live now: delivered
        (no_resume.clone(), live.clone(), None),
        // the live header now says subagent: not messageable
        (live.clone(), subagent, Some(RefusalCode::NotMessageable)),
        // the configuration now allows 3 characters
        (live.clone(), short, Some(RefusalCode::TooLong)),
        // another web server when kept: delivered through the host's own
        (dead_url, live.clone(), None),
        // another home when kept: planned again in this one
        (other_home, live.clone(), None),
    ];
    for (i, (kept, now, verdict)) in cases.into_iter().enumerate() {
        let rid = format!("dsh-session-mail:00000000-0000-4000-8000-0000000000c{i}");
        let (a, runs) = served_with_kept(&h1, &from, &rid, kept, now).await;
        let landed = net.homes[1]
            .delivered()
            .iter()
            .filter(|(r, _)| *r == rid)
            .count();
        match verdict {
            Some(code) => {
                assert!(
                    matches!(&a.landing, Landing::Refused(w) if w.code == code),
                    "case {i}: {a:?}"
                );
                assert_eq!(landed, 0, "case {i}");
            }
            None => {
                assert!(
                    matches!(a.landing, Landing::Accepted { .. }),
                    "case {i}: {a:?}"
                );
                assert_eq!(landed, 1, "case {i}");
            }
        }
        assert_eq!(
            runs, 2,
            "case {i}: the early plan was not dropped and made again"
        );
    }
}

/// A dropped early plan holds no budget slot: with a pair budget of 3, three sends whose kept facts
/// differ from the host's all land (each one's early plan reserved a slot, then was dropped), and the
/// fourth is refused by the budget.
#[tokio::test]
async fn a_dropped_early_plan_leaves_no_budget_slot_behind() {
    let net = Net::new(2).await;
    net.homes[1].cold(B, "Builder");
    let from = net.machine(1, 0);
    let h1 = net.homes[1].path().to_path_buf();
    let mut here = net.homes[1].here();
    here.config.budget_per_pair = 3;
    here.config.budget_window_secs = 600;
    let mut kept = here.clone();
    kept.host.profile = Some("desktop".into());
    for i in 0..4 {
        let rid = format!("dsh-session-mail:00000000-0000-4000-8000-0000000000b{i}");
        let (a, runs) = served_with_kept(&h1, &from, &rid, kept.clone(), here.clone()).await;
        if i < 3 {
            assert!(
                matches!(a.landing, Landing::Accepted { .. }),
                "send {i}: {a:?}"
            );
        } else {
            assert!(
                matches!(&a.landing, Landing::Refused(w) if w.code == RefusalCode::Budget),
                "send {i}: {a:?}"
            );
        }
        assert_eq!(runs, 2, "send {i}");
    }
}
