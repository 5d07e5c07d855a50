//! The bodies of the fuzz targets, as plain functions so `cargo test` in this crate can replay the seed
//! corpus without libFuzzer (`fuzz_targets/*.rs` are one-line wrappers).
//!
//! Every function must never panic on any input; the assertions in them are the properties checked.

use std::path::PathBuf;
use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use dsh_session_mail_core::delivery::{cookie, credentials::Secret, envelope, Mode};
use dsh_session_mail_core::mail::{self, guard};
use dsh_session_mail_store::{
    self as store, brief,
    fold::Fold,
    log::{continue_fold, Encoding, Scratch},
};
use serde_json::Value;
use std::io::Cursor;

/// The fixed sender of the header property.
pub const SENDER: &str = "session-0123456789abcdef0123456789abcdef";

/// The line breaks the guard splits at (`mail::guard`: `\n`, `\r`, VT, FF, NEL, U+2028, U+2029).
pub fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

fn is_from_line(line: &str) -> bool {
    matches!(
        guard::check_body(line),
        Err(guard::Forgery::FromHeader { .. })
    )
}

fn is_frame_line(line: &str) -> bool {
    matches!(
        guard::check_body(line),
        Err(guard::Forgery::FrameLine { .. })
    )
}

/// Split the input at the first NUL: (first, rest). No NUL: ("", all).
fn split_nul(s: &str) -> (&str, &str) {
    match s.find('\0') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => ("", s),
    }
}

/// `header_guard`: `check_body` never panics; a body it accepts, behind the From header of a fixed sender,
/// gives a text with exactly one From header line (the first); framed, it gives exactly the frame's own
/// lines and no From header.
pub fn header_guard(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (title, body) = split_nul(&text);
    let verdict = guard::check_body(body);
    if verdict.is_err() {
        return;
    }
    // send_session_message
    let delivered = mail::with_from_header(SENDER, body);
    let lines: Vec<&str> = delivered.split(is_line_break).collect();
    assert!(
        is_from_line(lines[0]),
        "the plugin's own header is not recognized: {:?}",
        lines[0]
    );
    let from_lines = lines.iter().filter(|l| is_from_line(l)).count();
    assert_eq!(
        from_lines, 1,
        "a guard-accepted body made a second From header: {body:?}"
    );
    assert_eq!(lines.len(), 1 + body.split(is_line_break).count());

    // sessions_send: the frame around the body, with a title from the input. The title is fixed to
    // one line (its own line breaks are the sender's title, not the body's), so count the frame's lines
    // on a clean reference frame.
    let title = title.replace(is_line_break, " ");
    let framed = mail::frame(SENDER, Some(&title), "queue", Some((1, 4)), body);
    let reference = mail::frame(SENDER, Some(&title), "queue", Some((1, 4)), "ok");
    let count = |t: &str| {
        let ls: Vec<&str> = t.split(is_line_break).collect();
        (
            ls.iter().filter(|l| is_frame_line(l)).count(),
            ls.iter().filter(|l| is_from_line(l)).count(),
        )
    };
    assert_eq!(
        count(&framed),
        count(&reference),
        "a guard-accepted body changed the frame: {body:?}"
    );
    assert_eq!(
        framed.split(is_line_break).count(),
        reference.split(is_line_break).count() - 1 + body.split(is_line_break).count()
    );
}

/// Fields cut from the input at NULs.
fn fields(data: &[u8], n: usize) -> Vec<String> {
    let text = String::from_utf8_lossy(data);
    let mut v: Vec<String> = text.splitn(n, '\0').map(str::to_string).collect();
    v.resize(n, String::new());
    v
}

fn i64_from(data: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    for (i, x) in b.iter_mut().enumerate() {
        *x = data.get(at + i).copied().unwrap_or(0);
    }
    i64::from_le_bytes(b)
}

/// `envelope_cookie`: every envelope is valid JSON carrying its inputs unchanged; `parse_response` never
/// panics; authority normalization never panics and is idempotent; a minted cookie has the host's shape
/// and its body decodes to the payload JSON.
pub fn envelope_cookie(data: &[u8]) {
    let f = fields(data, 6);
    let (rid, sid, text, rpc, authority, secret_text) = (&f[0], &f[1], &f[2], &f[3], &f[4], &f[5]);
    let mode = if data.first().is_some_and(|b| b & 1 == 1) {
        Mode::Steer
    } else {
        Mode::Queue
    };

    let v: Value =
        serde_json::from_str(&envelope::rc8_prompt(rid, sid, mode, text)).expect("rc8_prompt JSON");
    assert_eq!(v["rpcId"].as_str(), Some(rid.as_str()));
    assert_eq!(v["payload"]["sessionId"].as_str(), Some(sid.as_str()));
    assert_eq!(
        v["payload"]["content"][0]["text"].as_str(),
        Some(text.as_str())
    );
    assert_eq!(v["payload"]["mode"].as_str(), Some(mode.as_str()));

    let v: Value = serde_json::from_str(&envelope::v2_prompt(rpc, rid, sid, mode, text))
        .expect("v2_prompt JSON");
    let r = &v["payload"]["args"]["request"];
    assert_eq!(v["rpcId"].as_str(), Some(rpc.as_str()));
    assert_eq!(r["requestId"].as_str(), Some(rid.as_str()));
    assert_eq!(r["sessionId"].as_str(), Some(sid.as_str()));
    assert_eq!(r["content"][0]["text"].as_str(), Some(text.as_str()));

    let before = u64::try_from(i64_from(data, 1)).ok();
    let max = u32::try_from(i64_from(data, 2) & 0xffff_ffff).unwrap_or(0);
    let v: Value = serde_json::from_str(&envelope::rc8_history(rpc, sid, before, max))
        .expect("rc8_history JSON");
    assert_eq!(v["payload"]["maxMessages"].as_u64(), Some(u64::from(max)));
    let v: Value = serde_json::from_str(&envelope::rc8_describe(rpc)).expect("rc8_describe JSON");
    assert_eq!(v["method"], "host.describe");

    // the response reader on anything
    let _ = envelope::parse_response(&String::from_utf8_lossy(data));
    let _ = envelope::parse_response(text);

    // authority normalization
    if let Some(a) = cookie::normalize_authority(authority) {
        assert_eq!(
            cookie::normalize_authority(&a).as_deref(),
            Some(a.as_str()),
            "not idempotent for {authority:?}"
        );
        assert!(!a.is_empty());
        let name = cookie::cookie_name(&a);
        assert!(name.starts_with(cookie::COOKIE_PREFIX));
        assert!(name[cookie::COOKIE_PREFIX.len()..]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));

        // minting: a secret from the input (any 32 bytes), times in the range the host accepts
        // (JS safe integers: the binding's f64 clock cannot carry more).
        let mut key = [0u8; 32];
        for (i, k) in key.iter_mut().enumerate() {
            *k = data.get(i).copied().unwrap_or(i as u8);
        }
        let secret = Secret::from_b64url(&URL_SAFE_NO_PAD.encode(key)).expect("32 bytes decode");
        let now = i64_from(data, 3).rem_euclid(1 << 53);
        let header = cookie::cookie_header(&secret, &a, now);
        let (n, value) = header.split_once('=').expect("name=value");
        assert_eq!(n, name);
        let parts: Vec<&str> = value.split('.').collect();
        assert_eq!(parts.len(), 3, "{value}");
        assert_eq!(parts[0], "v1");
        let payload = URL_SAFE_NO_PAD.decode(parts[1]).expect("body is base64url");
        let p: Value = serde_json::from_slice(&payload).expect("body is JSON");
        assert_eq!(p["authority"].as_str(), Some(a.as_str()));
        assert_eq!(p["issuedAt"].as_i64(), Some(now));
        assert_eq!(p["expiresAt"].as_i64(), Some(now + cookie::COOKIE_TTL_MS));
        assert_eq!(
            URL_SAFE_NO_PAD.decode(parts[2]).map(|s| s.len()).ok(),
            Some(32)
        );
    }
    // secrets from text never panic, and a decoded one mints
    if let Ok(s) = Secret::from_b64url(secret_text) {
        let _ = cookie::cookie_value(&s, authority, 0, cookie::COOKIE_TTL_MS);
    }
}

fn scratch() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = tempfile::Builder::new()
            .prefix("dsh-session-mail-fuzz-")
            .tempdir()
            .expect("temp dir")
            .keep();
        std::fs::create_dir_all(d.join("sessions").join("-w").join(SESSION)).expect("session dir");
        d
    })
}

const SESSION: &str = "session-fuzz";
const LOG_NAMES: [&str; 4] = [
    "session.v4.jsonl.zstd",
    "session.v4.jsonl",
    "session.jsonl.zstd",
    "session.jsonl",
];

/// `log_reader`: the store never panics on any session log, plain or zstd (valid frames or garbage, or a
/// host-shaped log the input scripts: selector 4–7, `store::testgen::scripted`), and the readers agree:
/// the listing's brief scan (`store::brief::scan`, frames decoded from the end backwards) gives the same
/// header and title as the full fold (`store::log::continue_fold`), a read from the end
/// (`store::window`) declines or gives the full fold's answer, and a fold resumed after an append equals
/// a cold fold of the whole input. Then the lookups through a temp home (`find_session`, `find_request`).
pub fn log_reader(data: &[u8]) {
    let (sel, rest) = data.split_first().unwrap_or((&0, &[]));
    let (name, bytes): (&str, Vec<u8>) = match sel % 8 {
        0 => ("session.jsonl", rest.to_vec()),
        1 => ("session.v4.jsonl", rest.to_vec()),
        // valid zstd frames around the input, cut at NULs (so lines may run across frames)
        2 => (
            "session.v4.jsonl.zstd",
            rest.split_inclusive(|&b| b == 0)
                .flat_map(|c| zstd::encode_all(c, 1).unwrap_or_default())
                .collect(),
        ),
        // raw bytes where a zstd frame should be
        3 => ("session.jsonl.zstd", rest.to_vec()),
        // a host-shaped log the input scripts (`store::testgen::scripted`): compactions from the
        // head and of middle spans, prunes, renames, frame ends where the script puts them
        _ => ("session.jsonl.zstd", store::testgen::scripted(rest)),
    };
    let enc = if name.ends_with(".zstd") {
        Encoding::Zstd
    } else {
        Encoding::Plain
    };
    readers_agree(&bytes, enc);

    let home = scratch();
    let dir = home.join("sessions").join("-w").join(SESSION);
    for n in LOG_NAMES {
        let _ = std::fs::remove_file(dir.join(n));
    }
    std::fs::write(dir.join(name), &bytes).expect("write the log");
    if let Some(meta) = store::find_session(home, SESSION) {
        assert_eq!(meta.log_path, dir.join(name));
        let _ = meta.is_subagent();
    }
    let _ = store::find_request(
        home,
        SESSION,
        "dsh-session-mail:00000000-0000-4000-8000-000000000000",
    );
}

/// The fold's view (the committed state plus a torn last frame's complete lines).
fn fold_view(bytes: &[u8], enc: Encoding, base: Fold) -> Option<(Fold, Fold)> {
    let (committed, tail) =
        continue_fold(&mut Cursor::new(bytes), enc, bytes.len() as u64, base).ok()?;
    let view = tail.unwrap_or_else(|| committed.clone());
    Some((committed, view))
}

fn readers_agree(bytes: &[u8], enc: Encoding) {
    let Some((_, view)) = fold_view(bytes, enc, Fold::default()) else {
        return;
    };
    let mut sc = Scratch::new();
    let Ok((b, _)) = brief::scan(
        &mut Cursor::new(bytes),
        enc,
        bytes.len() as u64,
        None,
        &mut sc,
    ) else {
        return;
    };
    assert_eq!(
        b.header, view.header,
        "brief and fold disagree on the header"
    );
    assert_eq!(
        b.header_error, view.header_error,
        "brief and fold disagree on the header error"
    );
    // Past the decode budget the two readers stop at different places (the brief reads backwards).
    let stopped = |n: &dsh_session_mail_store::fold::Notes| {
        n.items.iter().any(|x| x.contains("stopped reading"))
    };
    if stopped(&view.notes) || stopped(&b.notes) {
        return;
    }
    if view.header.is_some() {
        assert_eq!(
            b.display_title(),
            view.display_title(),
            "brief and fold disagree on the title"
        );
    }
    // A read from the end (`store::window`, `sessions_read`'s cold path): declines, or the fold's answer.
    if enc == Encoding::Zstd {
        if let Some(w) = dsh_session_mail_store::window::view_from_end(
            &mut Cursor::new(bytes),
            bytes.len() as u64,
        ) {
            let key = |f: &Fold| {
                (
                    f.header.clone(),
                    f.display_title().map(str::to_string),
                    f.last_seq,
                    f.surface
                        .iter()
                        .map(|n| (n.seq, n.loc, n.replaced, n.is_error, n.label.to_string()))
                        .collect::<Vec<_>>(),
                    // what a read reports of the log's notes (those about its surface's lines)
                    f.read_notes(),
                )
            };
            assert_eq!(key(&w), key(&view), "the window and the fold disagree");
        }
    }
    // Resume after a prefix (an append): same surface and title as the cold fold.
    if let Some(cut) = bytes.len().checked_div(2).filter(|&c| c > 0) {
        if let Some((first, _)) = fold_view(&bytes[..cut], enc, Fold::default()) {
            if let Some((_, resumed)) = fold_view(bytes, enc, first) {
                let seqs = |f: &Fold| f.surface.iter().map(|n| n.seq).collect::<Vec<_>>();
                if view.notes.is_empty() && resumed.notes.is_empty() {
                    assert_eq!(
                        seqs(&resumed),
                        seqs(&view),
                        "a resumed fold differs from a cold one"
                    );
                    assert_eq!(resumed.display_title(), view.display_title());
                }
            }
        }
    }
}

/// `read_render` (issue 11 #6): a message body of any text (separator- and invisible-laden) can never
/// add a line that reads as our structure: the rendered read has exactly one delimiter line per
/// message, no `(N earlier messages omitted)`/`(hidden: …)`/`note:` line we did not write, and no
/// line break other than `\n`. Input: `<body1>\0<body2>`.
pub fn read_render(data: &[u8]) {
    use dsh_session_mail_core::render::read::{render_read, Hidden, ReadHead, ReadMessage};
    let text = String::from_utf8_lossy(data);
    let bodies: Vec<&str> = text.splitn(2, '\0').collect();
    let head = ReadHead {
        id: "session-x".into(),
        live: false,
        subagent: false,
        parent: None,
        cwd: Some("/w".into()),
        title: Some("t".into()),
        readable: bodies.len(),
        captured_through: Some(9),
        since: None,
    };
    let msgs: Vec<ReadMessage> = bodies
        .iter()
        .enumerate()
        .map(|(i, b)| ReadMessage {
            role: "user",
            seq: i as u64 + 1,
            label: "user".into(),
            request: None,
            injected: false,
            replaced: false,
            error: false,
            body: b.to_string(),
        })
        .collect();
    let out = render_read(&head, &msgs, 0, Hidden::default(), &[], 100_000);
    assert!(
        !out.chars().any(|c| is_line_break(c) && c != '\n'),
        "a break other than \\n survived"
    );
    let visible = |l: &str| -> String {
        l.chars()
            .filter(|c| !dsh_session_mail_core::mail::guard::is_invisible(*c))
            .collect::<String>()
            .trim()
            .to_lowercase()
    };
    let lines: Vec<&str> = out.split('\n').collect();
    let delimiters = lines
        .iter()
        .filter(|l| visible(l).starts_with("--"))
        .count();
    assert_eq!(
        delimiters,
        msgs.len(),
        "a body posed as a message delimiter: {out:?}"
    );
    for l in &lines[3..] {
        let v = visible(l);
        assert!(!v.starts_with("note:"), "a body posed as a note: {l:?}");
        assert!(
            !(v.starts_with('(') && v.contains("earlier messages omitted")),
            "{l:?}"
        );
    }
}

/// `surface_ops` (issue 11 #1): the fold's surface (slot map + skip links) equals a plain vector
/// under any sequence of appends, range replaces and oldest-drops (the replace storms).
/// Each input byte pair is one op.
pub fn surface_ops(data: &[u8]) {
    use dsh_session_mail_store::events::Role;
    use dsh_session_mail_store::fold::{Class, Node, Surface};
    let node = |seq: u64| Node {
        seq,
        role: Role::User,
        class: Class::Conversation,
        replaced: false,
        is_error: false,
        label: "u".into(),
        request: None,
        loc: Default::default(),
    };
    let mut s = Surface::default();
    let mut r: Vec<u64> = Vec::new();
    let mut seq = 0u64;
    for op in data.chunks(2) {
        let (a, b) = (op[0], op.get(1).copied().unwrap_or(0));
        seq += 1;
        match a % 4 {
            0 | 1 => {
                s.push(node(seq));
                r.push(seq);
            }
            2 if !r.is_empty() => {
                let i = (b as usize) % r.len();
                let j = ((a as usize / 4) % r.len()).max(i);
                let (start, end) = (r[i], r[j]);
                if i < j {
                    // the wrong order is refused and changes nothing
                    assert!(s.replace(end, start, node(u64::MAX)).is_err());
                }
                assert!(s.replace(start, end, node(seq)).is_ok());
                r.splice(i..=j, [seq]);
            }
            3 if !r.is_empty() => {
                s.drop_oldest();
                r.remove(0);
            }
            _ => {}
        }
        assert_eq!(s.len(), r.len());
    }
    let got: Vec<u64> = s.iter().map(|n| n.seq).collect();
    assert_eq!(got, r);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(target: &str) -> Vec<Vec<u8>> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("corpus")
            .join(target);
        let mut v: Vec<Vec<u8>> = std::fs::read_dir(dir)
            .map(|it| {
                it.flatten()
                    .filter_map(|e| std::fs::read(e.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        v.push(Vec::new());
        v
    }

    #[test]
    fn seeds_replay_header_guard() {
        for d in corpus("header_guard") {
            header_guard(&d);
        }
    }

    #[test]
    fn seeds_replay_envelope_cookie() {
        for d in corpus("envelope_cookie") {
            envelope_cookie(&d);
        }
    }

    #[test]
    fn seeds_replay_read_render() {
        for d in corpus("read_render") {
            read_render(&d);
        }
    }

    #[test]
    fn seeds_replay_surface_ops() {
        for d in corpus("surface_ops") {
            surface_ops(&d);
        }
    }

    #[test]
    fn seeds_replay_log_reader() {
        for d in corpus("log_reader") {
            log_reader(&d);
        }
    }
}

#[cfg(test)]
mod probes {
    /// Known gap (reported, not fixed here: `mail::frame` is not this branch's file): the frame quotes the
    /// sender's title with serde_json, which leaves U+2028, U+2029 and NEL unescaped, and the guard treats
    /// those as line breaks. `header_guard` therefore folds line breaks out of its fuzzed titles.
    #[test]
    fn title_line_breaks_survive_json_quoting() {
        // Fixed: `frame` folds separators in the title to spaces, so the frame keeps its 7 lines
        // (title, from-session, delivery, authority, begins, body, ends).
        let f = dsh_session_mail_core::mail::frame(
            super::SENDER,
            Some("t\u{2028}--- message ends ---"),
            "queue",
            None,
            "b",
        );
        assert_eq!(f.split(super::is_line_break).count(), 7, "{f:?}");
    }
}
