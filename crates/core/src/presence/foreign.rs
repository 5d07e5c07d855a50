//! Sessions held by a DSH process that does **not** mount this plugin (so publishes no presence).
//!
//! rc.8 has no session lock: a send that wakes a cold session resumes it in this process, and if another
//! host process holds it live, both append to one log and its history forks. A process with this plugin
//! says what it holds ([`super::peers`]); one without it says nothing, so the send path looks for
//! evidence on this machine before it wakes a session (Linux `/proc`, same user only):
//!
//! - **which processes are DSH hosts on this home**: `/proc/<pid>/cmdline` runs the DSH CLI
//!   (`…/@deepseek-ai/dsh/lib/bin.js` or a `dsh` launcher; not `plugin`/`--dump-config`/`--version`/`--help`
//!   one-shots) and `/proc/<pid>/environ` resolves to this DSH_HOME (`DSH_HOME`, else `$HOME/.dsh`, as
//!   `store::resolve_dsh_home` does); minus this process and the processes that publish presence;
//! - **whether such a process may hold the session**: it started before the session's log was last
//!   written. Every way an rc.8 process comes to hold a session writes the log once it holds it: creating
//!   it writes the header, and resuming it (`session.create` with a stored id) appends a `session/end-seed`
//!   event (both seen in the real rc.8 host; test/real-host-foreign.test.mjs proves the guard for both),
//!   so a session live in a process that started at `t` has a log written at `t` or later. A log last
//!   written before every foreign process started is held by none of them.
//!
//! The rc.8 host keeps no file of a session open between writes (it opens, appends, fsyncs and closes the
//! log per batch: `dsh-session-persistence-jsonl` `appendLines`), so `/proc/<pid>/fd` names nothing, and
//! its API marks running sessions only (`session.list` `running`), not idle live ones: the start-time
//! rule above is the strongest evidence there is. It can refuse a session that a foreign process wrote
//! and no longer holds (we found no idle-session disposal in rc.8's API proxy, so that is mostly a session
//! another process wrote after the foreign one started) — the refusal says "may be live" and names the
//! process so the user can decide; it never lets a fork through for a session that process does hold.
//!
//! A process whose parent runs the same executable with the same command line is that parent's fork
//! between `fork` and `exec` (node's `child_process`, a shell's subshell): not a second host. Started
//! later than its parent, it would otherwise be taken for the newest writer of a log written in that instant.
//!
//! Bounded: at most [`MAX_PIDS`] `/proc` entries, only processes of this user, `cmdline` read up to
//! [`MAX_CMDLINE`] bytes and `environ` up to [`MAX_ENVIRON`] bytes, and only when a send is about to wake a
//! cold session. Elsewhere than Linux, or without `/proc`, nothing is found (the documented limit).

use std::path::{Path, PathBuf};

/// Most `/proc` entries looked at in one scan.
pub const MAX_PIDS: usize = 32_768;
/// Longest `cmdline` read.
pub const MAX_CMDLINE: u64 = 16 * 1024;
/// Longest `environ` read.
pub const MAX_ENVIRON: u64 = 256 * 1024;

/// A DSH host process on this home that publishes no presence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub pid: u32,
    /// `--profile <name>` of its command line, when given.
    pub profile: Option<String>,
    /// When it started (ms since the epoch).
    pub started_ms: i64,
}

/// A foreign host that may hold a session, with the evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub host: Host,
    /// When the session's log was last written (ms since the epoch).
    pub log_written_ms: i64,
    /// Other foreign hosts that started before that write too.
    pub others: usize,
}

impl Holder {
    /// `pid 4242, profile plain`
    pub fn describe(&self) -> String {
        format!(
            "pid {}, profile {}",
            self.host.pid,
            self.host
                .profile
                .as_deref()
                .unwrap_or("(not on its command line)")
        )
    }
}

/// Is this command line a DSH host (not a one-shot CLI command)? `Some(profile)` when it is.
pub fn dsh_host_profile(args: &[&str]) -> Option<Option<String>> {
    let is_cli = |a: &&str| {
        let a = a.replace('\\', "/");
        a.ends_with("/@deepseek-ai/dsh/lib/bin.js")
            || a.ends_with("/@deepseek-ai/dsh/bin/dsh")
            || a.rsplit('/').next() == Some("dsh")
    };
    // the launcher is argv[0] (a binary, or a script the kernel ran) or argv[1] after an interpreter
    // (`node <script>`), never a later argument nor a file another program opened
    let interpreter = |a: &str| {
        let base = a.rsplit(['/', '\\']).next().unwrap_or(a);
        base.starts_with("node") || matches!(base, "bun" | "deno" | "sh" | "bash" | "dash")
    };
    let launched = args.first().is_some_and(is_cli)
        || (args.first().is_some_and(|a| interpreter(a)) && args.get(1).is_some_and(is_cli));
    if !launched {
        return None;
    }
    if args.iter().any(|a| {
        matches!(
            *a,
            "plugin" | "--dump-config" | "--version" | "-v" | "--help" | "-h"
        )
    }) {
        return None;
    }
    let mut profile = None;
    for (i, a) in args.iter().enumerate() {
        if let Some(p) = a.strip_prefix("--profile=") {
            profile = Some(p.to_string());
        } else if *a == "--profile" {
            profile = args.get(i + 1).map(|p| p.to_string());
        }
    }
    Some(profile.filter(|p| !p.is_empty() && p.len() <= 128))
}

/// The DSH_HOME a process with this environment uses (`store::resolve_dsh_home`'s rule).
pub fn home_of_env(dsh_home: Option<&str>, home: Option<&str>) -> Option<PathBuf> {
    let expand = |p: &str| -> Option<PathBuf> {
        if p == "~" {
            home.map(PathBuf::from)
        } else if let Some(rest) = p.strip_prefix("~/") {
            home.map(|h| Path::new(h).join(rest))
        } else {
            Some(PathBuf::from(p))
        }
    };
    match dsh_home.map(str::trim).filter(|s| !s.is_empty()) {
        Some(d) => expand(d),
        None => home
            .filter(|h| !h.is_empty())
            .map(|h| Path::new(h).join(".dsh")),
    }
}

/// Field 22 of `/proc/<pid>/stat` (`starttime`, clock ticks after boot): read after the last `)`, so a
/// command name with spaces or parentheses cannot shift it.
pub fn start_ticks_of(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Field 4 of `/proc/<pid>/stat` (`ppid`), read after the last `)` as [`start_ticks_of`] reads its field.
pub fn parent_of(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Two paths name the same directory (as written, or once resolved).
pub fn same_path(a: &Path, b: &Path) -> bool {
    a == b
        || match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
}

/// How much later than a log's write time a process may have started and still be taken for its writer.
/// A start time is whole clock ticks after boot, rounded down (never later than the real start), but a
/// file's modification time comes from the kernel's coarse clock (`current_time()`), which runs up to one
/// timer tick behind (1–10 ms by `CONFIG_HZ`, 100–1000): a write a few ms after a start can carry a time
/// before it. Erring this way names a process that started within one tick after the write, which at
/// worst refuses a send as `held-elsewhere`; erring the other way would resume a session that process
/// holds.
pub const START_SLACK_MS: i64 = 10;

/// The first foreign host that started before the log was written (within [`START_SLACK_MS`]), and how
/// many others did: a process that started before the write is never missed.
pub fn holder_among(hosts: &[Host], log_written_ms: i64) -> Option<Holder> {
    let mut could: Vec<&Host> = hosts
        .iter()
        .filter(|h| h.started_ms <= log_written_ms.saturating_add(START_SLACK_MS))
        .collect();
    // the newest such process is the likeliest writer of the newest write
    could.sort_by(|a, b| b.started_ms.cmp(&a.started_ms).then(a.pid.cmp(&b.pid)));
    let first = (*could.first()?).clone();
    Some(Holder {
        host: first,
        log_written_ms,
        others: could.len() - 1,
    })
}

/// A foreign DSH host on `home` that may hold the session whose log is `log` (`known`: the pids that
/// publish presence, and so say what they hold). `None`: no evidence (or not Linux).
pub fn holder_of(home: &Path, log: &Path, known: &[u32]) -> Option<Holder> {
    let written = std::fs::metadata(log).ok()?.modified().ok()?;
    let written_ms = written
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as i64;
    let hosts = hosts_on(home, known);
    holder_among(&hosts, written_ms)
}

/// The DSH host processes of this user on `home`, except this process and `known`.
#[cfg(target_os = "linux")]
pub fn hosts_on(home: &Path, known: &[u32]) -> Vec<Host> {
    linux::hosts_on(Path::new("/proc"), home, known)
}

#[cfg(not(target_os = "linux"))]
pub fn hosts_on(_home: &Path, _known: &[u32]) -> Vec<Host> {
    Vec::new()
}

#[cfg(target_os = "linux")]
mod linux {
    use super::*;
    use std::fs::{self, File};
    use std::io::Read;
    use std::os::unix::fs::MetadataExt;

    fn read_capped(p: &Path, cap: u64) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        File::open(p).ok()?.take(cap).read_to_end(&mut out).ok()?;
        Some(out)
    }

    /// Boot time (ms since the epoch): the wall clock minus CLOCK_BOOTTIME, the clock `starttime` counts
    /// in (`/proc/stat` `btime` has whole seconds only, which would move a start by up to 1 s).
    // time_t and c_long are not i64 on every Linux target
    #[allow(clippy::unnecessary_cast)]
    fn boot_ms() -> Option<i64> {
        let ms = |clock| {
            let mut t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime writes one timespec into the value we own.
            (unsafe { libc::clock_gettime(clock, &mut t) } == 0)
                .then(|| t.tv_sec as i64 * 1000 + t.tv_nsec as i64 / 1_000_000)
        };
        Some(ms(libc::CLOCK_REALTIME)? - ms(libc::CLOCK_BOOTTIME)?)
    }

    fn ticks_per_sec() -> i64 {
        // SAFETY: sysconf reads a constant of the running system.
        let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        if t > 0 {
            t as i64
        } else {
            100
        }
    }

    /// The process at `dir` runs `exe` with the command line `cmdline` (read as bounded as the scan's own).
    fn same_program(dir: &Path, exe: &Path, cmdline: &[u8]) -> bool {
        fs::read_link(dir.join("exe")).is_ok_and(|e| e == exe)
            && read_capped(&dir.join("cmdline"), MAX_CMDLINE).is_some_and(|c| c == cmdline)
    }

    pub(super) fn hosts_on(proc_root: &Path, home: &Path, known: &[u32]) -> Vec<Host> {
        let Ok(rd) = fs::read_dir(proc_root) else {
            return Vec::new();
        };
        let me = std::process::id();
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        let Some(boot) = boot_ms() else {
            return Vec::new();
        };
        let tick = ticks_per_sec();
        let mut out = Vec::new();
        for entry in rd.flatten().take(MAX_PIDS) {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .filter(|n| !n.is_empty() && n.len() <= 10 && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if pid == me || known.contains(&pid) {
                continue;
            }
            let dir = entry.path();
            // same user only (another user's environ is not ours to read)
            if fs::metadata(&dir).map(|m| m.uid()).ok() != Some(uid) {
                continue;
            }
            // the executable is the kernel's word: `exec -a dsh sleep 300` names dsh in argv[0] only
            let Ok(exe) = fs::read_link(dir.join("exe")) else {
                continue;
            };
            if !super::super::verify::is_js_runtime(&exe) {
                continue;
            }
            let Some(raw) = read_capped(&dir.join("cmdline"), MAX_CMDLINE) else {
                continue;
            };
            let cmdline = String::from_utf8_lossy(&raw);
            let args: Vec<&str> = cmdline.split('\0').filter(|a| !a.is_empty()).collect();
            let Some(profile) = dsh_host_profile(&args) else {
                continue;
            };
            // a relative DSH_HOME is the host's, resolved against its own cwd (as rc.8 resolves it)
            let Some(its_home) = super::super::verify::home_of_process(proc_root, pid) else {
                continue;
            };
            if !same_path(&its_home, home) {
                continue;
            }
            let Some(stat) = read_capped(&dir.join("stat"), 4096) else {
                continue;
            };
            let stat = String::from_utf8_lossy(&stat);
            let Some(ticks) = start_ticks_of(&stat) else {
                continue;
            };
            // a host's fork before its exec: the host is its parent, not it
            if parent_of(&stat).is_some_and(|pp| {
                pp > 1 && same_program(&proc_root.join(pp.to_string()), &exe, &raw)
            }) {
                continue;
            }
            out.push(Host {
                pid,
                profile,
                started_ms: boot + (ticks as i64).saturating_mul(1000) / tick,
            });
        }
        out.sort_by_key(|h| h.pid);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dsh_host_is_the_cli_launched_as_a_host_not_a_one_shot() {
        let bin = "/usr/lib/node_modules/@deepseek-ai/dsh/lib/bin.js";
        assert_eq!(
            dsh_host_profile(&[
                "node",
                bin,
                "--profile",
                "plain",
                "--no-open",
                "--port",
                "0"
            ]),
            Some(Some("plain".into()))
        );
        assert_eq!(
            dsh_host_profile(&["node", bin, "--profile=web"]),
            Some(Some("web".into()))
        );
        assert_eq!(dsh_host_profile(&["/usr/local/bin/dsh", "web"]), Some(None));
        assert_eq!(
            dsh_host_profile(&["node", bin, "plugin", "--profile", "web", "add", "x.tgz"]),
            None
        );
        assert_eq!(
            dsh_host_profile(&["node", bin, "--profile", "web", "--dump-config"]),
            None
        );
        // the CLI named as a later argument (an editor, a grep) is not a host
        assert_eq!(dsh_host_profile(&["vim", bin]), None);
        assert_eq!(
            dsh_host_profile(&["node", "/srv/app/server.js", "dsh"]),
            None
        );
        assert_eq!(dsh_host_profile(&[]), None);
    }

    #[test]
    fn the_home_of_a_process_follows_resolve_dsh_home() {
        assert_eq!(
            home_of_env(Some("/h/x"), Some("/root")),
            Some(PathBuf::from("/h/x"))
        );
        assert_eq!(
            home_of_env(Some("~/d"), Some("/root")),
            Some(PathBuf::from("/root/d"))
        );
        assert_eq!(
            home_of_env(Some("  "), Some("/root")),
            Some(PathBuf::from("/root/.dsh"))
        );
        assert_eq!(
            home_of_env(None, Some("/u")),
            Some(PathBuf::from("/u/.dsh"))
        );
        assert_eq!(home_of_env(None, None), None);
    }

    #[test]
    fn only_a_process_started_before_the_last_write_may_hold_the_session() {
        let h = |pid, started_ms| Host {
            pid,
            profile: Some("plain".into()),
            started_ms,
        };
        // started after the log's last write: it never wrote it, so it does not hold it
        assert_eq!(holder_among(&[h(7, 10_000)], 5_000), None);
        // started before: it may have (created or resumed it since)
        let got = holder_among(&[h(7, 1_000), h(8, 4_000), h(9, 50_000)], 5_000).unwrap();
        assert_eq!((got.host.pid, got.others), (8, 1));
        assert_eq!(got.describe(), "pid 8, profile plain");
        // the same millisecond counts as before (start times are rounded down), and so does a start up to
        // START_SLACK_MS after the write's time (the file's time is the coarse clock's, up to a tick behind)
        assert!(holder_among(&[h(7, 5_000)], 5_000).is_some());
        assert!(holder_among(&[h(7, 5_000 + START_SLACK_MS)], 5_000).is_some());
        assert!(holder_among(&[h(7, 5_001 + START_SLACK_MS)], 5_000).is_none());
        assert_eq!(holder_among(&[], 5_000), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn start_ticks_and_parent_survive_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (dsh (web) 7) S 77 4242 4242 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 11 0 987654 1000 100";
        assert_eq!(start_ticks_of(stat), Some(987_654));
        assert_eq!(parent_of(stat), Some(77));
        assert_eq!(start_ticks_of("garbage"), None);
        assert_eq!(parent_of("garbage"), None);
        assert_eq!(parent_of("1 (x) S"), None);
    }

    /// A host that forks (a shell's subshell here, as node's `child_process` forks before its exec): the
    /// fork runs the same executable with the same command line and started later, so without the parent
    /// check it was a second host on this home and, for a log written in that instant, the newest writer.
    /// The scan names the parent only.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_hosts_fork_before_its_exec_is_not_a_second_host() {
        let home = tempfile::tempdir().unwrap();
        // the subshell is a fork that never execs (`read` and `:` are builtins); both wait on the held stdin
        let (node, script) = dsh_like(home.path(), "( read -r _; : )\nread -r _\n");
        let mut host = std::process::Command::new(&node)
            .arg(&script)
            .args(["--profile", "plain"])
            .env("DSH_HOME", home.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = host.id();
        let ppid = |p: u32| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| parent_of(&s))
        };
        let fork_of = |parent: u32| {
            std::fs::read_dir("/proc").ok().and_then(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                    .find(|p| ppid(*p) == Some(parent))
            })
        };
        // the fork is there once the host ran the script's first line (and the host has exec'd by then)
        let mut fork = None;
        for _ in 0..100 {
            fork = fork_of(pid);
            if fork.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let seen = linux::hosts_on(Path::new("/proc"), home.path(), &[]);
        let log = home.path().join("fresh.jsonl");
        std::fs::write(&log, b"x").unwrap();
        let holder = holder_of(home.path(), &log, &[]);
        let same = fork.map(|f| {
            let d = |p: u32| Path::new("/proc").join(p.to_string());
            (
                std::fs::read_link(d(f).join("exe")).ok()
                    == std::fs::read_link(d(pid).join("exe")).ok(),
                std::fs::read(d(f).join("cmdline")).ok()
                    == std::fs::read(d(pid).join("cmdline")).ok(),
            )
        });
        let _ = host.kill();
        let _ = host.wait();
        if let Some(f) = fork {
            // reap nothing: the fork is the host's child, ends when its stdin closes with the host
            let _ = std::process::Command::new("kill")
                .arg(f.to_string())
                .status();
        }
        let fork = fork.expect("the host's fork");
        // the fixture is what it claims: a fork with its parent's executable and command line
        assert_eq!(same, Some((true, true)), "the fork runs as its parent does");
        assert!(seen.iter().any(|h| h.pid == pid), "the host: {seen:?}");
        assert!(seen.iter().all(|h| h.pid != fork), "the fork: {seen:?}");
        assert_eq!(holder.map(|h| (h.host.pid, h.others)), Some((pid, 0)));
    }

    /// A DSH-like host's files under `dir`: `…/@deepseek-ai/dsh/lib/bin.js` holding `script`, and `bin/node`,
    /// a copy of the shell (the executable must be a node binary: the shell under that name runs the script).
    /// Returns (node, bin.js).
    #[cfg(target_os = "linux")]
    fn dsh_like(dir: &Path, script: &str) -> (PathBuf, PathBuf) {
        let lib = dir.join("pkg/node_modules/@deepseek-ai/dsh/lib");
        std::fs::create_dir_all(&lib).unwrap();
        let bin = lib.join("bin.js");
        std::fs::write(&bin, script).unwrap();
        let node = dir.join("bin/node");
        std::fs::create_dir_all(node.parent().unwrap()).unwrap();
        std::fs::copy("/bin/sh", &node).unwrap();
        (node, bin)
    }

    /// A real process of this user run as `<interpreter> …/@deepseek-ai/dsh/lib/bin.js --profile plain` (as
    /// `node` runs the DSH CLI) on a temp home is found, with its profile and a start time of about now; on
    /// another home, or when it publishes presence, it is not.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_live_dsh_like_process_on_this_home_is_found_in_proc() {
        let home = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        // waits on a builtin (`read` of its stdin, held open below), so nothing forks
        let (node, script) = dsh_like(home.path(), "read -r _\n");
        let t0 = base::clock::now_ms();
        let mut child = std::process::Command::new(&node)
            .arg(&script)
            .args(["--profile", "plain", "--no-open"])
            .env("DSH_HOME", home.path())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let pid = child.id();
        // the kernel shows the new argv once the exec is done
        let mut found = None;
        for _ in 0..50 {
            found = linux::hosts_on(Path::new("/proc"), home.path(), &[])
                .into_iter()
                .find(|h| h.pid == pid);
            if found.is_some() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let elsewhere = linux::hosts_on(Path::new("/proc"), other.path(), &[]);
        let published = linux::hosts_on(Path::new("/proc"), home.path(), &[pid]);
        // a log written now (after it started): it may hold that session; one written a minute before it
        // started: it does not
        let fresh = home.path().join("fresh.jsonl");
        let stale = home.path().join("stale.jsonl");
        std::fs::write(&fresh, b"x").unwrap();
        std::fs::write(&stale, b"x").unwrap();
        std::fs::File::options()
            .append(true)
            .open(&stale)
            .unwrap()
            .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
            .unwrap();
        let on_fresh = holder_of(home.path(), &fresh, &[]).filter(|x| x.host.pid == pid);
        let on_stale = holder_of(home.path(), &stale, &[]).filter(|x| x.host.pid == pid);
        let _ = child.kill();
        let _ = child.wait();
        let h = found.expect("the DSH-like process on this home");
        assert_eq!(h.profile.as_deref(), Some("plain"));
        assert!(
            (h.started_ms - t0).abs() < 5_000,
            "started {} vs now {t0}",
            h.started_ms
        );
        assert!(elsewhere.iter().all(|h| h.pid != pid), "another home");
        assert!(
            published.iter().all(|h| h.pid != pid),
            "a process that publishes presence"
        );
        assert!(on_fresh.is_some(), "a log written after it started");
        assert!(on_stale.is_none(), "a log written before it started");
    }

    /// Issue 16 #6: `exec -a dsh sleep 300` on this home is no DSH host (its executable is `sleep`), and a
    /// host started with a relative DSH_HOME is found (resolved against its own cwd, not ours).
    #[cfg(target_os = "linux")]
    #[test]
    fn the_scan_checks_the_executable_and_resolves_a_relative_home_against_the_hosts_cwd() {
        use std::os::unix::process::CommandExt;
        let base = tempfile::tempdir().unwrap();
        let home = base.path().join("h");
        std::fs::create_dir_all(&home).unwrap();
        // waits on a builtin (`read` of its stdin, held open below), so nothing forks
        let (node, script) = dsh_like(base.path(), "read -r _\n");
        // a sleep dressed as dsh on this home
        let mut fake = std::process::Command::new("sleep")
            .arg0("dsh")
            .arg("30")
            .env("DSH_HOME", &home)
            .spawn()
            .unwrap();
        // a host whose DSH_HOME is "h", relative to its cwd (the base folder)
        let mut real = std::process::Command::new(&node)
            .arg(&script)
            .current_dir(base.path())
            .env("DSH_HOME", "h")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut seen = Vec::new();
        for _ in 0..50 {
            seen = linux::hosts_on(Path::new("/proc"), &home, &[]);
            if seen.iter().any(|h| h.pid == real.id()) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let (fake_pid, real_pid) = (fake.id(), real.id());
        for c in [&mut fake, &mut real] {
            let _ = c.kill();
            let _ = c.wait();
        }
        assert!(
            seen.iter().all(|h| h.pid != fake_pid),
            "exec -a dsh sleep is no host: {seen:?}"
        );
        assert!(
            seen.iter().any(|h| h.pid == real_pid),
            "the relative-home host: {seen:?}"
        );
    }
}
