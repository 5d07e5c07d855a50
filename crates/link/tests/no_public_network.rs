//! No packet leaves the machine (docs/machines.md "Network"): no test of this repository names a public
//! relay or address-lookup service, Iroh's public relay map is named in one function only (the human's
//! explicit choice `public`, `store::Relay::Public`), every test, bench or script that could choose it runs
//! under the guard (`DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1`), which refuses it before anything is bound,
//! Cargo.lock has no port mapper, and two homes linked in a network namespace this test makes send nothing
//! out of its default route — nor does parsing relay choices or refusing the public one there (no lookup).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        if name == "node_modules" || name == "target" || name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            files(&p, out);
        } else if ["rs", "js", "mjs", "cjs", "ts", "sh", "toml", "json", "yml"]
            .iter()
            .any(|x| name.ends_with(&format!(".{x}")))
        {
            out.push(p);
        }
    }
}

#[test]
fn no_test_bench_or_script_names_a_public_relay_or_lookup_and_iroh_has_no_port_mapper() {
    // the needles are split so this file does not name them itself
    let needles = [
        concat!("presets::", "N0"),
        concat!("RelayMode::", "Default"),
        concat!("RelayMode::", "Staging"),
        concat!("iroh", ".link"),
        concat!("n0", ".computer"),
    ];
    let mut all = vec![];
    for d in ["test", "bench", "scripts", "crates", "src", "lib"] {
        files(&repo().join(d), &mut all);
    }
    assert!(
        all.len() > 20,
        "the scan found the repository ({} files)",
        all.len()
    );
    let mut hits = vec![];
    for f in &all {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for n in needles {
            if text.contains(n) {
                hits.push(format!("{}: {n}", f.display()));
            }
        }
    }
    assert!(hits.is_empty(), "public network named: {hits:#?}");

    // Iroh's public relay map: named in one function of the product, the one the guard stands in front of
    let map_needles = [
        concat!("default_relay", "_map"),
        concat!("defaults::", "prod"),
        concat!("defaults::", "staging"),
    ];
    let home_file = repo().join("crates/link/src/store.rs");
    let mut named = vec![];
    for f in &all {
        let Ok(text) = std::fs::read_to_string(f) else {
            continue;
        };
        for n in map_needles {
            for (at, _) in text.match_indices(n) {
                // one entry per line that names it
                let line = text[..at].rfind('\n').map_or(0, |i| i + 1);
                if !named.iter().any(|(g, _, l)| g == f && *l == line) {
                    named.push((f.clone(), n, line));
                }
            }
        }
    }
    let store = std::fs::read_to_string(&home_file).unwrap();
    let start = store
        .find(concat!("fn public_relay", "_urls("))
        .expect("store.rs has the one mapping function");
    let end = start + store[start..].find("\n}\n").unwrap();
    assert_eq!(
        named.len(),
        1,
        "Iroh's public relay map named other than once: {named:#?}"
    );
    let (f, _, at) = &named[0];
    assert!(
        f.ends_with("crates/link/src/store.rs") && (start..end).contains(at),
        "Iroh's public relay map named outside store::public_relay_urls: {named:#?}"
    );
    assert!(
        store[start..end].contains("if forbidden"),
        "the mapping function checks the guard first"
    );

    // a test, bench or script that could choose the public relays names the guard (it sets it)
    let guard = concat!("DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK");
    let guard_const = concat!("NO_PUBLIC_NETWORK", "_VAR");
    let choices = [
        concat!("Relay::", "Public"),
        concat!("parse(\"pub", "lic\")"),
        concat!("--relay pub", "lic"),
        concat!("'--relay', 'pub", "lic'"),
        concat!("\"--relay\", \"pub", "lic\""),
        concat!("relay: 'pub", "lic'"),
        concat!("relay: \"pub", "lic\""),
        concat!("\"relay\":\"pub", "lic\""),
        concat!("\"relay\": \"pub", "lic\""),
        concat!("relay: \"pub", "lic\".into()"),
    ];
    let mut unguarded = vec![];
    for d in [
        "test",
        "bench",
        "scripts",
        "crates/link/tests",
        "crates/core/tests",
    ] {
        let mut fs = vec![];
        files(&repo().join(d), &mut fs);
        for f in fs {
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            if choices.iter().any(|c| text.contains(c))
                && !text.contains(guard)
                && !text.contains(guard_const)
            {
                unguarded.push(f.display().to_string());
            }
        }
    }
    assert!(
        unguarded.is_empty(),
        "these choose Iroh's public relays without the guard: {unguarded:#?}"
    );
    // the runners set the guard for everything they start
    for (file, needle) in [
        (
            "scripts/test.sh",
            concat!("export DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK=1"),
        ),
        (
            "scripts/demo.sh",
            concat!("export DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK=1"),
        ),
        (
            "scripts/demo-machines.mjs",
            concat!("process.env.DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK = '1'"),
        ),
        (
            "bench/machines.mjs",
            concat!("process.env.DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK = '1'"),
        ),
        (
            "test/real-host/harness.mjs",
            concat!("DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK: '1'"),
        ),
        (
            "test/helpers/cli.mjs",
            concat!("DSH_SESSION_MAIL_NO_PUBLIC", "_NETWORK: '1'"),
        ),
        // the CLI tests start it through that helper (test/helpers/cli.mjs)
        ("test/machines-cli.test.mjs", "from './helpers/cli.mjs'"),
        ("test/machines-here.test.mjs", "from './helpers/cli.mjs'"),
    ] {
        let text = std::fs::read_to_string(repo().join(file)).unwrap();
        assert!(
            text.contains(needle),
            "{file} does not set the guard ({needle})"
        );
    }
    let lock = std::fs::read_to_string(repo().join("Cargo.lock")).unwrap();
    assert!(
        !lock.contains(concat!("name = \"port", "mapper\"")),
        "iroh is built with its port mapper"
    );
    assert!(
        lock.contains("name = \"iroh\""),
        "the scan reads the workspace's lock"
    );
}

fn sh(args: &[&str]) -> Result<String, String> {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).to_string());
    }
    Ok(String::from_utf8_lossy(&o.stdout).to_string())
}

fn tx_packets(ns: &str, dev: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/sys/class/net/{dev}/statistics/tx_packets"));
    // /sys shows the caller's namespace: read through the namespace instead
    let _ = s;
    sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "cat",
        &format!("/sys/class/net/{dev}/statistics/tx_packets"),
    ])
    .ok()
    .and_then(|v| v.trim().parse().ok())
    .unwrap_or(u64::MAX)
}

struct Ns(String);
impl Drop for Ns {
    fn drop(&mut self) {
        let _ = sh(&["ip", "netns", "del", &self.0]);
    }
}

/// The namespace: loopback, and one veth whose far end leads nowhere, as the default route. IPv6 is off so
/// the kernel's own router solicitations do not count; ARP for the gateway would (any packet for
/// elsewhere needs it first).
#[test]
fn two_linked_homes_in_a_network_namespace_send_nothing_out_of_its_default_route() {
    let ns = Ns(format!("dshm-link-{}", std::process::id()));
    if sh(&["ip", "netns", "add", &ns.0]).is_err() {
        eprintln!("skipped: `ip netns add` is not permitted here");
        return;
    }
    let n = ns.0.as_str();
    for cmd in [
        vec![
            "ip",
            "netns",
            "exec",
            n,
            "sysctl",
            "-qw",
            "net.ipv6.conf.all.disable_ipv6=1",
        ],
        vec![
            "ip",
            "netns",
            "exec",
            n,
            "sysctl",
            "-qw",
            "net.ipv6.conf.default.disable_ipv6=1",
        ],
        vec!["ip", "-n", n, "link", "set", "lo", "up"],
        vec![
            "ip", "-n", n, "link", "add", "dva", "type", "veth", "peer", "name", "dvb",
        ],
        vec!["ip", "-n", n, "addr", "add", "10.213.77.1/24", "dev", "dva"],
        vec!["ip", "-n", n, "link", "set", "dva", "up"],
        vec!["ip", "-n", n, "link", "set", "dvb", "up"],
        vec![
            "ip",
            "-n",
            n,
            "route",
            "add",
            "default",
            "via",
            "10.213.77.2",
            "dev",
            "dva",
        ],
    ] {
        if let Err(e) = sh(&cmd) {
            eprintln!("skipped: {cmd:?}: {e}");
            return;
        }
    }
    let before = tx_packets(n, "dva");
    assert_ne!(before, u64::MAX);
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("ip")
        .args(["netns", "exec", n])
        .arg(&exe)
        .args([
            "--exact",
            "inside_the_namespace",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("DSHM_LINK_NETNS", "1")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
    std::thread::sleep(Duration::from_millis(300));
    let after = tx_packets(n, "dva");
    assert_eq!(
        after,
        before,
        "packets left by the namespace's default route: {}",
        after - before
    );
}

/// Run only by the test above, inside its namespace: two homes bound on every interface (the product's
/// default), linked, a call each way, a round trip, an unlink.
#[test]
#[ignore]
fn inside_the_namespace() {
    if std::env::var("DSHM_LINK_NETNS").is_err() {
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        use dsh_session_mail_link::node::{Node, NodeConfig};
        use dsh_session_mail_link::Relay;
        let cfg = NodeConfig {
            bind: None,
            ..NodeConfig::default()
        };
        let h: dsh_session_mail_link::Handler =
            std::sync::Arc::new(|_, v| Box::pin(async move { Ok(v) }));
        let (ha, hb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // relay choices are parsed without a lookup of their host (a DNS query would leave by the default
        // route: this machine's resolver is not on loopback), and the public one is refused under the guard
        // before anything is resolved or bound
        for r in [
            "https://relay.example.com",
            "http://dsh-relay.invalid:3340",
            "public",
        ] {
            Relay::parse(r).unwrap();
        }
        std::env::set_var(dsh_session_mail_link::store::NO_PUBLIC_NETWORK_VAR, "1");
        let m = dsh_session_mail_link::Machines::new(
            ha.path(),
            cfg.clone(),
            dsh_session_mail_link::node::refusing_handler(),
        );
        assert!(matches!(
            m.invite(Relay::Public, Duration::from_secs(60)).await,
            Err(dsh_session_mail_link::LinkError::PublicNetworkRefused { .. })
        ));
        let a = Node::start(ha.path(), cfg.clone(), h.clone())
            .await
            .unwrap();
        let b = Node::start(hb.path(), cfg, h).await.unwrap();
        let inv = a
            .invite(Relay::None, Duration::from_secs(60))
            .await
            .unwrap();
        eprintln!("invite addresses: {:?}", inv.addrs);
        b.accept_invite(&inv.encode(), "alpha", "beta")
            .await
            .unwrap();
        assert_eq!(
            b.call(&a.id(), serde_json::json!(1)).await.unwrap(),
            serde_json::json!(1)
        );
        assert_eq!(
            a.call(&b.id(), serde_json::json!(2)).await.unwrap(),
            serde_json::json!(2)
        );
        b.ping(&a.id()).await.unwrap();
        // stay up a while: whatever the endpoints do by themselves (reports, keep-alives) is counted too
        tokio::time::sleep(Duration::from_secs(3)).await;
        b.unlink("alpha").await.unwrap();
        a.close().await;
        b.close().await;
    });
}

/// The guard: with `DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1` (as every test, bench and the demo run), the
/// public choice is refused, typed, before a key is made, an endpoint bound or a name looked up: making an
/// invite with it, using an invite that carries it, and starting the endpoint of a home whose link names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_public_choice_is_refused_under_the_guard_before_anything_is_bound() {
    use dsh_session_mail_link::node::{refusing_handler, Invite, Node, NodeConfig};
    use dsh_session_mail_link::{machine_dir, store, LinkError, MachineId, Machines, Relay};
    std::env::set_var(store::NO_PUBLIC_NETWORK_VAR, "1");
    let refused = LinkError::PublicNetworkRefused {
        var: store::NO_PUBLIC_NETWORK_VAR.into(),
    };
    let cfg = NodeConfig {
        bind: Some("127.0.0.1:0".parse().unwrap()),
        ..NodeConfig::default()
    };
    let h = tempfile::tempdir().unwrap();
    let m = Machines::new(h.path(), cfg.clone(), refusing_handler());
    // make an invite with it
    let e = m
        .invite(Relay::parse("public").unwrap(), Duration::from_secs(60))
        .await
        .unwrap_err();
    assert_eq!(e, refused);
    assert!(e.is_refusal());
    assert!(
        !machine_dir(h.path()).exists(),
        "no key made, nothing bound, no lease"
    );
    // use an invite that carries it (made by hand: a machine without the guard could have made it)
    let inv = Invite {
        id: MachineId::of(&iroh::SecretKey::from_bytes(&[7; 32]).public()),
        addrs: vec!["127.0.0.1:9".parse().unwrap()],
        relay: Relay::Public,
        secret: "07".repeat(32),
        exp: i64::MAX / 2,
    };
    let e = m.accept_invite(&inv.encode(), "alpha").await.unwrap_err();
    assert_eq!(e, refused);
    assert!(!machine_dir(h.path()).exists(), "nothing dialed or bound");
    // a home whose links name it (linked by a process without the guard): its endpoint does not start
    let sk = dsh_session_mail_link::identity::load_or_make(h.path()).unwrap();
    store::update(h.path(), &sk, 0, |d| {
        d.links.push(store::Link {
            id: inv.id.clone(),
            name: "alpha".into(),
            relay: Relay::Public,
            addrs: inv.addrs.clone(),
            linked_at: 1,
        });
        Ok(())
    })
    .unwrap();
    let e = Node::start(h.path(), cfg, refusing_handler())
        .await
        .err()
        .expect("refused");
    assert_eq!(e, refused);
    let e = m.try_hold().await.unwrap_err();
    assert_eq!(e, refused);
    assert!(m.node().await.is_none());
    assert!(!dsh_session_mail_link::holder::socket_path(h.path()).exists());
    // `doctor` says why
    let rows = m.doctor().await;
    let link = rows
        .iter()
        .find(|r| r["name"] == "link alpha")
        .expect("a row for the link");
    assert_eq!(link["status"], "fail");
    assert!(
        link["detail"]
            .as_str()
            .unwrap()
            .contains("Iroh's public relays"),
        "{link}"
    );
}
