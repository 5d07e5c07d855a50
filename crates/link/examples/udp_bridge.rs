//! A delaying UDP bridge between two network namespaces, for `npm run bench:machines:path` (test-only: built
//! by `cargo build --example udp_bridge`, never part of the addon). The kernel here has no `sch_netem`, so a
//! path's latency is made by holding each datagram.
//!
//! Each side is a namespace that owns, on its loopback, the addresses of the far side's hosts, and routes to
//! its own side's hosts; the two sides have no route to each other, so the bridge is the only path. A socket
//! of the bridge bound at `L` in one side receives a datagram from `F` (a host of that side sending to `L`);
//! the bridge sends it, after the delay, from a socket bound at `F` in the other side (made on first use) to
//! `L` there. Both ends see each other's real addresses: no address is rewritten.
//!
//! ```text
//! udp_bridge <ns of side 1> <ns of side 2> <addr:port to listen at in side 1>,... <addr:port in side 2>,...
//! ```
//! It prints `ready` once every listening socket is bound, then reads commands on stdin, one a line:
//! `delay <µs>` (each way, from the next datagram on), `stats` (prints `datagrams <n>`); it exits when stdin
//! closes.

use std::collections::HashMap;
use std::io::BufRead;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::UdpSocket;

/// A bound socket: received on through tokio, sent from through its std twin (the same socket), also from
/// the delay line's thread.
type Sock = (Arc<UdpSocket>, Arc<std::net::UdpSocket>);

struct Side {
    ns: std::fs::File,
    socks: Mutex<HashMap<SocketAddr, Sock>>,
}

/// A datagram held until `due`, then sent from `from` to `to`.
struct Held {
    due: std::time::Instant,
    from: Arc<std::net::UdpSocket>,
    to: SocketAddr,
    data: Vec<u8>,
}

struct Bridge {
    sides: [Side; 2],
    delay_us: AtomicU64,
    datagrams: AtomicU64,
    /// The delay line: one thread that sleeps (nanosleep, not tokio's millisecond timer wheel) until the
    /// oldest datagram is due. The delay is the same for all, so they fall due in the order they came.
    line: std::sync::mpsc::Sender<Held>,
}

/// A UDP socket bound at `addr` in the namespace `ns` (made on a thread that entered it: a socket stays in
/// the namespace it was made in).
fn bind_in(ns: &std::fs::File, addr: SocketAddr) -> std::io::Result<std::net::UdpSocket> {
    let fd = ns.try_clone()?;
    std::thread::spawn(move || {
        // SAFETY: setns on this short-lived thread only, with an fd we hold open.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let s = std::net::UdpSocket::bind(addr)?;
        s.set_nonblocking(true)?;
        Ok(s)
    })
    .join()
    .map_err(|_| std::io::Error::other("the binding thread panicked"))?
}

impl Bridge {
    /// The socket bound at `addr` in side `i`, made (and served) on first use.
    fn socket(self: &Arc<Self>, i: usize, addr: SocketAddr) -> std::io::Result<Sock> {
        let mut socks = self.sides[i].socks.lock().unwrap();
        if let Some(s) = socks.get(&addr) {
            return Ok(s.clone());
        }
        let std = bind_in(&self.sides[i].ns, addr)?;
        let twin = Arc::new(std.try_clone()?);
        let s = (Arc::new(UdpSocket::from_std(std)?), twin);
        socks.insert(addr, s.clone());
        let (me, rx) = (self.clone(), s.0.clone());
        tokio::spawn(async move { me.serve(i, addr, rx).await });
        Ok(s)
    }

    /// What arrives at `local` in side `i` goes to `local` in the other side, from the sender's address.
    async fn serve(self: Arc<Self>, i: usize, local: SocketAddr, s: Arc<UdpSocket>) {
        let mut buf = vec![0u8; 65536];
        loop {
            let Ok((n, from)) = s.recv_from(&mut buf).await else {
                continue;
            };
            self.datagrams.fetch_add(1, Relaxed);
            let Ok((_, out)) = self.socket(1 - i, from) else {
                continue;
            };
            let delay = self.delay_us.load(Relaxed);
            if delay == 0 {
                let _ = out.send_to(&buf[..n], local);
                continue;
            }
            let _ = self.line.send(Held {
                due: std::time::Instant::now() + Duration::from_micros(delay),
                from: out,
                to: local,
                data: buf[..n].to_vec(),
            });
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 4 {
        eprintln!("usage: udp_bridge <ns 1> <ns 2> <listen in 1>,... <listen in 2>,...");
        std::process::exit(2);
    }
    let open = |ns: &str| {
        std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap_or_else(|e| {
            eprintln!("udp_bridge: the namespace {ns}: {e}");
            std::process::exit(1)
        })
    };
    let (line, held) = std::sync::mpsc::channel::<Held>();
    std::thread::spawn(move || {
        while let Ok(h) = held.recv() {
            let now = std::time::Instant::now();
            if h.due > now {
                std::thread::sleep(h.due - now);
            }
            let _ = h.from.send_to(&h.data, h.to);
        }
    });
    let bridge = Arc::new(Bridge {
        line,
        sides: [&args[0], &args[1]].map(|ns| Side {
            ns: open(ns),
            socks: Mutex::new(HashMap::new()),
        }),
        delay_us: AtomicU64::new(0),
        datagrams: AtomicU64::new(0),
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let b2 = bridge.clone();
    let listens = [args[2].clone(), args[3].clone()];
    rt.block_on(async move {
        for (i, list) in listens.iter().enumerate() {
            for a in list.split(',').filter(|a| !a.is_empty()) {
                let addr: SocketAddr = a.parse().unwrap_or_else(|e| {
                    eprintln!("udp_bridge: {a}: {e}");
                    std::process::exit(2)
                });
                if let Err(e) = b2.socket(i, addr) {
                    eprintln!("udp_bridge: bind {addr} in side {}: {e}", i + 1);
                    std::process::exit(1);
                }
            }
        }
        println!("ready");
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        while let Some(line) = rx.recv().await {
            let w: Vec<&str> = line.split_whitespace().collect();
            match w.as_slice() {
                ["delay", us] => match us.parse() {
                    Ok(us) => {
                        b2.delay_us.store(us, Relaxed);
                        println!("delay {us}");
                    }
                    Err(_) => println!("error: delay {us}"),
                },
                ["stats"] => println!("datagrams {}", b2.datagrams.load(Relaxed)),
                _ => println!("error: {line}"),
            }
        }
    });
}
