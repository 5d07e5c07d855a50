//! Two homes on two "machines": network namespaces this test makes (`ip netns`, veth), joined through a
//! third that routes between them, runs a delaying forwarder and iroh's own relay server. Every namespace
//! has a default route that leads nowhere, and its packet counter must stay 0: nothing in these cases
//! leaves for anywhere but the test's own addresses.
//!
//! ```text
//!   a (home A)                    r (router, forwarder, relay)                   b (home B)
//!   va 10.77.1.1/24 ── veth ── ra 10.77.1.254  rb 10.77.2.254 ── veth ── vb 10.77.2.1/24
//!                                 lo 10.77.3.1 (the relay)
//!   each: dz 10.213.77.1/24, default via 10.213.77.2 (a veth whose far end is its own, unaddressed)
//! ```
//!
//! The kernel here has no `sch_netem` (`CONFIG_NET_SCH_NETEM is not set`), so latency is made the way a
//! link's delay is seen: a UDP forwarder in `r` holds each datagram for half the round trip each way, and the
//! direct path is blocked (blackhole routes) so the homes reach each other only through it. A partition is
//! the link going down (`ip link set ra down`) in the middle of a conversation. Skipped where `ip netns` is
//! not permitted.
//!
//! Each endpoint's sockets are made on a runtime whose threads entered its namespace (`setns`): a socket
//! stays in the namespace it was made in, so one test process drives all three.

mod common;

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{addr_of, bare_endpoint, code, link};
use dsh_session_mail_link::node::{Handler, Node, NodeConfig};
use dsh_session_mail_link::wire::{self, close};
use dsh_session_mail_link::{store, CallError, Relay};
use serde_json::{json, Value};

/// Run a command line (words split on spaces).
fn sh(line: &str) -> Result<String, String> {
    let args: Vec<&str> = line.split(' ').collect();
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!(
            "{line}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&o.stdout).to_string())
}

/// The three namespaces; removed when dropped.
struct Net {
    a: String,
    b: String,
    r: String,
}

impl Drop for Net {
    fn drop(&mut self) {
        for n in [&self.a, &self.b, &self.r] {
            let _ = sh(&format!("ip netns del {n}"));
        }
    }
}

const A_IP: &str = "10.77.1.1";
const B_IP: &str = "10.77.2.1";
const R_A: &str = "10.77.1.254";
const R_B: &str = "10.77.2.254";
const RELAY_IP: &str = "10.77.3.1";

impl Net {
    /// `None` (the test is skipped) where namespaces cannot be made.
    fn make(tag: &str) -> Option<Net> {
        let p = std::process::id();
        let net = Net {
            a: format!("dshm-{tag}-{p}-a"),
            b: format!("dshm-{tag}-{p}-b"),
            r: format!("dshm-{tag}-{p}-r"),
        };
        for n in [&net.a, &net.b, &net.r] {
            if let Err(e) = sh(&format!("ip netns add {n}")) {
                eprintln!("skipped: `ip netns add` is not permitted here: {e}");
                return None;
            }
        }
        let (a, b, r) = (net.a.as_str(), net.b.as_str(), net.r.as_str());
        let mut cmds: Vec<String> = vec![];
        for n in [a, b, r] {
            cmds.extend([
                format!("ip netns exec {n} sysctl -qw net.ipv6.conf.all.disable_ipv6=1"),
                format!("ip netns exec {n} sysctl -qw net.ipv6.conf.default.disable_ipv6=1"),
                format!("ip -n {n} link set lo up"),
                format!("ip -n {n} link add dz type veth peer name dz2"),
                format!("ip -n {n} addr add 10.213.77.1/24 dev dz"),
                format!("ip -n {n} link set dz up"),
                format!("ip -n {n} link set dz2 up"),
                format!("ip -n {n} route add default via 10.213.77.2 dev dz"),
                // the test's own addresses never fall to the default route, not even while a link is
                // down (its connected route gone): unreachable, answered here
                format!("ip -n {n} route add unreachable 10.77.0.0/16 metric 1000"),
            ]);
        }
        cmds.extend([
            format!("ip -n {a} link add va type veth peer name ra netns {r}"),
            format!("ip -n {b} link add vb type veth peer name rb netns {r}"),
            format!("ip -n {a} addr add {A_IP}/24 dev va"),
            format!("ip -n {b} addr add {B_IP}/24 dev vb"),
            format!("ip -n {r} addr add {R_A}/24 dev ra"),
            format!("ip -n {r} addr add {R_B}/24 dev rb"),
            format!("ip -n {r} addr add {RELAY_IP}/32 dev lo"),
            format!("ip -n {a} link set va up"),
            format!("ip -n {b} link set vb up"),
            format!("ip -n {r} link set ra up"),
            format!("ip -n {r} link set rb up"),
            format!("ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1"),
            format!("ip -n {a} route add 10.77.2.0/24 via {R_A}"),
            format!("ip -n {a} route add {RELAY_IP}/32 via {R_A}"),
            format!("ip -n {b} route add 10.77.1.0/24 via {R_B}"),
            format!("ip -n {b} route add {RELAY_IP}/32 via {R_B}"),
        ]);
        for c in &cmds {
            if let Err(e) = sh(c) {
                eprintln!("skipped: {e}");
                return None;
            }
        }
        Some(net)
    }

    /// Packets sent by each namespace's default route (a, b, r).
    fn default_route_packets(&self) -> [u64; 3] {
        [&self.a, &self.b, &self.r].map(|n| {
            sh(&format!(
                "ip netns exec {n} cat /sys/class/net/dz/statistics/tx_packets"
            ))
            .ok()
            .and_then(|v| v.trim().parse().ok())
            .expect("the counter of the default route")
        })
    }

    /// Block the direct path between the homes (each side's route to the other's subnet is a blackhole);
    /// `r` stays reachable from both.
    fn block_direct(&self) {
        let (a, b) = (&self.a, &self.b);
        sh(&format!("ip -n {a} route replace blackhole 10.77.2.0/24")).unwrap();
        sh(&format!("ip -n {b} route replace blackhole 10.77.1.0/24")).unwrap();
    }
}

/// A tokio runtime whose threads live in a namespace: the sockets made on it are that namespace's.
struct Place {
    rt: Option<tokio::runtime::Runtime>,
}

impl Place {
    fn enter(ns: &str) -> Place {
        let path = format!("/var/run/netns/{ns}");
        let rt = std::thread::spawn(move || {
            let f = std::fs::File::open(&path).expect("the namespace's file");
            // SAFETY: setns on this thread only, with an fd we hold open.
            let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
            // the runtime's threads are started from this one, so they are in the namespace too
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap()
        })
        .join()
        .unwrap();
        Place { rt: Some(rt) }
    }

    /// Run `f` on this place's runtime.
    async fn run<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.rt.as_ref().unwrap().spawn(f).await.unwrap()
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            // dropped from the test's own runtime: shut down from a thread of its own
            let _ = std::thread::spawn(move || rt.shutdown_timeout(Duration::from_secs(2))).join();
        }
    }
}

fn cfg(ip: &str) -> NodeConfig {
    NodeConfig {
        bind: Some(format!("{ip}:0").parse().unwrap()),
        request_deadline: Duration::from_secs(3),
        frame_deadline: Duration::from_millis(800),
        connect_deadline: Duration::from_secs(3),
        max_conns: 8,
        max_streams: 4,
        ..NodeConfig::default()
    }
}

/// A handler that records the `seq` of every request it runs, and echoes the body.
fn recording() -> (Handler, Arc<Mutex<Vec<u64>>>) {
    let seen = Arc::new(Mutex::new(vec![]));
    let s2 = seen.clone();
    let h: Handler = Arc::new(move |_, body: Value| {
        if let Some(n) = body["seq"].as_u64() {
            s2.lock().unwrap().push(n);
        }
        Box::pin(async move {
            // `{"cut": "<router ns>"}`: the link goes down after the request ran here and before its
            // answer leaves, and comes back 2 s later
            if let Some(r) = body["cut"].as_str() {
                sh(&format!("ip -n {r} link set ra down")).unwrap();
                let r = r.to_string();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(2));
                    let _ = sh(&format!("ip -n {r} link set ra up"));
                });
            }
            Ok(body)
        })
    });
    (h, seen)
}

/// Two homes, A in `a` and B in `b`, each with its endpoint bound on its veth's address.
struct Homes {
    pa: Place,
    pb: Place,
    ha: tempfile::TempDir,
    hb: tempfile::TempDir,
    a: Node,
    b: Node,
    seen_a: Arc<Mutex<Vec<u64>>>,
}

/// The two homes, linked (B used A's invite) unless `link` is false.
async fn homes(net: &Net, relay: Relay, link: bool) -> Homes {
    homes_with(net, relay, link, cfg).await
}

/// [`homes`], each node with `cfg(its address)`.
async fn homes_with(net: &Net, relay: Relay, link: bool, cfg: fn(&str) -> NodeConfig) -> Homes {
    let (pa, pb) = (Place::enter(&net.a), Place::enter(&net.b));
    let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (h, seen_a) = recording();
    let pa_home = ha.path().to_path_buf();
    let a = pa
        .run(async move { Node::start(&pa_home, cfg(A_IP), h).await })
        .await
        .unwrap();
    let pb_home = hb.path().to_path_buf();
    let b = pb
        .run(async move { Node::start(&pb_home, cfg(B_IP), recording().0).await })
        .await
        .unwrap();
    let h = Homes {
        pa,
        pb,
        ha,
        hb,
        a,
        b,
        seen_a,
    };
    if link {
        h.link(relay, None).await;
    }
    h
}

impl Homes {
    /// B uses A's invite (its addresses replaced by `invite_addrs`, when given: the forwarder's face).
    async fn link(&self, relay: Relay, invite_addrs: Option<Vec<SocketAddr>>) {
        let a = self.a.clone();
        let mut inv = self
            .pa
            .run(async move { a.invite(relay, Duration::from_secs(60)).await })
            .await
            .unwrap();
        if let Some(x) = invite_addrs {
            inv.addrs = x;
        }
        let b = self.b.clone();
        let l = self
            .pb
            .run(async move { b.accept_invite(&inv.encode(), "alpha", "beta").await })
            .await
            .unwrap();
        assert_eq!(l.id, self.a.id());
    }

    /// B calls A with `seq`.
    async fn b_calls(&self, seq: u64) -> Result<Value, CallError> {
        let (b, a) = (self.b.clone(), self.a.id());
        self.pb
            .run(async move { b.call(&a, json!({ "seq": seq })).await })
            .await
    }
    /// B calls A with each `seq` of `seqs` in turn, each echoed, waiting out errors while the link comes
    /// back (at most 20 s).
    async fn b_calls_until_back(&self, seqs: std::ops::RangeInclusive<u64>) {
        let t = Instant::now();
        for seq in seqs {
            loop {
                match self.b_calls(seq).await {
                    Ok(v) => {
                        assert_eq!(v, json!({ "seq": seq }));
                        break;
                    }
                    Err(e) if t.elapsed() < Duration::from_secs(20) => {
                        eprintln!("while the link comes back: {e}");
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                    Err(e) => panic!("the link did not come back: {e}"),
                }
            }
        }
    }
    /// [`Homes::close`], then: no packet left a namespace by its default route since `before`.
    async fn close_and_check(self, net: &Net, before: [u64; 3]) {
        self.close().await;
        assert_eq!(
            net.default_route_packets(),
            before,
            "packets left by a default route"
        );
    }
    async fn close(self) {
        let (a, b) = (self.a.clone(), self.b.clone());
        self.pa.run(async move { a.close().await }).await;
        self.pb.run(async move { b.close().await }).await;
    }
}

/// Forwards UDP between `a` and `b` through two sockets in `r`, holding every datagram `delay_us`
/// microseconds each way (changeable while it runs): A sees B at the first socket's address, B sees A at
/// the second's.
async fn delaying_forwarder(
    place: &Place,
    a_real: SocketAddr,
    b_real: SocketAddr,
    delay_us: Arc<std::sync::atomic::AtomicU64>,
) -> (SocketAddr, SocketAddr) {
    place
        .run(async move {
            let sa = Arc::new(tokio::net::UdpSocket::bind((R_A, 0)).await.unwrap());
            let sb = Arc::new(tokio::net::UdpSocket::bind((R_B, 0)).await.unwrap());
            let faces = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
            for (from, to, dst) in [(sa.clone(), sb.clone(), b_real), (sb, sa, a_real)] {
                let delay_us = delay_us.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 65536];
                    loop {
                        let Ok((n, _)) = from.recv_from(&mut buf).await else {
                            return;
                        };
                        let d = buf[..n].to_vec();
                        let to = to.clone();
                        let delay = delay_us.load(std::sync::atomic::Ordering::Relaxed);
                        if delay == 0 {
                            let _ = to.send_to(&d, dst).await;
                            continue;
                        }
                        let at = tokio::time::Instant::now() + Duration::from_micros(delay);
                        tokio::spawn(async move {
                            tokio::time::sleep_until(at).await;
                            let _ = to.send_to(&d, dst).await;
                        });
                    }
                });
            }
            faces
        })
        .await
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_across_a_20_ms_path_works_both_ways_and_a_round_trip_costs_the_path() {
    let Some(net) = Net::make("lat") else { return };
    let delay_us = Arc::new(std::sync::atomic::AtomicU64::new(10_000));
    let before = net.default_route_packets();
    net.block_direct();
    let pr = Place::enter(&net.r);
    // A and B are bound first (their real addresses are the forwarder's destinations), then linked through it
    let h = homes(&net, Relay::None, false).await;
    let (a_face_of_b, b_face_of_a) =
        delaying_forwarder(&pr, h.a.addrs()[0], h.b.addrs()[0], delay_us.clone()).await;
    h.link(Relay::None, Some(vec![b_face_of_a])).await;
    // A knows B by the forwarder's address too (B's own is unreachable from A)
    let b_id = h.b.id();
    store::update(h.ha.path(), h.a.secret_key(), 0, |d| {
        d.links.iter_mut().find(|l| l.id == b_id).unwrap().addrs = vec![a_face_of_b];
        Ok(())
    })
    .unwrap();
    // B → A and A → B, and a 1 MiB body: whole, through the delay
    assert_eq!(h.b_calls(1).await.unwrap(), json!({"seq": 1}));
    let (a, bid) = (h.a.clone(), h.b.id());
    let big = "y".repeat(1 << 20);
    let r =
        h.pa.run(async move { a.call(&bid, json!({ "big": big })).await })
            .await
            .unwrap();
    assert_eq!(r["big"].as_str().map(str::len), Some(1 << 20));
    // the same path with 0 and then 20 ms: a ping and a call of 4 KiB, 30 each (printed: p50 / p99 / max)
    let body = "z".repeat(4096);
    let mut mins = vec![];
    for us in [0u64, 10_000] {
        delay_us.store(us, std::sync::atomic::Ordering::Relaxed);
        let (mut ping, mut call) = (vec![], vec![]);
        for seq in 0..30u64 {
            let (b, aid) = (h.b.clone(), h.a.id());
            let d = h.pb.run(async move { b.ping(&aid).await }).await.unwrap();
            ping.push(d.as_secs_f64() * 1000.0);
            let (b, aid, body) = (h.b.clone(), h.a.id(), body.clone());
            let t = Instant::now();
            h.pb.run(async move { b.call(&aid, json!({"seq": 100 + seq, "body": body})).await })
                .await
                .unwrap();
            call.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let row = |v: &mut Vec<f64>| {
            format!(
                "{:.2} / {:.2} / {:.2} ms",
                pct(v, 0.5),
                pct(v, 0.99),
                pct(v, 1.0)
            )
        };
        eprintln!(
            "{} ms path: ping {}; call of 4 KiB {}",
            2 * us / 1000,
            row(&mut ping),
            row(&mut call)
        );
        mins.push(ping[0]);
    }
    // with the delay on, every round trip crossed the forwarder both ways (the only path): ≥ 2 x 10 ms
    assert!(
        mins[1] >= 20.0,
        "a round trip of {:.1} ms did not cross the delay",
        mins[1]
    );
    assert_eq!(h.seen_a.lock().unwrap().len(), 1 + 60);
    h.close().await;
    drop(pr);
    assert_eq!(
        net.default_route_packets(),
        before,
        "packets left by a default route"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_mid_conversation_is_a_clear_error_in_time_and_nothing_lands_twice_when_it_heals(
) {
    let Some(net) = Net::make("part") else { return };
    let before = net.default_route_packets();
    let h = homes(&net, Relay::None, true).await;
    for seq in 1..=5 {
        assert_eq!(h.b_calls(seq).await.unwrap(), json!({ "seq": seq }));
    }
    // the link goes down between the two in the middle of the conversation
    sh(&format!("ip -n {} link set ra down", net.r)).unwrap();
    let t = Instant::now();
    let e = h.b_calls(6).await.unwrap_err();
    let took = t.elapsed();
    // the caller's error says what happened, within the request deadline (3 s) and not long after
    assert!(
        matches!(e, CallError::Timeout | CallError::Unreachable(_)),
        "{e:?}"
    );
    assert!(took < Duration::from_secs(6), "{took:?}");
    eprintln!("partitioned call: {e} after {took:?}");
    // it heals: the conversation goes on (the next call dials afresh)
    sh(&format!("ip -n {} link set ra up", net.r)).unwrap();
    h.b_calls_until_back(7..=10).await;
    // whatever QUIC still held of the partitioned request is not delivered late: give it time to
    tokio::time::sleep(Duration::from_secs(2)).await;
    let seen = h.seen_a.lock().unwrap().clone();
    for seq in 1..=10u64 {
        let n = seen.iter().filter(|&&s| s == seq).count();
        if seq == 6 {
            assert!(n <= 1, "the partitioned request ran {n} times: {seen:?}");
        } else {
            assert_eq!(n, 1, "request {seq} ran {n} times: {seen:?}");
        }
    }
    h.close_and_check(&net, before).await;
}

/// A request A ran whose answer is lost (the link goes down after A's handler ran it and before the answer
/// leaves, and is back 2 s later: both sides' connection idled out after 1 s, the request's deadline is
/// 15 s, so a retry on a fresh connection would reach A): B's call is `Timeout` — it may have run there, the
/// core settles it by asking later — and it is never written again on a fresh connection: A ran it once. Before, `Node::request` tried once more on a fresh connection and A ran it
/// twice. (On loopback iroh finds the direct path beside a test's forwarder now and then: here there is none.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_run_whose_answer_is_lost_is_timeout_and_never_written_again() {
    let Some(net) = Net::make("lost") else { return };
    let before = net.default_route_packets();
    fn idling_fast(ip: &str) -> NodeConfig {
        NodeConfig {
            request_deadline: Duration::from_secs(15),
            keep_alive: Duration::from_millis(250),
            idle_timeout: Duration::from_secs(1),
            ..cfg(ip)
        }
    }
    let h = homes_with(&net, Relay::None, true, idling_fast).await;
    assert_eq!(h.b_calls(1).await.unwrap(), json!({ "seq": 1 }));
    let (b, a, r) = (h.b.clone(), h.a.id(), net.r.clone());
    let t = Instant::now();
    let lost =
        h.pb.run(async move { b.call(&a, json!({ "seq": 2, "cut": r })).await })
            .await;
    eprintln!(
        "a request run whose answer was lost: {lost:?} after {:?}",
        t.elapsed()
    );
    assert_eq!(lost, Err(CallError::Timeout), "may have arrived");
    h.b_calls_until_back(3..=4).await;
    // anything a late retry would bring
    tokio::time::sleep(Duration::from_secs(1)).await;
    let seen = h.seen_a.lock().unwrap().clone();
    for seq in 1..=4u64 {
        let n = seen.iter().filter(|&&s| s == seq).count();
        assert_eq!(n, 1, "request {seq} ran {n} times: {seen:?}");
    }
    h.close_and_check(&net, before).await;
}

/// The link goes down while the connection idles (a cable pulled: no close reaches either side). B's next
/// call is written to a connection that looks alive and fails `Timeout` when it idles out — within the idle
/// timeout (2.5 s) of A's last packet, not the request deadline (15 s here; before, the 20 s idle timeout
/// or the deadline); the one after finds no connection and fails `Unreachable` after the quick dial (1.5 s).
/// When the link is back the conversation goes on, and neither of the two ever runs on A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_down_mid_idle_costs_a_call_the_idle_timeout_and_nothing_runs_twice_when_it_is_back()
{
    let Some(net) = Net::make("idle") else { return };
    let before = net.default_route_packets();
    let patient = |ip: &str| NodeConfig {
        request_deadline: Duration::from_secs(15),
        ..cfg(ip)
    };
    let h = homes_with(&net, Relay::None, true, patient).await;
    for seq in 1..=3 {
        assert_eq!(h.b_calls(seq).await.unwrap(), json!({ "seq": seq }));
    }
    // idle for a while (keep-alives only), then the link goes down
    tokio::time::sleep(Duration::from_millis(1500)).await;
    sh(&format!("ip -n {} link set ra down", net.r)).unwrap();
    let t = Instant::now();
    let e = h.b_calls(4).await;
    let took = t.elapsed();
    eprintln!("the link down mid-idle: {e:?} after {took:?}");
    assert_eq!(e, Err(CallError::Timeout), "written: it may have arrived");
    assert!(
        took < patient(B_IP).request_deadline / 2,
        "it waited for the request deadline: {took:?}"
    );
    let t = Instant::now();
    let e = h.b_calls(5).await;
    eprintln!("the next call: {e:?} after {:?}", t.elapsed());
    assert!(matches!(e, Err(CallError::Unreachable(_))), "{e:?}");
    sh(&format!("ip -n {} link set ra up", net.r)).unwrap();
    let t = Instant::now();
    h.b_calls_until_back(6..=8).await;
    eprintln!("answered again {:?} after the link was back", t.elapsed());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(*h.seen_a.lock().unwrap(), vec![1, 2, 3, 6, 7, 8]);
    h.close_and_check(&net, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn across_the_veth_a_peer_that_stalls_mid_frame_is_dropped_and_a_flood_from_an_unlinked_one_is_never_read(
) {
    let Some(net) = Net::make("bad") else { return };
    let before = net.default_route_packets();
    let h = homes(&net, Relay::None, true).await;
    let a_addr = addr_of(&h.a);
    let (a_home, a_node) = (h.a.home().to_path_buf(), h.a.clone());
    // a linked peer in b that stalls mid-frame: A drops it within the frame deadline (800 ms)
    let (took, c) =
        h.pb.run({
            let a_addr = a_addr.clone();
            async move {
                let r = bare_endpoint(B_IP).await;
                link(&a_home, &a_node, &r, "staller");
                let c = r.connect(a_addr, wire::ALPN).await.unwrap();
                let (mut s, _rx) = c.open_bi().await.unwrap();
                s.write_all(&100u32.to_be_bytes()).await.unwrap();
                s.write_all(b"{\"kin").await.unwrap();
                let t = Instant::now();
                tokio::time::timeout(Duration::from_secs(6), c.closed())
                    .await
                    .expect("dropped");
                let took = t.elapsed();
                let code = code(&c);
                r.close().await;
                (took, code)
            }
        })
        .await;
    assert_eq!(c, Some(close::PROTOCOL as u64));
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(5),
        "{took:?}"
    );
    // a flood from an endpoint A never linked: 40 connections, each trying to send a request. Every one is
    // refused (403) at the handshake, the handler never runs, and A serves B all along.
    let closes =
        h.pb.run(async move {
            let r = bare_endpoint(B_IP).await;
            let mut tasks = vec![];
            for i in 0..40u64 {
                let (r, a_addr) = (r.clone(), a_addr.clone());
                tasks.push(tokio::spawn(async move {
                    let Ok(Ok(c)) =
                        tokio::time::timeout(Duration::from_secs(5), r.connect(a_addr, wire::ALPN))
                            .await
                    else {
                        return Some(close::NOT_LINKED as u64); // refused before the connection came up
                    };
                    if let Ok((mut s, _rx)) = c.open_bi().await {
                        let _ = wire::write_frame(
                            &mut s,
                            &wire::Request::Call {
                                body: json!({ "seq": 1000 + i }),
                            },
                        )
                        .await;
                    }
                    let _ = tokio::time::timeout(Duration::from_secs(5), c.closed()).await;
                    code(&c)
                }));
            }
            let mut out = vec![];
            for t in tasks {
                out.push(t.await.unwrap());
            }
            r.close().await;
            out
        })
        .await;
    assert!(
        closes.iter().all(|c| *c == Some(close::NOT_LINKED as u64)),
        "{closes:?}"
    );
    assert_eq!(h.b_calls(1).await.unwrap(), json!({"seq": 1}));
    assert_eq!(*h.seen_a.lock().unwrap(), vec![1], "only B's request ran");
    h.close_and_check(&net, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_direct_path_blocked_the_link_works_through_the_tests_own_relay() {
    let Some(net) = Net::make("relay") else {
        return;
    };
    let before = net.default_route_packets();
    net.block_direct();
    // iroh's own relay server, plain HTTP, in r on 10.77.3.1 (reachable from both homes; nothing else is)
    let pr = Place::enter(&net.r);
    let server = pr
        .run(async {
            let mut c = iroh_relay::server::ServerConfig::default();
            c.relay = Some(iroh_relay::server::RelayConfig::new(
                format!("{RELAY_IP}:0").parse::<SocketAddr>().unwrap(),
            ));
            iroh_relay::server::Server::spawn(c).await.unwrap()
        })
        .await;
    let url = format!(
        "http://{}",
        server.http_addr().expect("the relay's address")
    );
    assert!(url.starts_with(&format!("http://{RELAY_IP}:")), "{url}");
    // A's endpoint runs without a relay until the invite names one (added without a restart), B's until
    // it uses the invite
    let h = homes(&net, Relay::parse(&url).unwrap(), true).await;
    let b_link = store::links(h.hb.path(), h.b.secret_key());
    assert_eq!(b_link[0].relay, Relay::Url(url.clone()));
    // the direct addresses are there and blackholed: only the relay carries the link
    assert_eq!(b_link[0].addrs[0].ip().to_string(), A_IP);
    assert_eq!(h.b_calls(1).await.unwrap(), json!({"seq": 1}));
    let (a, bid) = (h.a.clone(), h.b.id());
    let r =
        h.pa.run(async move { a.call(&bid, json!({"to": "b"})).await })
            .await
            .unwrap();
    assert_eq!(r, json!({"to": "b"}));
    for seq in 2..=5 {
        assert_eq!(h.b_calls(seq).await.unwrap(), json!({ "seq": seq }));
    }
    assert_eq!(*h.seen_a.lock().unwrap(), vec![1, 2, 3, 4, 5]);
    h.close().await;
    pr.run(async move { server.shutdown().await })
        .await
        .unwrap();
    assert_eq!(
        net.default_route_packets(),
        before,
        "packets left by a default route"
    );
}
