//! A presence record is a claim written into DSH_HOME, where anyone who can write the home (an agent's
//! shell tool, a script in a cloned repo) can plant one. It counts only when the process it names shows,
//! in `/proc` (the kernel's word, not the file's), that it is what the record says:
//!
//! - the pid is alive and is this user's; the record file is this user's (checked by the reader);
//! - it is a DSH host on this home: `/proc/<pid>/exe` is a node or electron binary, its command line runs
//!   the DSH CLI (`foreign::dsh_host_profile`), and its DSH_HOME (`environ`, a relative one resolved against
//!   `/proc/<pid>/cwd`, as rc.8 resolves it) is this home;
//! - it runs this plugin: it maps a `dsh-session-mail.*.node` addon (`/proc/<pid>/maps`) — a host without
//!   the plugin says nothing about what it holds, so a record planted for it must not hide it from the
//!   foreign-holder scan;
//! - it is the same incarnation: the record's `procStart` (written by [`super::publish`] from
//!   `/proc/self/stat`) equals the process's start time (`/proc/<pid>/stat` field 22): a reused pid fails;
//! - its web URL, when it has one, is `http://` on a loopback address and the pid holds a socket listening
//!   there (a LISTEN inode of that port ↔ a `socket:[inode]` link in `/proc/<pid>/fd`; the listeners from
//!   netlink `sock_diag`, else `/proc/<pid>/net/tcp{,6}`): a send routed by the record (and the cookie minted
//!   for it) goes only to the owner's own port.
//!
//! A passing check is reused while everything it saw still holds ([`verify_cached_in`], [`still`]).
//!
//! Everything read is bounded. Where `/proc` is not there (macOS, Windows), [`verify`] cannot see a
//! process and says so ([`Unverified::NoProc`]): the reader then keeps the file checks (regular file,
//! this user's, pid alive, fresh) and a loopback URL — README "Limits" says what that leaves open.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::Record;

/// Why a record was not believed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unverified {
    /// No `/proc` here: nothing about the process can be checked.
    NoProc,
    /// The check that failed, for a test or a doctor line.
    Failed(&'static str),
}

/// Longest `/proc/<pid>/maps` read (a node process maps ~1–3k files).
const MAX_MAPS: u64 = 8 << 20;
/// Longest `/proc/<pid>/net/tcp*` read.
const MAX_NET: u64 = 4 << 20;
/// Most `/proc/<pid>/fd` entries looked at.
const MAX_FDS: usize = 65_536;
/// The plugin's addon file name: `<napi.binaryName>.<platform>.node` (package.json).
const ADDON_PREFIX: &str = "dsh-session-mail.";

fn read_capped(p: &Path, cap: u64) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    File::open(p).ok()?.take(cap).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The start time of `pid` in clock ticks after boot (`/proc/<pid>/stat` field 22).
pub fn start_ticks(proc_root: &Path, pid: u32) -> Option<u64> {
    let stat = read_capped(&proc_root.join(pid.to_string()).join("stat"), 4096)?;
    super::foreign::start_ticks_of(&String::from_utf8_lossy(&stat))
}

/// This process's start time, for its own record (`None` without `/proc`).
pub fn own_start_ticks() -> Option<u64> {
    start_ticks(Path::new("/proc"), std::process::id())
}

/// The loopback port of a record's web URL: `http://127.x.x.x:<port>`, `http://localhost:<port>` or
/// `http://[::1]:<port>` (a path after it is allowed). Anything else is no route this plugin takes.
pub fn loopback_port(base_url: &str) -> Option<(u16, bool)> {
    let rest = base_url.strip_prefix("http://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6.split_once("]:")?;
        (h, p)
    } else {
        authority.rsplit_once(':')?
    };
    let port: u16 = port.parse().ok().filter(|p| *p != 0)?;
    let v6 = match host {
        "localhost" => false,
        "::1" => true,
        h => {
            let ip: std::net::Ipv4Addr = h.parse().ok()?;
            if !ip.is_loopback() {
                return None;
            }
            false
        }
    };
    Some((port, v6))
}

/// Is a listening address (as `/proc/net/tcp*` prints it: little-endian words) loopback or wildcard?
fn loopback_or_any_hex(addr: &str, v6: bool) -> bool {
    if v6 || addr.len() == 32 {
        // ::, ::1, or ::ffff:127.x.x.x (little-endian words as the kernel prints them)
        addr == "00000000000000000000000000000000"
            || addr == "00000000000000000000000001000000"
            || (addr.starts_with("0000000000000000FFFF0000") && addr.ends_with("7F"))
    } else {
        addr == "00000000" || addr.ends_with("7F") // 0.0.0.0 or 127.x.x.x (little endian)
    }
}

/// The inodes of the sockets listening on `port` on a loopback or wildcard address, from one
/// `/proc/<pid>/net/tcp` or `tcp6` table.
fn listening_inodes(table: &str, port: u16, v6: bool) -> Vec<u64> {
    let mut out = Vec::new();
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // sl local_address rem_address st tx:rx tr:tm retrnsmt uid timeout inode
        let (Some(local), Some(state), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
            continue;
        };
        if *state != "0A" {
            continue; // TCP_LISTEN
        }
        let Some((addr, p)) = local.split_once(':') else {
            continue;
        };
        if u16::from_str_radix(p, 16).ok() != Some(port) {
            continue;
        }
        if loopback_or_any_hex(addr, v6) {
            if let Ok(i) = inode.parse() {
                out.push(i);
            }
        }
    }
    out
}

/// Where the listening sockets of a port were looked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`) for one address family, asked for listening
    /// sockets of the port only: the kernel walks its listening hash, never the established one.
    Diag(u8),
    /// The pid's `/proc/<pid>/net/tcp` and `tcp6` tables: where netlink does not answer (or a test's
    /// `/proc`). Each full read makes the kernel walk its whole established hash (~1.7 ms at 262,144
    /// buckets), which is why it is the fallback.
    Tables,
}

/// The inodes of the sockets listening on loopback-or-any `port`, and where they were found. On Linux
/// with the real `/proc`, netlink is asked (in this process's network namespace: the one a connection to
/// the record's URL from here goes through); when it does not answer, the pid's own tables are read.
fn listening_on(proc_root: &Path, pid: u32, port: u16, families: &[u8]) -> Vec<(u64, Source)> {
    #[cfg(target_os = "linux")]
    if proc_root == Path::new("/proc") {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let mut out = Vec::new();
        let mut answered = true;
        for &family in families {
            match diag::listening(family, port) {
                Ok(ls) => out.extend(
                    ls.into_iter()
                        .filter(|l| l.uid == uid && l.loopback_or_any())
                        .map(|l| (l.inode, Source::Diag(family))),
                ),
                Err(_) => {
                    answered = false;
                    break;
                }
            }
        }
        if answered {
            return out;
        }
    }
    let _ = families;
    let dir = proc_root.join(pid.to_string());
    let mut out = Vec::new();
    for (table, v6) in [("tcp", false), ("tcp6", true)] {
        if let Some(t) = read_capped(&dir.join("net").join(table), MAX_NET) {
            out.extend(
                listening_inodes(&String::from_utf8_lossy(&t), port, v6)
                    .into_iter()
                    .map(|i| (i, Source::Tables)),
            );
        }
    }
    out
}

/// The address families a record's URL may be reached through: an IPv4 URL also by a dual-stack `::`
/// listener (an IPv6 socket), an IPv6 one only by IPv6 sockets.
#[cfg(target_os = "linux")]
fn families(v6: bool) -> &'static [u8] {
    const V4: u8 = libc::AF_INET as u8;
    const V6: u8 = libc::AF_INET6 as u8;
    if v6 {
        &[V6]
    } else {
        &[V4, V6]
    }
}

#[cfg(not(target_os = "linux"))]
fn families(_v6: bool) -> &'static [u8] {
    &[]
}

/// A listening socket a process was seen to hold: the port, the socket's inode, the fd that holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    port: u16,
    inode: u64,
    fd: u32,
    source: Source,
}

/// `/proc/<pid>/fd/<n>` is the socket `inode`.
fn fd_is_socket(link: &Path, inode: u64) -> bool {
    fs::read_link(link).ok().is_some_and(|l| {
        l.to_str()
            .and_then(|s| s.strip_prefix("socket:["))
            .and_then(|s| s.strip_suffix(']'))
            .and_then(|s| s.parse::<u64>().ok())
            == Some(inode)
    })
}

/// Does `pid` hold a socket listening on loopback `port`? The socket it holds (the first of its fds, at
/// most [`MAX_FDS`] looked at, that is one of the listening inodes).
fn listens_on(proc_root: &Path, pid: u32, port: u16, v6: bool) -> Option<Held> {
    let dir = proc_root.join(pid.to_string());
    let inodes = listening_on(proc_root, pid, port, families(v6));
    if inodes.is_empty() {
        return None;
    }
    let fds = fs::read_dir(dir.join("fd")).ok()?;
    fds.flatten().take(MAX_FDS).find_map(|fd| {
        let n: u32 = fd.file_name().to_str()?.parse().ok()?;
        let l = fs::read_link(fd.path()).ok()?;
        let i: u64 = l
            .to_str()?
            .strip_prefix("socket:[")?
            .strip_suffix(']')?
            .parse()
            .ok()?;
        let (inode, source) = *inodes.iter().find(|(x, _)| *x == i)?;
        Some(Held {
            port,
            inode,
            fd: n,
            source,
        })
    })
}

/// The socket seen is still listening on its port (asked where it was found) and still the pid's, through
/// the same fd: a socket closed, replaced or handed to another process fails.
fn still_holds(proc_root: &Path, pid: u32, h: &Held) -> bool {
    let families: Vec<u8> = match h.source {
        Source::Diag(f) => vec![f],
        Source::Tables => Vec::new(),
    };
    let listening = listening_on(proc_root, pid, h.port, &families);
    listening.contains(&(h.inode, h.source))
        && fd_is_socket(
            &proc_root
                .join(pid.to_string())
                .join("fd")
                .join(h.fd.to_string()),
            h.inode,
        )
}

/// `/proc/<pid>/exe` is a node or electron binary (rc.8 runs on Node; the desktop app on Electron).
pub(crate) fn is_js_runtime(exe: &Path) -> bool {
    let name = exe
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .trim_end_matches(" (deleted)")
        .to_ascii_lowercase();
    name == "node"
        || name == "nodejs"
        || name.starts_with("node-")
        || name.starts_with("node2")
        || name.starts_with("electron")
}

/// The DSH_HOME of a process: its environment's (`foreign::home_of_env`), relative to its cwd.
pub fn home_of_process(proc_root: &Path, pid: u32) -> Option<PathBuf> {
    home_and_cwd(proc_root, pid).map(|(h, _)| h)
}

/// [`home_of_process`], and the cwd it was resolved against when the environment's was relative.
fn home_and_cwd(proc_root: &Path, pid: u32) -> Option<(PathBuf, Option<PathBuf>)> {
    let dir = proc_root.join(pid.to_string());
    let environ = read_capped(&dir.join("environ"), super::foreign::MAX_ENVIRON)?;
    let environ = String::from_utf8_lossy(&environ);
    let var = |k: &str| {
        environ
            .split('\0')
            .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
    };
    let home = super::foreign::home_of_env(var("DSH_HOME"), var("HOME"))?;
    if home.is_absolute() {
        return Some((home, None));
    }
    let cwd = fs::read_link(dir.join("cwd")).ok()?;
    Some((cwd.join(home), Some(cwd)))
}

/// Is the process a DSH host (node/electron running the DSH CLI) whose home is `home`?
pub fn is_dsh_host_on(proc_root: &Path, pid: u32, home: &Path) -> bool {
    dsh_host_on(proc_root, pid, home).is_some()
}

/// [`is_dsh_host_on`]; `Some(cwd)` when the home is relative to the process's cwd (`Some(None)`: it is not).
fn dsh_host_on(proc_root: &Path, pid: u32, home: &Path) -> Option<Option<PathBuf>> {
    let dir = proc_root.join(pid.to_string());
    let exe = fs::read_link(dir.join("exe")).ok()?;
    if !is_js_runtime(&exe) {
        return None;
    }
    let cmdline = read_capped(&dir.join("cmdline"), super::foreign::MAX_CMDLINE)?;
    let cmdline = String::from_utf8_lossy(&cmdline);
    let args: Vec<&str> = cmdline.split('\0').filter(|a| !a.is_empty()).collect();
    super::foreign::dsh_host_profile(&args)?;
    let (its_home, cwd) = home_and_cwd(proc_root, pid)?;
    super::foreign::same_path(&its_home, home).then_some(cwd)
}

/// Does the process map this plugin's addon?
fn maps_the_addon(proc_root: &Path, pid: u32) -> bool {
    let Some(maps) = read_capped(&proc_root.join(pid.to_string()).join("maps"), MAX_MAPS) else {
        return false;
    };
    String::from_utf8_lossy(&maps).lines().any(|l| {
        l.rsplit('/')
            .next()
            .is_some_and(|f| f.starts_with(ADDON_PREFIX) && f.ends_with(".node"))
    })
}

/// A process image, from `/proc/<pid>/stat`: its start time (field 22: the incarnation of the pid) and
/// the addresses `execve` lays out anew (fields 26–28 and 45–51: code, stack, data, brk, arguments and
/// environment; randomized per exec) — what tells "the same program still runs in this process" without
/// reading its maps, command line and environment again. The kernel shows the layout only to a reader
/// that may inspect the process (zeros otherwise): then [`Image::layout_seen`] is false and nothing is cached.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Image {
    start: u64,
    layout: [u64; 10],
}

impl Image {
    fn of(stat: &str) -> Option<Image> {
        let rest = &stat[stat.rfind(')')? + 1..];
        // `rest` starts at field 3 (state): field n is rest's (n - 3)th word
        let f: Vec<&str> = rest.split_whitespace().collect();
        let at = |n: usize| f.get(n - 3).and_then(|w| w.parse::<u64>().ok());
        let mut layout = [0u64; 10];
        for (slot, n) in layout
            .iter_mut()
            .zip([26, 27, 28, 45, 46, 47, 48, 49, 50, 51])
        {
            *slot = at(n).unwrap_or(0);
        }
        Some(Image {
            start: at(22)?,
            layout,
        })
    }

    fn read(proc_root: &Path, pid: u32) -> Option<Image> {
        let stat = read_capped(&proc_root.join(pid.to_string()).join("stat"), 4096)?;
        Image::of(&String::from_utf8_lossy(&stat))
    }

    fn layout_seen(&self) -> bool {
        self.layout.iter().any(|&a| a != 0)
    }
}

/// Everything a passing check saw: the record's claims it checked, and the facts of the process that
/// made them true. [`still`] re-checks the facts that can change while the image is the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    pid: u32,
    proc_start: Option<u64>,
    base_url: Option<String>,
    uid: u32,
    image: Image,
    /// The cwd a relative DSH_HOME was resolved against.
    cwd: Option<PathBuf>,
    socket: Option<Held>,
}

/// The uid of the process (`/proc/<pid>`'s owner); None: no such process.
#[cfg(unix)]
fn uid_of(proc_root: &Path, pid: u32) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(proc_root.join(pid.to_string()))
        .ok()
        .map(|m| m.uid())
}

#[cfg(not(unix))]
fn uid_of(proc_root: &Path, pid: u32) -> Option<u32> {
    fs::metadata(proc_root.join(pid.to_string()))
        .ok()
        .map(|_| 0)
}

#[cfg(unix)]
fn my_uid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn my_uid() -> u32 {
    0
}

fn has_proc(proc_root: &Path) -> bool {
    proc_root.join("self").exists() || proc_root.join(std::process::id().to_string()).exists()
}

/// The whole check of [`verify_in`], and what it saw.
fn check(proc_root: &Path, home: &Path, r: &Record) -> Result<Seen, Unverified> {
    if !has_proc(proc_root) {
        return Err(Unverified::NoProc);
    }
    let uid = my_uid();
    match uid_of(proc_root, r.pid) {
        Some(u) if u == uid => {}
        Some(_) => return Err(Unverified::Failed("the process is another user's")),
        None => return Err(Unverified::Failed("no such process")),
    }
    // the image first: a process that exec'd between the reads below and this one has another layout
    let image = Image::read(proc_root, r.pid);
    let Some(cwd) = dsh_host_on(proc_root, r.pid, home) else {
        return Err(Unverified::Failed("not a DSH host on this home"));
    };
    let image = match (r.proc_start, image) {
        (Some(claimed), Some(real)) if claimed == real.start => real,
        _ => return Err(Unverified::Failed("its start time is not the record's")),
    };
    if !maps_the_addon(proc_root, r.pid) {
        return Err(Unverified::Failed("it does not run this plugin"));
    }
    let socket = match &r.base_url {
        Some(url) => {
            let Some((port, v6)) = loopback_port(url) else {
                return Err(Unverified::Failed("its web URL is not a loopback http URL"));
            };
            let Some(held) = listens_on(proc_root, r.pid, port, v6) else {
                return Err(Unverified::Failed("it does not listen on its web URL"));
            };
            Some(held)
        }
        None => None,
    };
    Ok(Seen {
        pid: r.pid,
        proc_start: r.proc_start,
        base_url: r.base_url.clone(),
        uid,
        image,
        cwd,
        socket,
    })
}

/// Check a record against the process it names (`proc_root` is `/proc`; a test passes a tree of its own).
pub fn verify_in(proc_root: &Path, home: &Path, r: &Record) -> Result<(), Unverified> {
    check(proc_root, home, r).map(|_| ())
}

/// Does what `seen` saw still hold for `r`? The record claims what was checked (pid, start time, web
/// URL); the process is still this user's, of the same start time (a reused pid fails) and the same image
/// (an exec fails: the layout of fields 26–28, 45–51 is laid out anew); a relative home's cwd is the
/// same; the socket is still listening on its port and still held by the same fd of the pid (closed,
/// replaced, or only another process's now: fails). ~10 system calls, none of which walks a table
/// whose size depends on the machine.
fn still(proc_root: &Path, seen: &Seen, r: &Record) -> bool {
    r.pid == seen.pid
        && r.proc_start == seen.proc_start
        && r.base_url == seen.base_url
        && uid_of(proc_root, r.pid) == Some(seen.uid)
        && Image::read(proc_root, r.pid).as_ref() == Some(&seen.image)
        && seen.cwd.as_ref().is_none_or(|cwd| {
            fs::read_link(proc_root.join(r.pid.to_string()).join("cwd"))
                .ok()
                .as_ref()
                == Some(cwd)
        })
        && seen
            .socket
            .as_ref()
            .is_none_or(|h| still_holds(proc_root, r.pid, h))
}

/// What passed, by (`/proc` root, home, pid). A verification is reused only while [`still`] holds; any
/// difference runs the whole check again (and a failure removes the entry).
type Cache = HashMap<(PathBuf, PathBuf, u32), Seen>;
static SEEN: Mutex<Option<Cache>> = Mutex::new(None);
/// Most verifications kept (then the cache starts over).
const MAX_SEEN: usize = 1024;

/// [`verify_in`], reusing a passing check while what it saw still holds ([`still`]).
pub fn verify_cached_in(proc_root: &Path, home: &Path, r: &Record) -> Result<(), Unverified> {
    let key = (proc_root.to_path_buf(), home.to_path_buf(), r.pid);
    let seen = SEEN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .and_then(|c| c.get(&key).cloned());
    if let Some(seen) = seen {
        if has_proc(proc_root) && still(proc_root, &seen, r) {
            return Ok(());
        }
    }
    let checked = check(proc_root, home, r);
    let mut cache = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    match checked {
        Ok(seen) => {
            if seen.image.layout_seen() {
                if cache.len() >= MAX_SEEN {
                    cache.clear();
                }
                cache.insert(key, seen);
            } else {
                cache.remove(&key);
            }
            Ok(())
        }
        Err(e) => {
            cache.remove(&key);
            Err(e)
        }
    }
}

/// Check a record against the live process it names (a passing check is reused while it still holds:
/// [`verify_cached_in`]).
pub fn verify(home: &Path, r: &Record) -> Result<(), Unverified> {
    #[cfg(test)]
    if testing::trusted(r.pid) {
        return Ok(());
    }
    if cfg!(target_os = "linux") {
        verify_cached_in(Path::new("/proc"), home, r)
    } else {
        Err(Unverified::NoProc)
    }
}

#[cfg(target_os = "linux")]
mod diag {
    //! The kernel's socket diagnostics (`NETLINK_SOCK_DIAG`, `inet_diag`): the TCP sockets listening on
    //! one port. The request asks for `TCPF_LISTEN` only with the port as `idiag_sport`, so the kernel
    //! walks its listening hash and skips the established one (`inet_diag_dump_icsk`); each answer carries
    //! the socket's local address, uid and inode. It answers for this process's network namespace.

    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const SOCK_DIAG_BY_FAMILY: u16 = 20;
    const TCPF_LISTEN: u32 = 1 << 10;
    /// `struct nlmsghdr`.
    const HDR: usize = 16;
    /// `struct inet_diag_req_v2`.
    const REQ: usize = 56;
    /// `struct inet_diag_msg`.
    const MSG: usize = 72;
    /// Most answers read (a port has a handful of listeners at most; a reuseport group a few more).
    const MAX_ANSWERS: usize = 4096;

    /// One listening socket.
    pub struct Listener {
        pub family: u8,
        /// The local address, network order (IPv4: the first 4 bytes).
        pub src: [u8; 16],
        pub uid: u32,
        pub inode: u64,
    }

    impl Listener {
        /// 127.x.x.x / 0.0.0.0, or ::1 / :: / ::ffff:127.x.x.x.
        pub fn loopback_or_any(&self) -> bool {
            let a = &self.src;
            if self.family == libc::AF_INET as u8 {
                return a[0] == 127 || a[..4] == [0; 4];
            }
            let v4_mapped = a[..10] == [0; 10] && a[10..12] == [0xff, 0xff];
            a[..15] == [0; 15] && (a[15] == 0 || a[15] == 1) || (v4_mapped && a[12] == 127)
        }
    }

    /// The TCP sockets of `family` listening on `port`. Err: netlink did not answer (no `sock_diag` or
    /// `tcp_diag` here, a seccomp filter, …): the caller reads `/proc` instead.
    pub fn listening(family: u8, port: u16) -> io::Result<Vec<Listener>> {
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::NETLINK_SOCK_DIAG,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut req = [0u8; HDR + REQ];
        req[0..4].copy_from_slice(&((HDR + REQ) as u32).to_ne_bytes());
        req[4..6].copy_from_slice(&SOCK_DIAG_BY_FAMILY.to_ne_bytes());
        let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
        req[6..8].copy_from_slice(&flags.to_ne_bytes());
        req[8..12].copy_from_slice(&1u32.to_ne_bytes()); // seq
        let r = &mut req[HDR..];
        r[0] = family;
        r[1] = libc::IPPROTO_TCP as u8;
        r[4..8].copy_from_slice(&TCPF_LISTEN.to_ne_bytes());
        // id: sport (network order), dport 0, addresses 0, interface 0, cookie INET_DIAG_NOCOOKIE
        r[8..10].copy_from_slice(&port.to_be_bytes());
        r[48..56].copy_from_slice(&[0xff; 8]);
        // SAFETY: an all-zero sockaddr_nl is valid; the kernel is pid 0.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: req and sa are valid for the lengths given.
        let sent = unsafe {
            libc::sendto(
                fd.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&sa as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent != req.len() as isize {
            return Err(io::Error::last_os_error());
        }
        let mut out = Vec::new();
        let mut buf = vec![0u8; 32 << 10];
        loop {
            // SAFETY: buf is valid for its length.
            let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let data = &buf[..n as usize];
            if data.is_empty() {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let mut off = 0;
            while off + HDR <= data.len() {
                let u32_at = |i: usize| u32::from_ne_bytes(data[i..i + 4].try_into().unwrap());
                let len = u32_at(off) as usize;
                let kind = u16::from_ne_bytes(data[off + 4..off + 6].try_into().unwrap());
                if len < HDR || off + len > data.len() {
                    return Err(io::ErrorKind::InvalidData.into());
                }
                match kind as libc::c_int {
                    libc::NLMSG_DONE => return Ok(out),
                    libc::NLMSG_ERROR => {
                        let code = if len >= HDR + 4 {
                            i32::from_ne_bytes(data[off + HDR..off + HDR + 4].try_into().unwrap())
                        } else {
                            -libc::EINVAL
                        };
                        return Err(io::Error::from_raw_os_error(-code));
                    }
                    _ if kind == SOCK_DIAG_BY_FAMILY && len >= HDR + MSG => {
                        let m = &data[off + HDR..off + HDR + MSG];
                        let mut src = [0u8; 16];
                        src.copy_from_slice(&m[8..24]);
                        let sport = u16::from_be_bytes([m[4], m[5]]);
                        // state 10 = TCP_LISTEN; the kernel filtered both already
                        if m[1] == 10 && sport == port {
                            out.push(Listener {
                                family: m[0],
                                src,
                                uid: u32::from_ne_bytes(m[64..68].try_into().unwrap()),
                                inode: u32::from_ne_bytes(m[68..72].try_into().unwrap()) as u64,
                            });
                        }
                        if out.len() > MAX_ANSWERS {
                            return Err(io::ErrorKind::InvalidData.into());
                        }
                    }
                    _ => {}
                }
                off += (len + 3) & !3;
            }
        }
    }
}

/// Test seam (unit tests only): the send and mailbox unit tests play an owner process with a pid that no
/// `/proc` check can make a DSH host; a pid is believed only when a test named it. The shipped build has
/// no such seam (the node suites start a real owner process: test/helpers/owner-process.mjs).
#[cfg(test)]
pub mod testing {
    use std::sync::Mutex;

    static TRUSTED: Mutex<Vec<u32>> = Mutex::new(Vec::new());

    /// Believe records of `pid` without looking at `/proc`.
    pub fn trust(pid: u32) {
        TRUSTED.lock().unwrap().push(pid);
    }

    pub(super) fn trusted(pid: u32) -> bool {
        TRUSTED.lock().unwrap().contains(&pid)
    }

    /// A listening socket a process was seen to hold.
    #[derive(Debug)]
    pub struct Listening(super::Held);

    impl Listening {
        /// Found through netlink (not the `/proc/<pid>/net` tables).
        pub fn by_netlink(&self) -> bool {
            matches!(self.0.source, super::Source::Diag(_))
        }
        /// Still listening, and still held by `pid` through the same fd.
        pub fn still_held(&self, proc_root: &std::path::Path, pid: u32) -> bool {
            super::still_holds(proc_root, pid, &self.0)
        }
    }

    /// The socket `pid` holds listening on loopback `port` (an IPv4 URL's).
    pub fn listens_on(proc_root: &std::path::Path, pid: u32, port: u16) -> Option<Listening> {
        super::listens_on(proc_root, pid, port, false).map(Listening)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_urls_only() {
        assert_eq!(loopback_port("http://127.0.0.1:8080"), Some((8080, false)));
        assert_eq!(loopback_port("http://127.3.4.5:80/x"), Some((80, false)));
        assert_eq!(loopback_port("http://localhost:3000"), Some((3000, false)));
        assert_eq!(loopback_port("http://[::1]:3000"), Some((3000, true)));
        for bad in [
            "https://127.0.0.1:1",
            "http://10.0.0.1:80",
            "http://evil.example:80",
            "http://127.0.0.1",
            "http://127.0.0.1:0",
            "http://user@127.0.0.1:80",
            "http://[::2]:80",
        ] {
            assert_eq!(loopback_port(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_listening_loopback_socket_is_found_in_the_tables() {
        let tcp = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0\n\
   1: 0100007F:1F91 00000000:0000 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0\n\
   2: 0500000A:1F92 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4444 1 0\n\
   3: 00000000:1F93 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4545 1 0\n";
        assert_eq!(listening_inodes(tcp, 0x1F90, false), vec![4242]);
        assert!(
            listening_inodes(tcp, 0x1F91, false).is_empty(),
            "established, not listening"
        );
        assert!(
            listening_inodes(tcp, 0x1F92, false).is_empty(),
            "10.0.0.5 is not loopback"
        );
        assert_eq!(
            listening_inodes(tcp, 0x1F93, false),
            vec![4545],
            "0.0.0.0 listens on loopback too"
        );
    }
}
