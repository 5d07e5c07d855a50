//! dsh-session-mail index: the human's searchable view of the home's agent mail (issue 32).
//!
//! One SQLite database (bundled, FTS5, WAL) in `$DSH_HOME/dsh-session-mail/index/mail.sqlite`, 0600 in a
//! 0700 folder, never opened through a link. It is DERIVED: the core folds the audit ledger and the
//! session logs into [`Row`]s and writes them here; nothing here is believed for a delivery decision, and
//! a database that is missing, corrupt, foreign, of another schema or forged is moved aside and rebuilt
//! from the source. It knows only its own row type: no ledger, no log, no mail rule.
//!
//! Forgery: every row carries an HMAC-SHA256 over its fields (`base::seal`, key `index/key`), checked on
//! every row a query returns; the table's count and the XOR of all row seals, with the core's watermark
//! of what source it was built from, are sealed in `meta` and checked when a process opens the file. A
//! row written, changed or removed by anything but this crate fails one of the two. The limit is the
//! policy's: a process of this user that reads the key can forge a seal (docs/architecture.md).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base::seal::{self, Key};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension, Transaction};

mod query;
mod schema;

pub use query::{
    fts_query, Cursor, ListQuery, Page, Thread, MAX_LIMIT, SEARCH_WINDOW, THREAD_SPAN_MS,
};

/// The folder under the plugin's folder.
pub const DIR: &str = "index";
/// The database file in it.
pub const FILE: &str = "mail.sqlite";
/// Rows kept at most; the oldest go first ([`Index::upsert`]).
pub const MAX_ROWS: u64 = 250_000;
/// Characters of a message's text kept at most (the rest is cut; the log keeps the whole).
pub const MAX_TEXT_CHARS: usize = 16 * 1024;
/// Characters of an id, title, tool, mode or fate kept at most.
pub const MAX_FIELD_CHARS: usize = 512;
/// How long a writer waits for another process's write transaction.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// One agent message as the human's page shows it. Times are ms since the epoch; a machine is a
/// linked machine's id (`None`: this home); `fate` is the core's fate name, kept as text.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Row {
    pub request_id: String,
    pub time: i64,
    pub sender: Option<String>,
    pub sender_title: Option<String>,
    pub sender_machine: Option<String>,
    pub target: Option<String>,
    pub target_title: Option<String>,
    pub target_machine: Option<String>,
    pub tool: String,
    pub mode: Option<String>,
    pub hop: Option<u32>,
    pub chain: Option<String>,
    pub fate: String,
    pub text: Option<String>,
}

impl Row {
    /// The row as it is stored: fields cut to their bounds (a char boundary), so what a query returns
    /// equals what was stored and sealed.
    pub fn bounded(mut self) -> Row {
        fn cut(s: &mut String, max: usize) {
            if let Some((i, _)) = s.char_indices().nth(max) {
                s.truncate(i);
            }
        }
        fn cut_opt(s: &mut Option<String>, max: usize) {
            if let Some(s) = s.as_mut() {
                cut(s, max)
            }
        }
        cut(&mut self.request_id, MAX_FIELD_CHARS);
        cut(&mut self.tool, MAX_FIELD_CHARS);
        cut(&mut self.fate, MAX_FIELD_CHARS);
        for f in [
            &mut self.sender,
            &mut self.sender_title,
            &mut self.sender_machine,
            &mut self.target,
            &mut self.target_title,
            &mut self.target_machine,
            &mut self.mode,
            &mut self.chain,
        ] {
            cut_opt(f, MAX_FIELD_CHARS);
        }
        cut_opt(&mut self.text, MAX_TEXT_CHARS);
        self
    }

    /// The row's seal: HMAC-SHA256 over its fields, each length-prefixed (a `None` is its own mark),
    /// so no two rows share an encoding.
    fn seal(&self, key: &Key) -> [u8; 32] {
        let mut b = Vec::with_capacity(256 + self.text.as_ref().map_or(0, |t| t.len()));
        let mut put = |s: Option<&str>| match s {
            None => b.extend_from_slice(&u64::MAX.to_le_bytes()),
            Some(s) => {
                b.extend_from_slice(&(s.len() as u64).to_le_bytes());
                b.extend_from_slice(s.as_bytes());
            }
        };
        let time = self.time.to_string();
        let hop = self.hop.map(|h| h.to_string());
        for s in [
            Some(self.request_id.as_str()),
            Some(time.as_str()),
            self.sender.as_deref(),
            self.sender_title.as_deref(),
            self.sender_machine.as_deref(),
            self.target.as_deref(),
            self.target_title.as_deref(),
            self.target_machine.as_deref(),
            Some(self.tool.as_str()),
            self.mode.as_deref(),
            hop.as_deref(),
            self.chain.as_deref(),
            Some(self.fate.as_str()),
            self.text.as_deref(),
        ] {
            put(s);
        }
        seal::mac(key.bytes(), &[b"dsh-session-mail index row\0", &b])
    }
}

/// Why a database file was not used and was moved aside (then a new one was made).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Aside {
    /// Not a regular file of this user (a link, a folder, a FIFO, another owner's).
    NotAFile(String),
    /// SQLite could not read it as a database, or its integrity check failed.
    Corrupt(String),
    /// A database, but not this plugin's (another application id).
    Foreign,
    /// This plugin's, of another schema version.
    OtherSchema(i64),
    /// Its seal does not verify: something other than this crate wrote it.
    Forged(&'static str),
}

impl fmt::Display for Aside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Aside::NotAFile(k) => write!(f, "not a regular file of this user ({k})"),
            Aside::Corrupt(e) => write!(f, "corrupt ({e})"),
            Aside::Foreign => f.write_str("not this plugin's database"),
            Aside::OtherSchema(v) => write!(f, "schema {v}, not {}", schema::VERSION),
            Aside::Forged(what) => write!(f, "forged ({what})"),
        }
    }
}

/// How [`Index::open`] found the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opened {
    /// A database this crate wrote, its seal verified.
    Existing,
    /// None was there: a new, empty one.
    Created,
    /// One was there and was moved aside (`mail.sqlite.aside`, the previous aside dropped); a new, empty one.
    Replaced(Aside),
}

/// Why the index cannot be used now (the caller falls back to the source or says so).
#[derive(Debug)]
pub enum IndexError {
    /// The folder or the file could not be made or checked.
    Io(io::Error),
    /// The key file (`index/key`) cannot be used.
    Key(seal::KeyError),
    /// SQLite refused (busy past the timeout, disk full, …).
    Sql(rusqlite::Error),
    /// A row or the table's seal does not verify: the caller moves the file aside and rebuilds.
    Forged(&'static str),
}

impl fmt::Display for IndexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexError::Io(e) => write!(f, "mail index: {e}"),
            IndexError::Key(e) => write!(f, "mail index key{e}"),
            IndexError::Sql(e) => write!(f, "mail index: {e}"),
            IndexError::Forged(w) => write!(f, "mail index: forged ({w})"),
        }
    }
}

impl std::error::Error for IndexError {}

impl From<io::Error> for IndexError {
    fn from(e: io::Error) -> Self {
        IndexError::Io(e)
    }
}
impl From<rusqlite::Error> for IndexError {
    fn from(e: rusqlite::Error) -> Self {
        IndexError::Sql(e)
    }
}

/// The sealed state of the table: how many rows, the XOR of their seals, and the core's watermark.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct State {
    pub rows: u64,
    xor: [u8; 32],
    /// What the core built it from (opaque here).
    pub source: String,
}

impl State {
    fn bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(48 + self.source.len());
        b.extend_from_slice(&self.rows.to_le_bytes());
        b.extend_from_slice(&self.xor);
        b.extend_from_slice(self.source.as_bytes());
        b
    }
}

/// An open index.
pub struct Index {
    conn: Connection,
    key: Key,
    path: PathBuf,
    /// (device, inode) of the file when it was opened.
    file: Option<(u64, u64)>,
}

impl fmt::Debug for Index {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Index").field("path", &self.path).finish()
    }
}

/// `$DSH_HOME/dsh-session-mail/index`.
pub fn dir(home: &Path) -> PathBuf {
    base::home::plugin_dir(home).join(DIR)
}

fn xor_into(acc: &mut [u8; 32], b: &[u8]) {
    for (a, x) in acc.iter_mut().zip(b) {
        *a ^= x;
    }
}

impl Index {
    /// Open (or make) the index of `home`. A file that is not this crate's sealed database is moved
    /// aside and a new one made: [`Opened`] says which, so the caller knows to fill it from the source.
    pub fn open(home: &Path) -> Result<(Index, Opened), IndexError> {
        let d = dir(home);
        base::fsafe::ensure_private_dirs([base::home::plugin_dir(home), d.clone()])
            .map_err(|(_, e)| IndexError::Io(e))?;
        Index::open_in(&d)
    }

    /// [`Index::open`] in a folder the caller made private.
    pub fn open_in(d: &Path) -> Result<(Index, Opened), IndexError> {
        let key = seal::key_or_make(&d.join("key")).map_err(IndexError::Key)?;
        let path = d.join(FILE);
        let mut aside = None;
        for _ in 0..3 {
            let made = match std::fs::symlink_metadata(&path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    match base::fsafe::create_private(&path) {
                        Ok(_) => true,
                        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                        Err(e) => return Err(e.into()),
                    }
                }
                Err(e) => return Err(e.into()),
                Ok(m) => {
                    tighten(&path);
                    if let Some(why) = not_a_private_file(&m) {
                        move_aside(&path)?;
                        aside = Some(Aside::NotAFile(why));
                        continue;
                    }
                    false
                }
            };
            match Index::connect(&path, key.clone()) {
                Ok(ix) => match ix.check() {
                    Ok(()) => {
                        let opened = match (aside.take(), made) {
                            (Some(a), _) => Opened::Replaced(a),
                            (None, true) => Opened::Created,
                            (None, false) => Opened::Existing,
                        };
                        return Ok((ix, opened));
                    }
                    Err(Checked::Aside(a)) => {
                        drop(ix);
                        move_aside(&path)?;
                        aside = Some(a);
                    }
                    Err(Checked::Error(e)) => return Err(e),
                },
                Err(e) if is_corrupt(&e) => {
                    move_aside(&path)?;
                    aside = Some(Aside::Corrupt(e.to_string()));
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(IndexError::Io(io::Error::other(
            "the index file kept changing while it was opened",
        )))
    }

    fn connect(path: &Path, key: Key) -> rusqlite::Result<Index> {
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NOFOLLOW
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers never wait for the writer; several processes share the file (one writer at a time).
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        conn.pragma_update(None, "trusted_schema", "OFF")?;
        // 8 MiB of pages per connection (the default 2 MiB holds a tenth of a 100,000-message index);
        // sorts in memory; no mmap: another process of this user can truncate the file under a map,
        // and a read past its end would kill the host (SIGBUS), where a read() only fails.
        conn.pragma_update(None, "cache_size", -8192)?;
        conn.pragma_update(None, "temp_store", "MEMORY")?;
        // every statement the routes run (each filter combination is its own) stays prepared
        conn.set_prepared_statement_cache_capacity(64);
        Ok(Index {
            conn,
            key,
            path: path.to_path_buf(),
            file: file_id(path),
        })
    }

    /// The database is this crate's, of this schema, and its sealed state matches its rows. A new
    /// (empty) file gets the schema.
    fn check(&self) -> Result<(), Checked> {
        let app: i64 = self
            .conn
            .pragma_query_value(None, "application_id", |r| r.get(0))
            .map_err(Checked::sql)?;
        let ver: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(Checked::sql)?;
        if app == 0 && ver == 0 {
            let key = self.key.clone();
            let made = schema::create(&self.conn, |c| write_state(c, &key, &State::default()))
                .map_err(Checked::sql)?;
            if made {
                return Ok(());
            }
            if !self.is_ours().map_err(Checked::sql)? {
                return Err(Checked::Aside(Aside::Foreign));
            }
            return self.check();
        }
        if app != schema::APP_ID {
            return Err(Checked::Aside(Aside::Foreign));
        }
        if ver != schema::VERSION {
            return Err(Checked::Aside(Aside::OtherSchema(ver)));
        }
        let st = match self.state() {
            Ok(s) => s,
            Err(IndexError::Forged(w)) => return Err(Checked::Aside(Aside::Forged(w))),
            Err(IndexError::Sql(e)) if is_corrupt(&e) => {
                return Err(Checked::Aside(Aside::Corrupt(e.to_string())))
            }
            Err(e) => return Err(Checked::Error(e)),
        };
        // the rows are the ones sealed: their count and the XOR of their seals
        let mut xor = [0u8; 32];
        let mut n = 0u64;
        let scan = (|| -> rusqlite::Result<()> {
            // (the covering index `mail_mac`: the check reads 32 bytes a row, not the rows)
            let mut q = self
                .conn
                .prepare("SELECT mac FROM mail INDEXED BY mail_mac")?;
            let mut rows = q.query([])?;
            while let Some(r) = rows.next()? {
                let m = r.get_ref(0)?.as_blob()?;
                xor_into(&mut xor, m);
                n += 1;
            }
            Ok(())
        })();
        match scan {
            Ok(()) => {}
            Err(e) if is_corrupt(&e) || is_type(&e) => {
                return Err(Checked::Aside(Aside::Corrupt(e.to_string())))
            }
            Err(e) => return Err(Checked::sql(e)),
        }
        if n != st.rows {
            return Err(Checked::Aside(Aside::Forged("row count")));
        }
        if xor != st.xor {
            return Err(Checked::Aside(Aside::Forged("row seals")));
        }
        Ok(())
    }

    /// The sealed state (Err `Forged` when the seal does not verify).
    pub fn state(&self) -> Result<State, IndexError> {
        read_state(&self.conn, &self.key)
    }

    /// Another process made the schema while this one looked (application id set since).
    fn is_ours(&self) -> rusqlite::Result<bool> {
        let app: i64 = self
            .conn
            .pragma_query_value(None, "application_id", |r| r.get(0))?;
        Ok(app == schema::APP_ID)
    }

    /// Insert or replace `rows` (by request id) in one write transaction, and set the watermark to
    /// `source` when given. Idempotent: the same rows again change nothing. Past [`MAX_ROWS`] the oldest
    /// rows go. Returns how many rows changed.
    pub fn upsert(&mut self, rows: &[Row], source: Option<&str>) -> Result<usize, IndexError> {
        self.upsert_at(rows, None, source)
    }

    /// [`Index::upsert`], a new row `rows[i]` taking the row id `first + i` (a rebuild writes the newest
    /// chunk first, yet row ids must grow with the ledger: a search walks its matches by row id, newest
    /// first). The caller keeps those ids free (an empty index, filled once each).
    pub fn upsert_at(
        &mut self,
        rows: &[Row],
        first: Option<i64>,
        source: Option<&str>,
    ) -> Result<usize, IndexError> {
        let key = self.key.clone();
        // Rows already stored as they are, and the same watermark: no write transaction at all (a read
        // that finds nothing new never waits for another writer of the file).
        let mut differ = Vec::new();
        let mut ids = Vec::new();
        {
            let mut q = self
                .conn
                .prepare_cached("SELECT mac FROM mail WHERE request_id = ?1")?;
            for (i, r) in rows.iter().enumerate() {
                let b = r.clone().bounded();
                let old: Option<Vec<u8>> = q.query_row([&b.request_id], |x| x.get(0)).optional()?;
                if old.as_deref() != Some(b.seal(&key).as_slice()) {
                    ids.push(first.map(|f| f + i as i64));
                    differ.push(b);
                }
            }
        }
        if differ.is_empty() && source.is_none_or(|s| self.state().is_ok_and(|st| st.source == s)) {
            return Ok(0);
        }
        let rows = &differ[..];
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let mut st = read_state(&tx, &key)?;
        let changed = upsert_in(&tx, &key, &mut st, rows, &ids)?;
        trim(&tx, &mut st)?;
        if let Some(s) = source {
            st.source = s.to_string();
        }
        write_state(&tx, &key, &st)?;
        tx.commit()?;
        Ok(changed)
    }

    /// Replace every row with `rows` and set the watermark: a rebuild from the source, in one write
    /// transaction (a reader sees the old rows or the new, never half).
    pub fn replace_all(&mut self, rows: &[Row], source: &str) -> Result<(), IndexError> {
        let key = self.key.clone();
        let tx = self
            .conn
            .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        tx.execute("DELETE FROM mail", [])?;
        tx.execute("INSERT INTO mail_fts(mail_fts) VALUES ('delete-all')", [])?;
        let mut st = State {
            source: source.to_string(),
            ..State::default()
        };
        upsert_in(&tx, &key, &mut st, rows, &[])?;
        trim(&tx, &mut st)?;
        write_state(&tx, &key, &st)?;
        tx.commit()?;
        Ok(())
    }

    /// Rows whose fate is one of `fates`, newest first, after `before` ((time, row id) of the last one a
    /// previous call returned), at most `limit`: (request id, time, row id). The core looks at mail that
    /// can still move again.
    pub fn open_rows(
        &self,
        fates: &[&str],
        before: Option<(i64, i64)>,
        limit: usize,
    ) -> Result<Vec<(String, i64, i64)>, IndexError> {
        let marks: Vec<String> = (1..=fates.len()).map(|i| format!("?{i}")).collect();
        let n = fates.len();
        let (t, i) = before.unwrap_or((i64::MAX, i64::MAX));
        let mut q = self.conn.prepare_cached(&format!(
            "SELECT request_id, time, id FROM mail WHERE fate IN ({}) AND (time < ?{a} OR (time = ?{a} AND id < ?{b}))
             ORDER BY time DESC, id DESC LIMIT {limit}",
            marks.join(", "),
            a = n + 1,
            b = n + 2,
        ))?;
        let mut args: Vec<rusqlite::types::Value> = fates
            .iter()
            .map(|f| rusqlite::types::Value::Text(f.to_string()))
            .collect();
        args.push(t.into());
        args.push(i.into());
        let rows = q.query_map(rusqlite::params_from_iter(args), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Move this database aside (a row that does not verify was read from it) and open a new, empty
    /// one in its place: [`Opened::Replaced`] with `why`.
    pub fn discard(self, why: Aside) -> Result<(Index, Opened), IndexError> {
        let Index { conn, path, .. } = self;
        drop(conn);
        move_aside(&path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        let (ix, o) = Index::open_in(dir)?;
        Ok((
            ix,
            match o {
                Opened::Created => Opened::Replaced(why),
                o => o,
            },
        ))
    }

    /// Start afresh: this database (its rows built from a source that is gone) is moved aside and a new,
    /// empty one opened in its place, for a rebuild to fill.
    pub fn clear(self) -> Result<Index, IndexError> {
        let Index { conn, path, .. } = self;
        drop(conn);
        move_aside(&path)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Ok(Index::open_in(dir)?.0)
    }

    /// The file at its path is still the one this connection opened (not moved aside or replaced by
    /// another connection or process since).
    pub fn is_current(&self) -> bool {
        self.file.is_some() && file_id(&self.path) == self.file
    }

    /// The database file (for the caller's messages and for tests).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes the database takes on disk (the file and its WAL).
    pub fn size_on_disk(&self) -> u64 {
        let len = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.len()).unwrap_or(0);
        let mut wal = self.path.clone().into_os_string();
        wal.push("-wal");
        len(&self.path) + len(Path::new(&wal))
    }

    /// Rewrite the file compactly (after a rebuild: chunks written newest first leave the B-trees' pages
    /// half full), then fold the WAL back. Readers go on meanwhile (WAL); a writer waits its turn.
    /// Its copy of the file is made in a temporary file, not in memory (a host's memory would hold the
    /// whole index for a moment).
    pub fn compact(&self) -> Result<(), IndexError> {
        self.conn.pragma_update(None, "temp_store", "FILE")?;
        let done = self.conn.execute_batch("VACUUM");
        self.conn.pragma_update(None, "temp_store", "MEMORY")?;
        done?;
        self.checkpoint()
    }

    /// Fold the WAL back into the file (after a rebuild; SQLite also does it on its own).
    pub fn checkpoint(&self) -> Result<(), IndexError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        Ok(())
    }
}

enum Checked {
    Aside(Aside),
    Error(IndexError),
}

impl Checked {
    fn sql(e: rusqlite::Error) -> Checked {
        if is_corrupt(&e) {
            Checked::Aside(Aside::Corrupt(e.to_string()))
        } else {
            Checked::Error(e.into())
        }
    }
}

fn read_state(conn: &Connection, key: &Key) -> Result<State, IndexError> {
    let get = |k: &str| -> rusqlite::Result<Option<Vec<u8>>> {
        conn.query_row("SELECT v FROM meta WHERE k = ?1", [k], |r| r.get(0))
            .optional()
    };
    let (Some(bytes), Some(mac)) = (get("state")?, get("state-mac")?) else {
        return Err(IndexError::Forged("no sealed state"));
    };
    if !seal::verify(
        key.bytes(),
        &[b"dsh-session-mail index state\0", &bytes],
        &mac,
    ) {
        return Err(IndexError::Forged("state seal"));
    }
    if bytes.len() < 40 {
        return Err(IndexError::Forged("state"));
    }
    let mut rows = [0u8; 8];
    rows.copy_from_slice(&bytes[..8]);
    let mut xor = [0u8; 32];
    xor.copy_from_slice(&bytes[8..40]);
    let source =
        String::from_utf8(bytes[40..].to_vec()).map_err(|_| IndexError::Forged("state"))?;
    Ok(State {
        rows: u64::from_le_bytes(rows),
        xor,
        source,
    })
}

fn write_state(tx: &Connection, key: &Key, st: &State) -> rusqlite::Result<()> {
    let bytes = st.bytes();
    let mac = seal::mac(key.bytes(), &[b"dsh-session-mail index state\0", &bytes]);
    tx.execute(
        "INSERT INTO meta(k, v) VALUES ('state', ?1), ('state-mac', ?2)
         ON CONFLICT(k) DO UPDATE SET v = excluded.v",
        params![bytes, mac.to_vec()],
    )?;
    Ok(())
}

/// `ids[i]`: the row id a new `rows[i]` takes (absent or `None`: the next free one).
fn upsert_in(
    tx: &Transaction,
    key: &Key,
    st: &mut State,
    rows: &[Row],
    ids: &[Option<i64>],
) -> Result<usize, IndexError> {
    let mut old_q = tx.prepare_cached("SELECT mac FROM mail WHERE request_id = ?1")?;
    let mut put = tx.prepare_cached(
        "INSERT INTO mail(request_id, time, sender, sender_title, sender_machine, target, target_title,
            target_machine, tool, mode, hop, chain, fate, text, mac, id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)
         ON CONFLICT(request_id) DO UPDATE SET time = excluded.time, sender = excluded.sender,
            sender_title = excluded.sender_title, sender_machine = excluded.sender_machine,
            target = excluded.target, target_title = excluded.target_title,
            target_machine = excluded.target_machine, tool = excluded.tool, mode = excluded.mode,
            hop = excluded.hop, chain = excluded.chain, fate = excluded.fate, text = excluded.text,
            mac = excluded.mac
         RETURNING id",
    )?;
    // the words of the row, written beside it (contentless: the index keeps tokens, not text)
    let mut fts = tx.prepare_cached(
        "INSERT OR REPLACE INTO mail_fts(rowid, text, sender_title, target_title) VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut changed = 0;
    for (i, r) in rows.iter().enumerate() {
        let r = r.clone().bounded();
        if r.request_id.is_empty() {
            continue;
        }
        let mac = r.seal(key);
        let old: Option<Vec<u8>> = old_q.query_row([&r.request_id], |x| x.get(0)).optional()?;
        match &old {
            Some(m) if m.as_slice() == mac.as_slice() => continue,
            Some(m) => xor_into(&mut st.xor, m),
            None => st.rows += 1,
        }
        xor_into(&mut st.xor, &mac);
        let id: i64 = put.query_row(
            params![
                r.request_id,
                r.time,
                r.sender,
                r.sender_title,
                r.sender_machine,
                r.target,
                r.target_title,
                r.target_machine,
                r.tool,
                r.mode,
                r.hop,
                r.chain,
                r.fate,
                r.text,
                mac.to_vec(),
                ids.get(i).copied().flatten(),
            ],
            |x| x.get(0),
        )?;
        fts.execute(params![
            id,
            r.text.as_deref().map(fts_text),
            r.sender_title.as_deref().map(fts_text),
            r.target_title.as_deref().map(fts_text),
        ])?;
        changed += 1;
    }
    Ok(changed)
}

/// Whether `c` is written without spaces between words (Han, kana): such a run is one unicode61 token,
/// so [`fts_text`] and [`fts_query`] give each of its characters a token of its own.
pub fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // Hiragana, Katakana
        | 0x31F0..=0x31FF // Katakana extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF66..=0xFF9F // half-width Katakana
        | 0x20000..=0x3134F) // CJK extensions B–G
}

/// Text as the FTS table indexes it: every CJK character stands apart (a space on each side), the rest
/// as written. A word of a Chinese sentence is then found as the phrase of its characters, whatever its
/// length (FTS5's trigram tokenizer finds nothing shorter than three characters, and most Chinese
/// words are two).
pub fn fts_text(s: &str) -> String {
    if !s.chars().any(is_cjk) {
        return s.to_string();
    }
    let mut out = String::with_capacity(s.len() + s.len() / 2);
    for c in s.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// Drop the oldest rows past [`MAX_ROWS`].
fn trim(tx: &Transaction, st: &mut State) -> Result<(), IndexError> {
    if st.rows <= MAX_ROWS {
        return Ok(());
    }
    let over = st.rows - MAX_ROWS;
    let mut q = tx.prepare("SELECT id, mac FROM mail ORDER BY time ASC, id ASC LIMIT ?1")?;
    let gone: Vec<(i64, Vec<u8>)> = q
        .query_map([over as i64], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut del = tx.prepare_cached("DELETE FROM mail WHERE id = ?1")?;
    let mut del_fts = tx.prepare_cached("DELETE FROM mail_fts WHERE rowid = ?1")?;
    for (id, mac) in gone {
        del.execute([id])?;
        del_fts.execute([id])?;
        xor_into(&mut st.xor, &mac);
        st.rows -= 1;
    }
    Ok(())
}

fn file_id(p: &Path) -> Option<(u64, u64)> {
    let m = std::fs::symlink_metadata(p).ok()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = m;
        Some((0, 0))
    }
}

fn not_a_private_file(m: &std::fs::Metadata) -> Option<String> {
    let ft = m.file_type();
    if ft.is_symlink() {
        return Some("a symbolic link".into());
    }
    if !ft.is_file() {
        return Some("not a regular file".into());
    }
    if let Some(uid) = base::fsafe::foreign_owner(m) {
        return Some(format!("owned by uid {uid}"));
    }
    #[cfg(unix)]
    if base::fsafe::mode_of(m) & 0o077 != 0 {
        // ours but readable by others: tightened, not moved (SQLite gives its WAL the file's mode)
        return None;
    }
    None
}

/// Move `path` (and its WAL and shared-memory files) aside to `<file>.aside`, replacing the previous
/// one: at most one old copy is kept, so the folder stays bounded.
fn move_aside(path: &Path) -> io::Result<()> {
    let with = |suffix: &str| {
        let mut s = path.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    let aside = with(".aside");
    // a folder (or anything not a file) named like the aside copy: removed only when it is empty
    match std::fs::symlink_metadata(&aside) {
        Ok(m) if m.is_dir() => std::fs::remove_dir(&aside)?,
        _ => {}
    }
    std::fs::rename(path, &aside)?;
    for s in ["-wal", "-shm", "-journal"] {
        match std::fs::remove_file(with(s)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn tighten(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.is_file() && base::fsafe::mode_of(&m) & 0o077 != 0 {
                let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
            }
        }
    }
}

fn is_corrupt(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::*;
    matches!(
        e.sqlite_error_code(),
        Some(DatabaseCorrupt | NotADatabase | SchemaChanged)
    ) || matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.extended_code == 11 || f.extended_code == 26)
}

fn is_type(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::InvalidColumnIndex(..)
            | rusqlite::Error::InvalidColumnName(..)
    )
}

#[cfg(test)]
mod tests;
