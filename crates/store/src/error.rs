//! The store's errors, as data: what went wrong and the system's error it came from, never a
//! sentence. The words are in each type's `Display` (a listing's note, a lookup's reason). The
//! store's leaf: it imports no other module of the crate.

use std::fmt;
use std::io;
use std::sync::Arc;

/// An `io::Error`'s text without its `(os error N)` tail (the store's notes are short).
pub fn short_io(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Set (not empty, not `0`): no watcher, every home is swept (a file system where change
/// notification is known to lie; the bench's baseline). Read by `watch`.
pub const NO_WATCH: &str = "DSH_SESSION_MAIL_NO_WATCH";

/// An error of the system or of a library (zstd, inotify), kept whole. Shown in its short form:
/// the system's text without its `(os error N)` tail.
#[derive(Debug, Clone)]
pub struct IoError(Arc<io::Error>);

impl IoError {
    pub fn kind(&self) -> io::ErrorKind {
        self.0.kind()
    }

    pub fn raw_os_error(&self) -> Option<i32> {
        self.0.raw_os_error()
    }

    /// The whole text, `(os error N)` included.
    pub fn full(&self) -> String {
        self.0.to_string()
    }
}

impl From<io::Error> for IoError {
    fn from(e: io::Error) -> IoError {
        IoError(Arc::new(e))
    }
}

impl PartialEq for IoError {
    fn eq(&self, other: &IoError) -> bool {
        self.kind() == other.kind()
            && self.raw_os_error() == other.raw_os_error()
            && self.0.to_string() == other.0.to_string()
    }
}

impl Eq for IoError {}

impl fmt::Display for IoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&short_io(&self.0))
    }
}

impl std::error::Error for IoError {}

/// Why one session log (or its folder) could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// Not a regular file (a FIFO, a device or a directory): never opened, never read.
    NotRegular,
    /// It could not be opened or read (or `fsafe` refused it: what it is instead).
    Io(IoError),
    /// Reading it panicked (caught; the listing goes on).
    Panicked,
    /// The folder holds no session log.
    NoLog,
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e.into())
    }
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::NotRegular => {
                f.write_str("not a regular file (a FIFO, a device or a directory); not read")
            }
            ReadError::Io(e) => e.fmt(f),
            ReadError::Panicked => f.write_str("internal error while reading"),
            ReadError::NoLog => f.write_str("no session log"),
        }
    }
}

impl std::error::Error for ReadError {}

/// Why a zstd frame stopped decoding before its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeStop {
    /// The decode budget of this read is spent (see `log::DECODE_BUDGET`).
    BudgetSpent,
    /// zstd (or the file under it) failed.
    Failed(IoError),
}

impl From<io::Error> for DecodeStop {
    fn from(e: io::Error) -> DecodeStop {
        DecodeStop::Failed(e.into())
    }
}

impl fmt::Display for DecodeStop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeStop::BudgetSpent => f.write_str("the decode budget of this read is spent"),
            // The whole text (zstd's reasons carry no os-error tail).
            DecodeStop::Failed(e) => e.0.fmt(f),
        }
    }
}

impl std::error::Error for DecodeStop {}

/// Why a log's first line is not a session header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    NotUtf8,
    /// Not JSON: serde_json's reason (its words, kept as it gave them).
    NotJson(Arc<str>),
    NotSessionHeader,
    NoId,
}

impl fmt::Display for HeaderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HeaderError::NotUtf8 => f.write_str("header line is not valid UTF-8"),
            HeaderError::NotJson(e) => write!(f, "header line is not valid JSON ({e})"),
            HeaderError::NotSessionHeader => f.write_str("first line is not a session header"),
            HeaderError::NoId => f.write_str("session header has no id"),
        }
    }
}

impl std::error::Error for HeaderError {}

/// Why a home has no change notification (its listings are swept every `LIST_STALE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchOff {
    /// No change notification on this OS.
    Unsupported,
    /// `DSH_SESSION_MAIL_NO_WATCH` is set.
    Disabled,
    /// A file system whose changes can come from elsewhere (its `statfs` magic).
    RemoteFs { magic: u32 },
    /// `statfs` on the home failed (its file system is unknown).
    StatfsFailed,
    /// `inotify_init` failed.
    Init(IoError),
    /// The watcher's thread could not be started.
    Thread(IoError),
    /// More session folders than `cap` watches.
    TooMany { cap: usize },
    /// Reading the inotify queue failed.
    Read(IoError),
    /// The kernel's queue overflowed (events lost).
    Overflow,
    /// A watched file system was unmounted.
    Unmounted,
    /// `max_user_watches` reached.
    WatchLimit,
    /// The kernel is out of memory for watches.
    NoKernelMemory,
    /// Not started yet (the slot's placeholder while a listing holds its watcher).
    NotStarted,
}

impl fmt::Display for WatchOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WatchOff::Unsupported => f.write_str("no change notification on this OS"),
            WatchOff::Disabled => write!(f, "{NO_WATCH} is set"),
            WatchOff::RemoteFs { magic } => {
                write!(f, "file system type {magic:#x} may change without notice")
            }
            WatchOff::StatfsFailed => f.write_str("statfs failed"),
            WatchOff::Init(e) => write!(f, "inotify_init: {}", e.0),
            WatchOff::Thread(e) => write!(f, "thread: {}", e.0),
            WatchOff::TooMany { cap } => write!(f, "more session folders than {cap} watches"),
            WatchOff::Read(e) => write!(f, "inotify read: {}", e.0),
            WatchOff::Overflow => f.write_str("inotify queue overflow"),
            WatchOff::Unmounted => f.write_str("a watched file system was unmounted"),
            WatchOff::WatchLimit => f.write_str("inotify watch limit (max_user_watches) reached"),
            WatchOff::NoKernelMemory => f.write_str("inotify: out of kernel memory"),
            WatchOff::NotStarted => f.write_str("not started yet"),
        }
    }
}

impl std::error::Error for WatchOff {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of a listing's notes and a lookup's reasons come from here: pinned.
    #[test]
    fn each_error_says_what_it_is_in_the_words_the_notes_use() {
        let enoent = || io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(
            ReadError::NotRegular.to_string(),
            "not a regular file (a FIFO, a device or a directory); not read"
        );
        assert_eq!(
            ReadError::from(enoent()).to_string(),
            "No such file or directory"
        );
        assert_eq!(
            ReadError::Panicked.to_string(),
            "internal error while reading"
        );
        assert_eq!(ReadError::NoLog.to_string(), "no session log");
        assert_eq!(
            DecodeStop::BudgetSpent.to_string(),
            "the decode budget of this read is spent"
        );
        assert_eq!(
            DecodeStop::from(io::Error::other("Unknown frame descriptor")).to_string(),
            "Unknown frame descriptor"
        );
        assert_eq!(
            WatchOff::TooMany { cap: 2 }.to_string(),
            "more session folders than 2 watches"
        );
        assert_eq!(
            WatchOff::RemoteFs { magic: 0x6969 }.to_string(),
            "file system type 0x6969 may change without notice"
        );
        assert_eq!(
            WatchOff::Disabled.to_string(),
            "DSH_SESSION_MAIL_NO_WATCH is set"
        );
        assert_eq!(
            WatchOff::Init(enoent().into()).to_string(),
            "inotify_init: No such file or directory (os error 2)"
        );
        assert_eq!(
            HeaderError::NotJson("expected value at line 1 column 1".into()).to_string(),
            "header line is not valid JSON (expected value at line 1 column 1)"
        );
        // the same system error is the same error; another is not
        assert_eq!(IoError::from(enoent()), IoError::from(enoent()));
        assert_ne!(
            IoError::from(enoent()),
            IoError::from(io::Error::from_raw_os_error(libc::EACCES))
        );
    }
}
