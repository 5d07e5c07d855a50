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
//!   there (`/proc/<pid>/net/tcp{,6}` LISTEN inode ↔ a `socket:[inode]` link in `/proc/<pid>/fd`): a send
//!   routed by the record (and the cookie minted for it) goes only to the owner's own port.
//!
//! Everything read is bounded. Where `/proc` is not there (macOS, Windows), [`verify`] cannot see a
//! process and says so ([`Unverified::NoProc`]): the reader then keeps the file checks (regular file,
//! this user's, pid alive, fresh) and a loopback URL — README "Limits" says what that leaves open.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

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
        let loopback_or_any = if v6 || addr.len() == 32 {
            // ::, ::1, or ::ffff:127.x.x.x (little-endian words as the kernel prints them)
            addr == "00000000000000000000000000000000"
                || addr == "00000000000000000000000001000000"
                || (addr.starts_with("0000000000000000FFFF0000") && addr.ends_with("7F"))
        } else {
            addr == "00000000" || addr.ends_with("7F") // 0.0.0.0 or 127.x.x.x (little endian)
        };
        if loopback_or_any {
            if let Ok(i) = inode.parse() {
                out.push(i);
            }
        }
    }
    out
}

/// Does `pid` hold a socket listening on loopback `port`?
fn listens_on(proc_root: &Path, pid: u32, port: u16) -> bool {
    let dir = proc_root.join(pid.to_string());
    let mut inodes = Vec::new();
    for (table, v6) in [("tcp", false), ("tcp6", true)] {
        if let Some(t) = read_capped(&dir.join("net").join(table), MAX_NET) {
            inodes.extend(listening_inodes(&String::from_utf8_lossy(&t), port, v6));
        }
    }
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = fs::read_dir(dir.join("fd")) else {
        return false;
    };
    fds.flatten().take(MAX_FDS).any(|fd| {
        fs::read_link(fd.path()).ok().is_some_and(|l| {
            l.to_str()
                .and_then(|s| s.strip_prefix("socket:["))
                .and_then(|s| s.strip_suffix(']'))
                .and_then(|s| s.parse::<u64>().ok())
                .is_some_and(|i| inodes.contains(&i))
        })
    })
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
        return Some(home);
    }
    Some(fs::read_link(dir.join("cwd")).ok()?.join(home))
}

/// Is the process a DSH host (node/electron running the DSH CLI) whose home is `home`?
pub fn is_dsh_host_on(proc_root: &Path, pid: u32, home: &Path) -> bool {
    let dir = proc_root.join(pid.to_string());
    let Ok(exe) = fs::read_link(dir.join("exe")) else {
        return false;
    };
    if !is_js_runtime(&exe) {
        return false;
    }
    let Some(cmdline) = read_capped(&dir.join("cmdline"), super::foreign::MAX_CMDLINE) else {
        return false;
    };
    let cmdline = String::from_utf8_lossy(&cmdline);
    let args: Vec<&str> = cmdline.split('\0').filter(|a| !a.is_empty()).collect();
    if super::foreign::dsh_host_profile(&args).is_none() {
        return false;
    }
    home_of_process(proc_root, pid).is_some_and(|h| super::foreign::same_path(&h, home))
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

/// Check a record against the process it names (`proc_root` is `/proc`; a test passes a tree of its own).
pub fn verify_in(proc_root: &Path, home: &Path, r: &Record) -> Result<(), Unverified> {
    if !proc_root.join("self").exists() && !proc_root.join(std::process::id().to_string()).exists()
    {
        return Err(Unverified::NoProc);
    }
    let dir = proc_root.join(r.pid.to_string());
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        match fs::metadata(&dir) {
            Ok(m) if m.uid() == uid => {}
            Ok(_) => return Err(Unverified::Failed("the process is another user's")),
            Err(_) => return Err(Unverified::Failed("no such process")),
        }
    }
    if !is_dsh_host_on(proc_root, r.pid, home) {
        return Err(Unverified::Failed("not a DSH host on this home"));
    }
    match (r.proc_start, start_ticks(proc_root, r.pid)) {
        (Some(claimed), Some(real)) if claimed == real => {}
        _ => return Err(Unverified::Failed("its start time is not the record's")),
    }
    if !maps_the_addon(proc_root, r.pid) {
        return Err(Unverified::Failed("it does not run this plugin"));
    }
    if let Some(url) = &r.base_url {
        let Some((port, _)) = loopback_port(url) else {
            return Err(Unverified::Failed("its web URL is not a loopback http URL"));
        };
        if !listens_on(proc_root, r.pid, port) {
            return Err(Unverified::Failed("it does not listen on its web URL"));
        }
    }
    Ok(())
}

/// Check a record against the live process it names.
pub fn verify(home: &Path, r: &Record) -> Result<(), Unverified> {
    #[cfg(test)]
    if testing::trusted(r.pid) {
        return Ok(());
    }
    if cfg!(target_os = "linux") {
        verify_in(Path::new("/proc"), home, r)
    } else {
        Err(Unverified::NoProc)
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
