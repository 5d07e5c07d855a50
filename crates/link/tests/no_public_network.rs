//! No packet leaves the machine (docs/machines.md "Network"): no test of this repository names a public
//! relay or address-lookup service, Cargo.lock has no port mapper, and two homes linked in a network
//! namespace this test makes send nothing out of its default route.

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
