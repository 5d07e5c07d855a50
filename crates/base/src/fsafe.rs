//! Opening files under DSH_HOME, which may be hostile: a FIFO, a link to `/dev/zero`, a link out of
//! the home, a file of gigabytes. Every open here is non-blocking (`O_NONBLOCK`: a FIFO with no
//! writer cannot hang the open), then checked with `fstat` on the opened descriptor (no race between
//! the check and the read): only a regular file is accepted, and only up to a size cap.
//! [`Follow::No`] adds `O_NOFOLLOW` (a symbolic link as the last component is refused).

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::path::Path;

/// Whether the last path component may be a symbolic link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    Yes,
    No,
}

fn kind_of(m: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = m.file_type();
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if m.is_dir() {
        "a directory"
    } else if m.file_type().is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

/// Why a file or folder under DSH_HOME was not used: what it is instead of what was asked. Inside an
/// `io::Error` of kind `InvalidData` (its `Display` is the error's text; `get_ref` gives it back).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// A symbolic link where none is followed.
    Link,
    /// Not a regular file: a FIFO, a device, a socket, a directory.
    NotRegular { kind: &'static str },
    /// A regular file past the reader's cap.
    TooBig { len: u64, cap: u64 },
    /// Grew past the cap while it was read.
    Grew { cap: u64 },
    /// Not a directory.
    NotDir { kind: &'static str },
    /// Owned by another user.
    ForeignOwner { uid: u32 },
    /// Its metadata could not be read (the system's reason).
    Unreadable(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Link => f.write_str("is a symbolic link (not followed)"),
            Refused::NotRegular { kind } => write!(f, "is {kind}, not a regular file"),
            Refused::TooBig { len, cap } => write!(
                f,
                "is {len} bytes, over the {} cap",
                crate::text::human_bytes(*cap)
            ),
            Refused::Grew { cap } => write!(
                f,
                "grew past the {} cap while it was read",
                crate::text::human_bytes(*cap)
            ),
            Refused::NotDir { kind } => write!(f, "is {kind}, not a directory"),
            Refused::ForeignOwner { uid } => write!(f, "is owned by another user (uid {uid})"),
            Refused::Unreadable(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Refused {}

/// An error whose text is ours (`kind` keeps callers' `NotFound` checks working).
fn refused(why: Refused) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Is this error the one `O_NOFOLLOW` gives for a symbolic link (ELOOP)?
fn is_link_error(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Open `path` read-only without blocking; Err unless it is a regular file of at most `max_len`
/// bytes (`None`: no cap). The error text names what the file is instead.
pub fn open_regular(
    path: &Path,
    follow: Follow,
    max_len: Option<u64>,
) -> io::Result<(File, Metadata)> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut flags = libc::O_NONBLOCK | libc::O_CLOEXEC;
        if follow == Follow::No {
            flags |= libc::O_NOFOLLOW;
        }
        o.custom_flags(flags);
    }
    let f = o.open(path).map_err(|e| {
        if follow == Follow::No && is_link_error(&e) {
            refused(Refused::Link)
        } else {
            e
        }
    })?;
    let m = f.metadata()?;
    if !m.is_file() {
        return Err(refused(Refused::NotRegular { kind: kind_of(&m) }));
    }
    if let Some(cap) = max_len {
        if m.len() > cap {
            return Err(refused(Refused::TooBig { len: m.len(), cap }));
        }
    }
    Ok((f, m))
}

/// Read a whole regular file of at most `max_len` bytes (never more, even if it grows meanwhile).
pub fn read_capped(path: &Path, follow: Follow, max_len: u64) -> io::Result<(Vec<u8>, Metadata)> {
    let (f, m) = open_regular(path, follow, Some(max_len))?;
    let mut buf = Vec::with_capacity(m.len() as usize);
    f.take(max_len + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > max_len {
        return Err(refused(Refused::Grew { cap: max_len }));
    }
    Ok((buf, m))
}

/// The effective user id (`None` off unix).
pub fn my_uid() -> Option<u32> {
    #[cfg(unix)]
    {
        // SAFETY: geteuid has no preconditions and cannot fail.
        Some(unsafe { libc::geteuid() })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Owned by someone else than this process's user?
pub fn foreign_owner(m: &Metadata) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = my_uid()?;
        (m.uid() != me).then_some(m.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        None
    }
}

/// Permission bits (0 off unix).
pub fn mode_of(m: &Metadata) -> u32 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        m.permissions().mode() & 0o7777
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        0
    }
}

/// A directory we may keep private files in: a real directory (not a symbolic link), owned by this
/// user. Err names the problem.
pub fn check_private_dir(d: &Path) -> Result<Metadata, Refused> {
    let m = fs::symlink_metadata(d).map_err(|e| Refused::Unreadable(e.to_string()))?;
    check_private_meta(&m)?;
    Ok(m)
}

/// [`check_private_dir`] of metadata in hand (read without following a link): one `stat` less for a
/// caller that has it already.
pub fn check_private_meta(m: &Metadata) -> Result<(), Refused> {
    if m.file_type().is_symlink() {
        return Err(Refused::Link);
    }
    if !m.is_dir() {
        return Err(Refused::NotDir { kind: kind_of(m) });
    }
    if let Some(uid) = foreign_owner(m) {
        return Err(Refused::ForeignOwner { uid });
    }
    Ok(())
}

/// Is `p` inside `root` once both are resolved (links followed)? Used for directories a walk
/// would enter through a symbolic link.
pub fn resolves_inside(p: &Path, root: &Path) -> bool {
    match (fs::canonicalize(p), fs::canonicalize(root)) {
        (Ok(p), Ok(r)) => p.starts_with(r),
        _ => false,
    }
}

/// A private folder (the plugin's, or one of its subfolders): created 0700 when missing; refused when it is a link, not a directory, or
/// owned by someone else (then nothing is written through it); tightened to 0700 when looser.
#[cfg(unix)]
pub fn ensure_private_dir(d: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    // (one `stat` when the folder is there: the common case of every ledger line and record)
    let m = match fs::symlink_metadata(d) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(d)?;
            check_private_dir(d).map_err(io::Error::other)?
        }
        Err(e) => return Err(e),
        Ok(m) => {
            check_private_meta(&m).map_err(io::Error::other)?;
            m
        }
    };
    if mode_of(&m) & 0o077 != 0 {
        fs::set_permissions(d, fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

#[cfg(not(unix))]
pub fn ensure_private_dir(d: &Path) -> io::Result<()> {
    fs::create_dir_all(d)
}

/// [`ensure_private_dir`] for each folder of `levels`, outermost first (the plugin's folder, then
/// its subfolders): the first that fails, with its error.
pub fn ensure_private_dirs(
    levels: impl IntoIterator<Item = std::path::PathBuf>,
) -> Result<(), (std::path::PathBuf, io::Error)> {
    for d in levels {
        if let Err(e) = ensure_private_dir(&d) {
            return Err((d, e));
        }
    }
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn an_unnamed_file_is_invisible_until_linked_never_replaces_and_leaves_nothing_when_dropped() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let names = || {
            let mut v: Vec<String> = fs::read_dir(d.path())
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            v.sort();
            v
        };
        let u = Unnamed::create_in(d.path()).expect("ext4/tmpfs/xfs make O_TMPFILE files");
        assert!(names().is_empty(), "made, not named: no reader sees it");
        u.link(&d.path().join("a"), b"one").unwrap();
        assert_eq!(names(), ["a"]);
        assert_eq!(fs::read(d.path().join("a")).unwrap(), b"one");
        let mode = fs::metadata(d.path().join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // never replaces what is there
        let e = Unnamed::create_in(d.path())
            .unwrap()
            .link(&d.path().join("a"), b"two")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(fs::read(d.path().join("a")).unwrap(), b"one");
        // a name outside its folder is refused, and nothing is written anywhere
        let other = tempfile::tempdir().unwrap();
        let e = Unnamed::create_in(d.path())
            .unwrap()
            .link(&other.path().join("b"), b"x")
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(fs::read_dir(other.path()).unwrap().count(), 0);
        // dropped unnamed: nothing left
        drop(Unnamed::create_in(d.path()).unwrap());
        assert_eq!(names(), ["a"]);
        // a link where the folder was is refused (O_NOFOLLOW)
        let link = other.path().join("l");
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        assert!(Unnamed::create_in(&link).is_none());
    }

    /// A prewritten file is named holding exactly the bytes it is linked with: the same bytes (written
    /// once, not again), other bytes (longer or shorter: the prewrite is replaced, nothing of it left),
    /// and after a second prewrite; still invisible until linked.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_prewritten_unnamed_file_is_named_with_exactly_the_linked_bytes() {
        let d = tempfile::tempdir().unwrap();
        let read = |n: &str| fs::read(d.path().join(n)).unwrap();
        let mut u = Unnamed::create_in(d.path()).unwrap();
        u.prewrite(b"the record").unwrap();
        assert_eq!(
            fs::read_dir(d.path()).unwrap().count(),
            0,
            "prewritten, not named"
        );
        u.link(&d.path().join("same"), b"the record").unwrap();
        assert_eq!(read("same"), b"the record");
        for (name, pre, linked) in [
            (
                "shorter",
                &b"a longer speculative record"[..],
                &b"short"[..],
            ),
            ("longer", b"short", b"a longer record than the prewrite"),
        ] {
            let mut u = Unnamed::create_in(d.path()).unwrap();
            u.prewrite(pre).unwrap();
            u.link(&d.path().join(name), linked).unwrap();
            assert_eq!(read(name), linked, "{name}");
        }
        let mut u = Unnamed::create_in(d.path()).unwrap();
        u.prewrite(b"first, longer one").unwrap();
        u.prewrite(b"second").unwrap();
        u.link(&d.path().join("twice"), b"second").unwrap();
        assert_eq!(read("twice"), b"second");
    }

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&p, Follow::Yes, None).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
    }

    #[test]
    fn a_link_to_dev_zero_is_refused_and_links_are_refused_without_follow() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("z");
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        let e = open_regular(&p, Follow::Yes, None).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        let real = d.path().join("real");
        std::fs::write(&real, "x").unwrap();
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&real, &l).unwrap();
        assert!(open_regular(&l, Follow::Yes, None).is_ok());
        let e = open_regular(&l, Follow::No, None).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
    }

    #[test]
    fn the_size_cap_holds() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big");
        std::fs::write(&p, vec![b'a'; 2048]).unwrap();
        assert!(read_capped(&p, Follow::Yes, 2048).is_ok());
        let e = read_capped(&p, Follow::Yes, 1024).unwrap_err();
        assert!(e.to_string().contains("over the 1.0 KiB cap"), "{e}");
    }

    #[test]
    fn write_private_replaces_or_keeps_and_leaves_no_temp_file() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let put = |sync, replace| Put { sync, replace };
        write_private(d.path(), &p, b"one", put(true, true)).unwrap();
        write_private(d.path(), &p, b"two", put(false, true)).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let e = write_private(d.path(), &p, b"three", put(false, false)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        let q = d.path().join("g");
        write_private(d.path(), &q, b"new", put(true, false)).unwrap();
        assert_eq!(std::fs::read(&q).unwrap(), b"new");
        assert_eq!(
            std::fs::metadata(&q).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let names: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
    }

    #[test]
    fn private_dir_refuses_links() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("real");
        std::fs::create_dir(&real).unwrap();
        assert!(check_private_dir(&real).is_ok());
        let l = d.path().join("l");
        std::os::unix::fs::symlink(&real, &l).unwrap();
        assert_eq!(check_private_dir(&l).unwrap_err(), Refused::Link);
        assert_eq!(
            Refused::Link.to_string(),
            "is a symbolic link (not followed)"
        );
    }

    #[test]
    fn a_lock_held_elsewhere_is_waited_for_only_so_long() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.lock");
        let held = Flock::lock(&p).unwrap();
        let t0 = std::time::Instant::now();
        let e = Flock::lock_within(&p, std::time::Duration::from_millis(60))
            .err()
            .expect("held elsewhere: not taken");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(t0.elapsed() >= std::time::Duration::from_millis(60));
        assert!(Flock::try_lock(&p).unwrap().is_none());
        drop(held);
        let _l = Flock::lock_within(&p, std::time::Duration::from_millis(60)).unwrap();
    }
}

/// A new file only this user can read or write (0600), created exclusively and never through a link
/// (`O_NOFOLLOW`): the temp file of an atomic write into the plugin's own folders (presence, mailbox).
#[cfg(unix)]
pub fn create_private(p: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(p)
}

#[cfg(not(unix))]
pub fn create_private(p: &Path) -> io::Result<File> {
    OpenOptions::new().write(true).create_new(true).open(p)
}

/// A private (0600) file with no name yet: its inode is made by [`Unnamed::create_in`] (Linux
/// `O_TMPFILE`, in a folder that is not a link), its bytes written by [`Unnamed::link`] (or before it,
/// by [`Unnamed::prewrite`]) and its name given only by [`Unnamed::link`]. Until then no reader of the
/// folder can see it, and it leaves nothing behind:
/// dropped unnamed, or with the process, the system frees it. Making an inode is the expensive part
/// of a small private write (~0.3–0.6 ms of system CPU on some ext4 volumes, against ~10–30 µs for
/// the write and the link), so a caller can make it while it waits on something else.
#[derive(Debug)]
pub struct Unnamed {
    file: File,
    dir: std::path::PathBuf,
    /// What [`Unnamed::prewrite`] put in the file: `Some(bytes)` when they are all there, `None` when
    /// nothing was written or a write failed part way ([`Unnamed::link`] then starts the file afresh).
    prewritten: Option<Vec<u8>>,
    /// A prewrite was attempted (the file may hold some bytes).
    touched: bool,
}

impl Unnamed {
    /// An unnamed private file in `dir`; `None` where the system or the file system makes none
    /// (not Linux, no `O_TMPFILE` support) or `dir` cannot take one: the caller writes through
    /// [`write_private`] instead.
    #[cfg(target_os = "linux")]
    pub fn create_in(dir: &Path) -> Option<Unnamed> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .write(true)
            .mode(0o600)
            .custom_flags(libc::O_TMPFILE | libc::O_NOFOLLOW)
            .open(dir)
            .ok()?;
        Some(Unnamed {
            file,
            dir: dir.to_path_buf(),
            prewritten: None,
            touched: false,
        })
    }

    #[cfg(not(target_os = "linux"))]
    pub fn create_in(_dir: &Path) -> Option<Unnamed> {
        None
    }

    /// The folder it was made in (its name can only be given there).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Write `bytes` and give the file the name `dest`, never replacing a file there (an existing
    /// `dest` fails with [`io::ErrorKind::AlreadyExists`], for the caller to judge, as
    /// [`write_private`] without `replace`). `dest` must be in [`Unnamed::dir`]. Any other failure
    /// leaves no name (the caller may write through [`write_private`] instead).
    pub fn link(mut self, dest: &Path, bytes: &[u8]) -> io::Result<()> {
        if dest.parent() != Some(self.dir.as_path()) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the name is not in the folder the file was made in",
            ));
        }
        if self.prewritten.as_deref() != Some(bytes) {
            self.write_afresh(bytes)?;
        }
        link_fd(&self.file, dest)
    }

    /// Write `bytes` now, while the file has no name (a caller that expects to [`Unnamed::link`] these
    /// bytes writes them while it waits on something else: the first write into a new inode costs
    /// ~30–40 µs here). [`Unnamed::link`] with the same bytes then only names the file; with other
    /// bytes it empties the file and writes those. A failed write is an error and changes nothing the
    /// link relies on.
    pub fn prewrite(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.prewritten = None;
        self.write_afresh(bytes)?;
        self.prewritten = Some(bytes.to_vec());
        Ok(())
    }

    /// Make the file hold exactly `bytes`: emptied first when anything was written before (other bytes,
    /// or part of a failed write).
    fn write_afresh(&mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::{Seek, Write};
        if self.touched {
            self.file.set_len(0)?;
            self.file.rewind()?;
        }
        self.touched = true;
        self.file.write_all(bytes)
    }
}

/// `linkat` of the open file's `/proc/self/fd` link with `AT_SYMLINK_FOLLOW`: the documented way to
/// name an `O_TMPFILE` file without privileges (open(2), "O_TMPFILE").
#[cfg(target_os = "linux")]
fn link_fd(file: &File, dest: &Path) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let src = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))
        .map_err(io::Error::other)?;
    let dst = std::ffi::CString::new(dest.as_os_str().as_bytes()).map_err(io::Error::other)?;
    // SAFETY: both are valid NUL-terminated C strings that outlive the call; the fd is open (`file`
    // is borrowed for the call); linkat reads the strings and touches no memory of ours besides.
    let r = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            src.as_ptr(),
            libc::AT_FDCWD,
            dst.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn link_fd(_file: &File, _dest: &Path) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// How [`write_private`] puts the file in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put {
    /// `fsync` the bytes before they take the name (what must survive a machine crash).
    pub sync: bool,
    /// Replace a file already there (a rename); `false`: never replace, a hard link is made instead
    /// (an existing `dest` fails with [`io::ErrorKind::AlreadyExists`], for the caller to judge).
    pub replace: bool,
}

/// The one atomic write into the plugin's private folders: the bytes go to a new 0600 temp file in
/// `dir` (`.<uuid>.tmp`, [`create_private`]: exclusive, never through a link), then take the name
/// `dest` (in `dir`) as `put` says. The temp file never outlives the call.
pub fn write_private(dir: &Path, dest: &Path, bytes: &[u8], put: Put) -> io::Result<()> {
    write_private_parts(dir, dest, &[bytes], put)
}

/// [`write_private`] of `parts` one after the other (a tag and its body, without joining them first).
pub fn write_private_parts(dir: &Path, dest: &Path, parts: &[&[u8]], put: Put) -> io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
    let r = (|| {
        let mut f = create_private(&tmp)?;
        for p in parts {
            f.write_all(p)?;
        }
        if put.sync {
            f.sync_all()?;
        }
        if put.replace {
            fs::rename(&tmp, dest)
        } else {
            fs::hard_link(&tmp, dest)
        }
    })();
    // after a rename the temp name is gone already; after a link (or a failure) it is removed here
    let _ = fs::remove_file(&tmp);
    r
}
/// An exclusive `flock` on a file, released when dropped (or when the process dies).
#[allow(dead_code)]
pub struct Flock(fs::File);

impl Flock {
    pub fn open(p: &Path) -> io::Result<fs::File> {
        use std::os::unix::fs::OpenOptionsExt;
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(p)
    }
    /// Wait for the lock (bounded by the holders' short critical sections).
    pub fn lock(p: &Path) -> io::Result<Flock> {
        use std::os::fd::AsRawFd;
        let f = Self::open(p)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Flock(f))
    }
    /// Wait for the lock at most `within` (the file lies in the home, where any process of the user
    /// can take it and keep it): `TimedOut` past it.
    pub fn lock_within(p: &Path, within: std::time::Duration) -> io::Result<Flock> {
        let f = Self::open(p)?;
        flock_within(&f, within)?;
        Ok(Flock(f))
    }
    /// Take the lock only if it is free now.
    pub fn try_lock(p: &Path) -> io::Result<Option<Flock>> {
        use std::os::fd::AsRawFd;
        let f = Self::open(p)?;
        // SAFETY: flock on a descriptor we own.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                Ok(None)
            } else {
                Err(e)
            };
        }
        Ok(Some(Flock(f)))
    }
}

/// Lock the open file `f` (`flock`, exclusive) waiting at most `within` — for a lock file that lies in the
/// home, where any process of the user can take it and keep it: `TimedOut` past it. Free: taken at once
/// (one call); taken: tried again after 50 µs, doubling up to 2 ms, so a holder's short critical section
/// (an append and its flush) costs its waiters about as much as a blocking `flock` would.
pub fn flock_within(f: &fs::File, within: std::time::Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let t0 = std::time::Instant::now();
    let mut pause = std::time::Duration::from_micros(50);
    loop {
        // SAFETY: flock on a descriptor the caller owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(e);
        }
        if t0.elapsed() >= within {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("its lock stayed taken for {} ms", within.as_millis()),
            ));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(2));
    }
}
