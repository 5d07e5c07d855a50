//! Reading the index: the page's list (newest first, filters, keyset paging), full-text search (FTS5,
//! bm25) and a message's thread. Every row returned is checked against its seal.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::Value;
use rusqlite::{params_from_iter, OptionalExtension};

use crate::{Index, IndexError, Row};

/// Most rows one page or thread returns.
pub const MAX_LIMIT: usize = 200;
/// A search ranks the newest this many matches of its words (bm25), filters applied after (a word in
/// every message costs this window, not the table; 1,000 is twenty pages of the page's 50).
pub const SEARCH_WINDOW: usize = 1000;
/// A thread's replies between the same two sessions are looked for this long before the chain's
/// first message and after its last.
pub const THREAD_SPAN_MS: i64 = 60 * 60 * 1000;

/// What the page asks for. Empty fields filter nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListQuery {
    /// Mail from or to this session.
    pub session: Option<String>,
    /// Only these fates (empty: any).
    pub fates: Vec<String>,
    /// `Some(true)`: only held mail; `Some(false)`: none of it.
    pub held: Option<bool>,
    /// Only mail at or after this time (ms).
    pub since: Option<i64>,
    /// Only mail before this time (ms).
    pub until: Option<i64>,
    /// Where the previous page ended.
    pub before: Option<Cursor>,
    /// Rows wanted (1..=[`MAX_LIMIT`]).
    pub limit: usize,
}

/// Where a page ended: a row of the newest-first list (time, row id), or a count of search results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cursor {
    At { time: i64, id: i64 },
    Skip(u64),
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cursor::At { time, id } => write!(f, "t{time}.{id}"),
            Cursor::Skip(n) => write!(f, "s{n}"),
        }
    }
}

impl FromStr for Cursor {
    type Err = ();
    fn from_str(s: &str) -> Result<Cursor, ()> {
        if let Some(r) = s.strip_prefix('t') {
            let (t, i) = r.split_once('.').ok_or(())?;
            return Ok(Cursor::At {
                time: t.parse().map_err(|_| ())?,
                id: i.parse().map_err(|_| ())?,
            });
        }
        if let Some(n) = s.strip_prefix('s') {
            return n.parse().map(Cursor::Skip).map_err(|_| ());
        }
        Err(())
    }
}

/// One page: rows newest first (a search: best first) and where the next page starts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Page {
    pub rows: Vec<Row>,
    pub next: Option<Cursor>,
}

/// A message's thread: its causal chain and the mail between the same two sessions around it, oldest
/// first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// The message asked for.
    pub root: Row,
    /// The chain's id (its first request id).
    pub chain: String,
    pub rows: Vec<Row>,
    /// More rows belonged to it than [`MAX_LIMIT`].
    pub truncated: bool,
}

const COLS: &str = "m.request_id, m.time, m.sender, m.sender_title, m.sender_machine, m.target, \
    m.target_title, m.target_machine, m.tool, m.mode, m.hop, m.chain, m.fate, m.text, m.mac, m.id";

fn row_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<(Row, Vec<u8>, i64)> {
    Ok((
        Row {
            request_id: r.get(0)?,
            time: r.get(1)?,
            sender: r.get(2)?,
            sender_title: r.get(3)?,
            sender_machine: r.get(4)?,
            target: r.get(5)?,
            target_title: r.get(6)?,
            target_machine: r.get(7)?,
            tool: r.get(8)?,
            mode: r.get(9)?,
            hop: r.get(10)?,
            chain: r.get(11)?,
            fate: r.get(12)?,
            text: r.get(13)?,
        },
        r.get(14)?,
        r.get(15)?,
    ))
}

/// The filters of `q` as SQL over `m` (the `mail` table), their values pushed to `args`.
fn filters(q: &ListQuery, sql: &mut String, args: &mut Vec<Value>) {
    if let Some(s) = &q.session {
        args.push(Value::Text(s.clone()));
        let n = args.len();
        sql.push_str(&format!(" AND (m.sender = ?{n} OR m.target = ?{n})"));
    }
    if !q.fates.is_empty() {
        let mut marks = Vec::new();
        for f in &q.fates {
            args.push(Value::Text(f.clone()));
            marks.push(format!("?{}", args.len()));
        }
        sql.push_str(&format!(" AND m.fate IN ({})", marks.join(", ")));
    }
    match q.held {
        Some(true) => sql.push_str(" AND m.fate = 'held'"),
        Some(false) => sql.push_str(" AND m.fate <> 'held'"),
        None => {}
    }
    if let Some(t) = q.since {
        args.push(Value::Integer(t));
        sql.push_str(&format!(" AND m.time >= ?{}", args.len()));
    }
    if let Some(t) = q.until {
        args.push(Value::Integer(t));
        sql.push_str(&format!(" AND m.time < ?{}", args.len()));
    }
}

/// The user's words as an FTS5 query: each word a quoted string (FTS5's operators and punctuation are
/// the user's text, not syntax), all of them required, the last one as a prefix (`migrat` finds
/// "migration"). A word with CJK characters is split as the stored text is ([`crate::fts_text`]): the
/// quoted string is then the phrase of its characters (`迁移` finds "数据库迁移已完成"). Words without a
/// letter or digit are dropped (the tokenizer keeps none of them); None: no word is left.
pub fn fts_query(text: &str) -> Option<String> {
    let words: Vec<String> = text
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .take(32)
        .map(|w| format!("\"{}\"", crate::fts_text(w).trim().replace('"', "\"\"")))
        .collect();
    let (last, rest) = words.split_last()?;
    let mut q = rest.join(" ");
    if !q.is_empty() {
        q.push(' ');
    }
    q.push_str(last);
    q.push('*');
    Some(q)
}

impl Index {
    fn checked(&self, got: (Row, Vec<u8>, i64)) -> Result<(Row, i64), IndexError> {
        let (row, mac, id) = got;
        if row.seal(&self.key).as_slice() != mac.as_slice() {
            return Err(IndexError::Forged("row seal"));
        }
        Ok((row, id))
    }

    /// Mail newest first, filtered, from where `q.before` ended.
    pub fn list(&self, q: &ListQuery) -> Result<Page, IndexError> {
        let limit = q.limit.clamp(1, MAX_LIMIT);
        let mut sql = format!("SELECT {COLS} FROM mail m WHERE 1");
        let mut args = Vec::new();
        filters(q, &mut sql, &mut args);
        if let Some(Cursor::At { time, id }) = q.before {
            args.push(Value::Integer(time));
            let t = args.len();
            args.push(Value::Integer(id));
            let i = args.len();
            sql.push_str(&format!(
                " AND (m.time < ?{t} OR (m.time = ?{t} AND m.id < ?{i}))"
            ));
        }
        args.push(Value::Integer(limit as i64 + 1));
        sql.push_str(&format!(
            " ORDER BY m.time DESC, m.id DESC LIMIT ?{}",
            args.len()
        ));
        let mut st = self.conn.prepare_cached(&sql)?;
        let got = st
            .query_map(params_from_iter(args), row_of)?
            .collect::<Result<Vec<_>, _>>()?;
        let mut rows = Vec::with_capacity(limit);
        let mut next = None;
        for (i, g) in got.into_iter().enumerate() {
            if i == limit {
                next = rows.last().map(|(r, id): &(Row, i64)| Cursor::At {
                    time: r.time,
                    id: *id,
                });
                break;
            }
            rows.push(self.checked(g)?);
        }
        Ok(Page {
            rows: rows.into_iter().map(|(r, _)| r).collect(),
            next,
        })
    }

    /// Mail whose text or titles hold the words of `text`, best first (bm25; a title counts more than
    /// the body) among the newest [`SEARCH_WINDOW`] matches, filtered as [`Index::list`]. A blank query lists; one with no word finds nothing.
    pub fn search(&self, text: &str, q: &ListQuery) -> Result<Page, IndexError> {
        if text.trim().is_empty() {
            return self.list(q);
        }
        let Some(fts) = fts_query(text) else {
            return Ok(Page::default());
        };
        let limit = q.limit.clamp(1, MAX_LIMIT);
        let skip = match q.before {
            Some(Cursor::Skip(n)) => n,
            _ => 0,
        };
        // FTS5 walks its matches newest first (row ids grow with the ledger) and stops after
        // SEARCH_WINDOW of them; those are ranked by bm25. A word in every row costs a window, not the table.
        let mut args = vec![Value::Text(fts), Value::Integer(SEARCH_WINDOW as i64)];
        let mut sql = format!(
            "SELECT {COLS} FROM (SELECT rowid AS id, bm25(mail_fts, 1.0, 2.0, 2.0) AS rank FROM mail_fts
                WHERE mail_fts MATCH ?1 ORDER BY rowid DESC LIMIT ?2) f
             JOIN mail m ON m.id = f.id WHERE 1"
        );
        filters(q, &mut sql, &mut args);
        args.push(Value::Integer(limit as i64 + 1));
        let l = args.len();
        args.push(Value::Integer(skip as i64));
        sql.push_str(&format!(
            " ORDER BY f.rank, m.time DESC LIMIT ?{l} OFFSET ?{}",
            args.len()
        ));
        let mut st = self.conn.prepare_cached(&sql)?;
        let got = st
            .query_map(params_from_iter(args), row_of)?
            .collect::<Result<Vec<_>, _>>()?;
        let more = got.len() > limit;
        let mut rows = Vec::with_capacity(limit);
        for g in got.into_iter().take(limit) {
            rows.push(self.checked(g)?.0);
        }
        Ok(Page {
            next: more.then(|| Cursor::Skip(skip + rows.len() as u64)),
            rows,
        })
    }

    /// One message by its request id.
    pub fn get(&self, request_id: &str) -> Result<Option<Row>, IndexError> {
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM mail m WHERE m.request_id = ?1"
        ))?;
        match st.query_row([request_id], row_of).optional()? {
            Some(g) => Ok(Some(self.checked(g)?.0)),
            None => Ok(None),
        }
    }

    /// The thread of `request_id`: every message of its chain (the rows whose chain is the chain's id,
    /// and the chain's first message), and the mail between the same two sessions from an hour before
    /// the chain's first message to an hour after its last, oldest first, at most [`MAX_LIMIT`] (the
    /// ones nearest the message asked for).
    pub fn thread(&self, request_id: &str) -> Result<Option<Thread>, IndexError> {
        let Some(root) = self.get(request_id)? else {
            return Ok(None);
        };
        let chain = root
            .chain
            .clone()
            .unwrap_or_else(|| root.request_id.clone());
        let mut st = self.conn.prepare_cached(&format!(
            "SELECT {COLS} FROM mail m WHERE m.chain = ?1 OR m.request_id = ?1
             ORDER BY abs(m.time - ?2), m.id LIMIT ?3"
        ))?;
        let mut got: Vec<(Row, i64)> = Vec::new();
        for g in st.query_map(
            rusqlite::params![chain, root.time, MAX_LIMIT as i64 + 1],
            row_of,
        )? {
            got.push(self.checked(g?)?);
        }
        let (lo, hi) = got
            .iter()
            .map(|(r, _)| r.time)
            .fold((root.time, root.time), |(lo, hi), t| (lo.min(t), hi.max(t)));
        if let (Some(a), Some(b)) = (root.sender.as_deref(), root.target.as_deref()) {
            let mut st = self.conn.prepare_cached(&format!(
                "SELECT {COLS} FROM mail m
                 WHERE ((m.sender = ?1 AND m.target = ?2) OR (m.sender = ?2 AND m.target = ?1))
                   AND m.time >= ?3 AND m.time <= ?4
                 ORDER BY abs(m.time - ?5), m.id LIMIT ?6"
            ))?;
            for g in st.query_map(
                rusqlite::params![
                    a,
                    b,
                    lo.saturating_sub(THREAD_SPAN_MS),
                    hi.saturating_add(THREAD_SPAN_MS),
                    root.time,
                    MAX_LIMIT as i64 + 1
                ],
                row_of,
            )? {
                let (r, id) = self.checked(g?)?;
                if !got.iter().any(|(_, i)| *i == id) {
                    got.push((r, id));
                }
            }
        }
        // the nearest ones to the message asked for, then oldest first
        got.sort_by_key(|(r, id)| ((r.time - root.time).abs(), *id));
        let truncated = got.len() > MAX_LIMIT;
        got.truncate(MAX_LIMIT);
        got.sort_by_key(|(r, id)| (r.time, *id));
        Ok(Some(Thread {
            root,
            chain,
            rows: got.into_iter().map(|(r, _)| r).collect(),
            truncated,
        }))
    }
}
