//! The database's schema: one table of rows, an FTS5 table over their text and titles (contentless,
//! written by this crate beside each row: [`crate::fts_text`] spaces CJK characters out first, so a
//! Chinese or Japanese word inside a sentence is a phrase of one-character tokens), and the sealed state.

use rusqlite::Connection;

/// `PRAGMA application_id`: "dsmi" (a database with another id is not ours).
pub const APP_ID: i64 = 0x6473_6d69;
/// `PRAGMA user_version`: this schema. A file of another version is moved aside and rebuilt.
/// 2: `mail_target` is (target, sender, time): a thread's mail between two sessions is one range each
/// way, not every message to one of them in the span; the FTS table is contentless and its text CJK-split (1 kept the text as written: a run of CJK
/// characters was one token, so a word inside a Chinese sentence was never found).
pub const VERSION: i64 = 2;

/// Make the schema in an empty database, once: inside one write transaction that looks again (two
/// processes opening a new file race here; the second finds the first one's schema). `init` writes the
/// first sealed state in the same transaction. False: another process made it meanwhile.
pub fn create(
    conn: &Connection,
    init: impl FnOnce(&Connection) -> rusqlite::Result<()>,
) -> rusqlite::Result<bool> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    let made = (|| {
        let app: i64 = conn.pragma_query_value(None, "application_id", |r| r.get(0))?;
        let tables: i64 = conn.query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))?;
        if app != 0 || tables != 0 {
            return Ok(false);
        }
        make(conn)?;
        init(conn)?;
        Ok(true)
    })();
    match made {
        Ok(m) => {
            conn.execute_batch("COMMIT")?;
            Ok(m)
        }
        Err(e) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(e)
        }
    }
}

fn make(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(&format!(
        "CREATE TABLE mail(
            id INTEGER PRIMARY KEY,
            request_id TEXT NOT NULL UNIQUE,
            time INTEGER NOT NULL,
            sender TEXT, sender_title TEXT, sender_machine TEXT,
            target TEXT, target_title TEXT, target_machine TEXT,
            tool TEXT NOT NULL, mode TEXT, hop INTEGER, chain TEXT,
            fate TEXT NOT NULL, text TEXT,
            mac BLOB NOT NULL);
        CREATE INDEX mail_time ON mail(time);
        CREATE INDEX mail_sender ON mail(sender, time);
        CREATE INDEX mail_target ON mail(target, sender, time);
        CREATE INDEX mail_chain ON mail(chain);
        CREATE INDEX mail_fate ON mail(fate, time);
        CREATE INDEX mail_mac ON mail(mac);
        CREATE VIRTUAL TABLE mail_fts USING fts5(
            text, sender_title, target_title,
            content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
        CREATE TABLE meta(k TEXT PRIMARY KEY, v BLOB NOT NULL);
        PRAGMA application_id = {APP_ID};
        PRAGMA user_version = {VERSION};"
    ))
}
