//! What the tests that play a misbehaving peer share: a bare Iroh endpoint (relays disabled, no address
//! lookup) on one address, a link record naming it, a node's address and a connection's close code.

#![allow(dead_code)]

use dsh_session_mail_link::node::Node;
use dsh_session_mail_link::{store, MachineId, Relay};
use iroh::endpoint::presets;
use iroh::{Endpoint, EndpointAddr, RelayMode, SecretKey, TransportAddr};

/// A bare endpoint with a fresh key, bound on `ip` (any port).
pub async fn bare_endpoint(ip: &str) -> Endpoint {
    Endpoint::builder(presets::Minimal)
        .secret_key(SecretKey::generate())
        .relay_mode(RelayMode::Disabled)
        .clear_address_lookup()
        .clear_ip_transports()
        .bind_addr(format!("{ip}:0").as_str())
        .unwrap()
        .bind()
        .await
        .unwrap()
}

/// `victim` links `ep` (as if through an invite).
pub fn link(home: &std::path::Path, victim: &Node, ep: &Endpoint, name: &str) {
    let id = MachineId::of(&ep.id());
    let addrs = ep.bound_sockets();
    store::update(home, victim.secret_key(), 0, |d| {
        d.links.push(store::Link {
            id,
            name: name.into(),
            relay: Relay::None,
            addrs,
            linked_at: 0,
        });
        Ok(())
    })
    .unwrap();
}

/// Where `n` is bound, as Iroh dials it.
pub fn addr_of(n: &Node) -> EndpointAddr {
    EndpointAddr::from_parts(
        n.id().endpoint_id(),
        n.addrs().into_iter().map(TransportAddr::Ip),
    )
}

/// The application close code a connection ended with.
pub fn code(c: &iroh::endpoint::Connection) -> Option<u64> {
    match c.close_reason()? {
        iroh::endpoint::ConnectionError::ApplicationClosed(a) => Some(a.error_code.into_inner()),
        _ => None,
    }
}

/// A UDP path on loopback between `a_real` and `b_real`: A reaches B at the first address returned, B sees A
/// at the second. Every datagram is held `delay` each way; while `cut` is set, every datagram is dropped
/// (a partition).
pub async fn udp_path(
    a_real: std::net::SocketAddr,
    b_real: std::net::SocketAddr,
    delay: std::time::Duration,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (std::net::SocketAddr, std::net::SocketAddr) {
    use std::sync::Arc;
    let sa = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let sb = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let faces = (sa.local_addr().unwrap(), sb.local_addr().unwrap());
    for (from, to, dst) in [(sa.clone(), sb.clone(), b_real), (sb, sa, a_real)] {
        let cut = cut.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            while let Ok((n, _)) = from.recv_from(&mut buf).await {
                if cut.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let (d, to) = (buf[..n].to_vec(), to.clone());
                if delay.is_zero() {
                    let _ = to.send_to(&d, dst).await;
                    continue;
                }
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let _ = to.send_to(&d, dst).await;
                });
            }
        });
    }
    faces
}

/// `b` uses an invite of `a` (relay none): both record each other, `a` as "alpha".
pub async fn join(a: &Node, b: &Node) {
    let inv = a
        .invite(Relay::None, std::time::Duration::from_secs(300))
        .await
        .unwrap();
    b.accept_invite(&inv.encode(), "alpha", "beta-host")
        .await
        .unwrap();
}
