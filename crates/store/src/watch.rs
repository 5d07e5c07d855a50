//! Change notification for the listing memo (`index::list_cached`): one inotify instance per
//! home (Linux), a watch on each session folder the memo remembers, a background thread that
//! keeps the kernel queue drained, and a dirty set the next listing takes. A listing also drains
//! the queue itself before it decides anything: every change finished before the listing starts
//! has its event queued by then (inotify queues in the writer's system call), so a memo covered
//! by a watch needs no periodic re-check.
//!
//! Any doubt ends the watcher and the home goes back to the periodic sweep (`LIST_STALE`): a
//! queue overflow, an unmount, a watch limit (`max_user_watches`, or more session folders than
//! [`cap`] allows: the watches are given back so other programs keep theirs), a failed read, a
//! file system whose changes can come from elsewhere (NFS, SMB, FUSE, 9p, Ceph, ...). A folder
//! that cannot be watched alone (a link, a folder gone meanwhile) is swept as before.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use crate::error::WatchOff;

/// After the watcher of a home ended, how long that home is swept before a new one is tried.
pub const WATCH_RETRY: Duration = Duration::from_secs(60);
pub use crate::error::NO_WATCH;

/// Run by the watcher's thread once the watch on a folder (its argument) is in place: true when the folder is
/// still as the listing that asked for the watch saw it (then it is current from that moment on,
/// the events keep it so, and the next listing need not look at it); false marks it dirty.
pub type Verify = Box<dyn FnOnce(&Path) -> bool + Send>;

/// Run by the watcher's thread after each batch of [`Verify`] checks (outside its lock): the
/// listing memo takes what checked out while no listing runs, so no listing pays for thousands
/// of them at once.
pub type AfterChecks = Box<dyn Fn() + Send>;

#[cfg(target_os = "linux")]
pub use imp::{Pause, Watch};

#[cfg(not(target_os = "linux"))]
pub use stub::{Pause, Watch};

#[cfg(not(target_os = "linux"))]
mod stub {
    use super::*;

    /// No change notification here: every home is swept.
    pub struct Watch {
        pub epoch: u64,
    }

    impl Watch {
        pub fn start(_home: &Path) -> Result<Watch, WatchOff> {
            Err(WatchOff::Unsupported)
        }
        #[cfg(test)]
        pub fn start_capped(home: &Path, _cap: usize) -> Result<Watch, WatchOff> {
            Self::start(home)
        }
        pub fn take(&self) -> Result<HashSet<PathBuf>, WatchOff> {
            Ok(HashSet::new())
        }
        pub fn since_ok(&self, dirs: &[&Path], _now: Instant) -> Vec<bool> {
            vec![false; dirs.len()]
        }
        pub fn ask(&self, _dirs: Vec<(&Path, Option<Verify>)>) {}
        pub fn on_checked(&self, _f: AfterChecks) {}
        pub fn pause(&self) -> Pause {
            Pause
        }
    }

    /// See the Linux `Pause`.
    pub struct Pause;
}

#[cfg(target_os = "linux")]
mod imp {
    use super::*;
    use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask, Watches};
    use std::collections::HashMap;
    use std::os::unix::io::AsRawFd;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

    static EPOCH: AtomicU64 = AtomicU64::new(1);

    /// Most asked-for watches the thread adds (and checks) in one go: a listing takes the lock
    /// at its start, and waits for at most one batch in progress. Batches follow each other
    /// without a pause (every folder waits for its watch; until then the 2 s rule may sweep it),
    /// except while a listing runs ([`Watch::pause`]).
    const BATCH: usize = 64;

    /// Most watches one home may hold: a quarter of the user's `max_user_watches` (other programs
    /// share it), at most 65,536.
    fn cap() -> usize {
        let max = std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(8192);
        (max / 4).min(65_536)
    }

    const MASK: WatchMask = WatchMask::MODIFY
        .union(WatchMask::ATTRIB)
        .union(WatchMask::CREATE)
        .union(WatchMask::DELETE)
        .union(WatchMask::MOVED_FROM)
        .union(WatchMask::MOVED_TO)
        .union(WatchMask::DELETE_SELF)
        .union(WatchMask::MOVE_SELF)
        .union(WatchMask::ONLYDIR)
        .union(WatchMask::DONT_FOLLOW);

    struct State {
        inotify: Inotify,
        watches: Watches,
        by_wd: HashMap<WatchDescriptor, Arc<Path>>,
        /// Each watched session folder: its watch and when the watch was in place.
        by_dir: HashMap<Arc<Path>, (WatchDescriptor, Instant)>,
        /// Folders a listing asked to watch (added by the thread), each with its check.
        pending: HashMap<PathBuf, Option<Verify>>,
        /// Folders changed since the last listing took the set.
        dirty: HashSet<PathBuf>,
        /// Checks the thread is running outside the lock (tests wait for them).
        checking: usize,
        /// Why this watcher can no longer be trusted.
        broken: Option<WatchOff>,
        cap: usize,
    }

    struct Shared {
        state: Mutex<State>,
        fd: i32,
        stop: AtomicBool,
        after: Mutex<Option<AfterChecks>>,
        /// Listings of this home running now ([`Watch::pause`]): the thread adds and checks no
        /// watches meanwhile (it only keeps the queue drained), so a listing neither waits for
        /// its lock nor shares a core with its checks.
        listing: AtomicUsize,
    }

    /// A listing in progress (see `Shared::listing`); dropping it lets the thread go on.
    pub struct Pause(Arc<Shared>);

    impl Drop for Pause {
        fn drop(&mut self) {
            self.0.listing.fetch_sub(1, Ordering::Release);
        }
    }

    /// The watcher of one home (owned by its memo). Dropping it stops its thread, which closes
    /// the inotify descriptor (every watch goes with it).
    pub struct Watch {
        shared: Arc<Shared>,
        /// Memos covered by this watcher carry its epoch (a new watcher covers nothing yet).
        pub epoch: u64,
    }

    impl Drop for Watch {
        fn drop(&mut self) {
            self.shared.stop.store(true, Ordering::Relaxed);
        }
    }

    /// File systems whose changes may be made by another machine (or a user-space server) that
    /// inotify never hears of.
    fn remote_fs(p: &Path) -> Option<WatchOff> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
        let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
        // SAFETY: a NUL-terminated path and a buffer of the right type, read only on success.
        let r = unsafe { libc::statfs(c.as_ptr(), st.as_mut_ptr()) };
        if r != 0 {
            return Some(WatchOff::StatfsFailed);
        }
        // SAFETY: see above.
        let st = unsafe { st.assume_init() };
        #[allow(clippy::unnecessary_cast)] // `f_type`'s type differs between targets
        let t = st.f_type as i64 as u32;
        const REMOTE: [u32; 12] = [
            0x6969,      // NFS
            0x517B,      // SMB
            0xFF53_4D42, // CIFS
            0xFE53_4D42, // SMB2
            0x6573_5546, // FUSE
            0x0102_1997, // 9p
            0x00C3_6400, // Ceph
            0x5346_414F, // AFS
            0x6B41_4653, // kAFS
            0x7375_7245, // Coda
            0x7461_636F, // OCFS2
            0x0116_1970, // GFS2
        ];
        REMOTE
            .contains(&t)
            .then_some(WatchOff::RemoteFs { magic: t })
    }

    impl Watch {
        /// A watcher for `home` (nothing watched yet: [`Watch::ask`] asks for folders).
        pub fn start(home: &Path) -> Result<Watch, WatchOff> {
            if std::env::var_os(NO_WATCH).is_some_and(|v| !v.is_empty() && v != "0") {
                return Err(WatchOff::Disabled);
            }
            Self::start_capped(home, cap())
        }

        pub fn start_capped(home: &Path, cap: usize) -> Result<Watch, WatchOff> {
            let root = home.join("sessions");
            if let Some(why) = remote_fs(if root.is_dir() { &root } else { home }) {
                return Err(why);
            }
            let inotify = Inotify::init().map_err(|e| WatchOff::Init(e.into()))?;
            let fd = inotify.as_raw_fd();
            let watches = inotify.watches();
            let shared = Arc::new(Shared {
                state: Mutex::new(State {
                    inotify,
                    watches,
                    by_wd: HashMap::new(),
                    by_dir: HashMap::new(),
                    pending: HashMap::new(),
                    dirty: HashSet::new(),
                    checking: 0,
                    broken: None,
                    cap,
                }),
                fd,
                stop: AtomicBool::new(false),
                after: Mutex::new(None),
                listing: AtomicUsize::new(0),
            });
            let s = shared.clone();
            std::thread::Builder::new()
                .name("dsh-list-watch".into())
                .spawn(move || run(&s))
                .map_err(|e| WatchOff::Thread(e.into()))?;
            Ok(Watch {
                shared,
                epoch: EPOCH.fetch_add(1, Ordering::Relaxed),
            })
        }

        fn lock(&self) -> MutexGuard<'_, State> {
            self.shared.state.lock().unwrap_or_else(|p| p.into_inner())
        }

        /// The folders changed since the last call (the queue drained first). Err: this watcher
        /// can no longer be trusted (the reason).
        pub fn take(&self) -> Result<HashSet<PathBuf>, WatchOff> {
            let mut st = self.lock();
            drain(&mut st);
            match &st.broken {
                Some(why) => Err(why.clone()),
                None => Ok(std::mem::take(&mut st.dirty)),
            }
        }

        /// For each folder: watched since before `now` (a check that starts at `now` or later is
        /// then kept current by the events).
        pub fn since_ok(&self, dirs: &[&Path], now: Instant) -> Vec<bool> {
            let st = self.lock();
            dirs.iter()
                .map(|d| st.by_dir.get(*d).is_some_and(|(_, since)| *since <= now))
                .collect()
        }

        /// Ask for these folders to be watched. The thread adds them, then runs each one's
        /// [`Verify`] (outside the lock): a folder that checks out is current from then on; one
        /// that does not, or has no check, is marked dirty (the next listing looks at it once
        /// more, under watch). More than the cap ends the watcher.
        pub fn ask(&self, dirs: Vec<(&Path, Option<Verify>)>) {
            let mut st = self.lock();
            let st = &mut *st;
            for (d, verify) in dirs {
                // a folder watched already (its watch landed during the asking listing) still gets
                // its check: that listing may have looked at it before the watch was there
                if verify.is_none() && st.by_dir.contains_key(d) {
                    continue;
                }
                let full = st.by_dir.len() + st.pending.len() >= st.cap;
                // one lookup: a cold listing asks for 20,000 folders
                match st.pending.entry(d.to_path_buf()) {
                    std::collections::hash_map::Entry::Occupied(_) => continue,
                    std::collections::hash_map::Entry::Vacant(_) if full => {}
                    std::collections::hash_map::Entry::Vacant(v) => {
                        v.insert(verify);
                        continue;
                    }
                }
                let cap = st.cap;
                st.broken.get_or_insert(WatchOff::TooMany { cap });
                st.pending.clear();
                return;
            }
        }

        /// A listing starts: the thread holds back its adds and checks until the guard is dropped
        /// (take it before waiting for the listing's locks).
        pub fn pause(&self) -> Pause {
            self.shared.listing.fetch_add(1, Ordering::Acquire);
            Pause(self.shared.clone())
        }

        /// Run `f` after each batch of checks (see [`AfterChecks`]).
        pub fn on_checked(&self, f: AfterChecks) {
            *self.shared.after.lock().unwrap_or_else(|p| p.into_inner()) = Some(f);
        }

        /// Feed one event as the kernel would (tests: an overflow).
        #[cfg(test)]
        pub fn inject(&self, mask: EventMask) {
            let mut st = self.lock();
            apply(&mut st, None, mask);
        }

        /// Wait (≤ 10 s) until every folder asked for has been watched and checked.
        #[cfg(test)]
        pub fn settle(&self) {
            (self.settler())()
        }

        /// [`Watch::settle`] as a closure that does not borrow the watcher (tests wait with it
        /// while not holding the listing memo, which the thread's [`AfterChecks`] then takes).
        #[cfg(test)]
        pub fn settler(&self) -> impl Fn() {
            let shared = self.shared.clone();
            move || settle_shared(&shared)
        }
    }

    #[cfg(test)]
    fn settle_shared(shared: &Shared) {
        {
            for _ in 0..1000 {
                {
                    let st = shared.state.lock().unwrap_or_else(|p| p.into_inner());
                    if st.pending.is_empty() && st.checking == 0 {
                        return;
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }

    fn drain(st: &mut State) {
        let mut buf = [0u8; 4096];
        loop {
            match st.inotify.read_events(&mut buf) {
                Ok(events) => {
                    let mut n = 0;
                    let got: Vec<(WatchDescriptor, EventMask)> =
                        events.map(|e| (e.wd, e.mask)).collect();
                    for (wd, mask) in got {
                        n += 1;
                        apply(st, Some(wd), mask);
                    }
                    if n == 0 {
                        return;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    st.broken.get_or_insert_with(|| WatchOff::Read(e.into()));
                    return;
                }
            }
        }
    }

    fn apply(st: &mut State, wd: Option<WatchDescriptor>, mask: EventMask) {
        if mask.contains(EventMask::Q_OVERFLOW) {
            st.broken.get_or_insert(WatchOff::Overflow);
            return;
        }
        if mask.contains(EventMask::UNMOUNT) {
            st.broken.get_or_insert(WatchOff::Unmounted);
            return;
        }
        let Some(wd) = wd else { return };
        let Some(dir) = st.by_wd.get(&wd).cloned() else {
            return;
        };
        st.dirty.insert(dir.to_path_buf());
        if mask.intersects(EventMask::IGNORED | EventMask::DELETE_SELF | EventMask::MOVE_SELF) {
            // The folder at this path is gone or is another one now: not watched any more.
            if !mask.contains(EventMask::IGNORED) {
                let _ = st.watches.remove(wd.clone());
            }
            st.by_wd.remove(&wd);
            if st.by_dir.get(&dir).is_some_and(|(w, _)| *w == wd) {
                st.by_dir.remove(&dir);
            }
        }
    }

    /// Add up to `n` asked-for watches. A folder that cannot be watched (a link, gone, not a
    /// folder) stays swept; a limit ends the watcher. Returns the checks to run now that their
    /// watches are in place.
    fn add_pending(st: &mut State, n: usize) -> Vec<(PathBuf, Verify)> {
        let batch: Vec<PathBuf> = st.pending.keys().take(n).cloned().collect();
        let mut checks = Vec::new();
        for p in batch {
            let verify = st.pending.remove(&p).flatten();
            if st.broken.is_some() {
                continue;
            }
            if st.by_dir.contains_key(p.as_path()) {
                checks.extend(verify.map(|v| (p, v)));
                continue;
            }
            match st.watches.add(&p, MASK) {
                Ok(wd) => {
                    if st.by_wd.contains_key(&wd) {
                        // the same folder under another path (an alias): keep the first one
                        continue;
                    }
                    let p: Arc<Path> = Arc::from(p.as_path());
                    st.by_wd.insert(wd.clone(), p.clone());
                    st.by_dir.insert(p.clone(), (wd, Instant::now()));
                    match verify {
                        Some(v) => checks.push((p.to_path_buf(), v)),
                        // the next listing looks at it once more, now under watch
                        None => {
                            st.dirty.insert(p.to_path_buf());
                        }
                    }
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                    st.broken = Some(WatchOff::WatchLimit);
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) => {
                    st.broken = Some(WatchOff::NoKernelMemory);
                }
                Err(_) => {}
            }
        }
        if st.broken.is_some() {
            st.pending.clear();
        }
        checks
    }

    /// Wait while a listing runs (see `Shared::listing`); at most `LIST_WAIT` in all, so a
    /// listing that never ends (a panic holding the guard is not possible, but a hung one is) does
    /// not stop the watches forever.
    fn hold_back(s: &Shared) {
        const LIST_WAIT: Duration = Duration::from_secs(5);
        let t0 = Instant::now();
        while s.listing.load(Ordering::Acquire) > 0
            && !s.stop.load(Ordering::Relaxed)
            && t0.elapsed() < LIST_WAIT
        {
            std::thread::sleep(Duration::from_micros(500));
        }
    }

    fn run(s: &Shared) {
        while !s.stop.load(Ordering::Relaxed) {
            let busy = {
                let st = s.state.lock().unwrap_or_else(|p| p.into_inner());
                !st.pending.is_empty() && st.broken.is_none()
            };
            if busy {
                hold_back(s);
            } else {
                let mut pfd = libc::pollfd {
                    fd: s.fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; the descriptor lives as long as `s` (held here).
                unsafe { libc::poll(&mut pfd, 1, 200) };
                // a session being written wakes this on every write: batch them (a listing
                // drains the queue itself, so this only bounds the queue, far below overflow)
                std::thread::sleep(Duration::from_millis(50));
            }
            let mut st = s.state.lock().unwrap_or_else(|p| p.into_inner());
            drain(&mut st);
            // Small batches: a listing waits for this lock at its start.
            let checks = add_pending(&mut st, BATCH);
            if !checks.is_empty() {
                // The checks `stat` the folders: outside the lock, the watches already in place
                // (a change from now on is an event; one before shows in the check).
                st.checking = checks.len();
                drop(st);
                hold_back(s);
                let failed: Vec<PathBuf> = checks
                    .into_iter()
                    .filter_map(|(p, v)| (!v(&p)).then_some(p))
                    .collect();
                if let Some(f) = s.after.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                    f();
                }
                st = s.state.lock().unwrap_or_else(|p| p.into_inner());
                st.dirty.extend(failed);
                st.checking = 0;
            }
            if st.broken.is_some() {
                // Give the watches back now (other programs share the user's limit); the next
                // listing ends this watcher.
                let wds: Vec<WatchDescriptor> = st.by_wd.drain().map(|(wd, _)| wd).collect();
                for wd in wds {
                    let _ = st.watches.remove(wd);
                }
                st.by_dir.clear();
                drop(st);
                while !s.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                }
                return;
            }
        }
    }
}
