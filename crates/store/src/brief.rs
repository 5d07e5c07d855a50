//! What a listing needs from one log, without folding it: the header, the last `session/title`
//! (else the host's first-prompt fallback), and the problems met on the way ([`Brief`]).
//!
//! zstd frames are independent, so the frames are first found by walking their headers (no
//! decompression), then decoded **from the end backwards** until one holds a `session/title`;
//! only when none does is the log read forward for the fallback title. A line is JSON-parsed only
//! when its bytes can hold one of those events (a `memmem` pre-filter). The result is the title
//! the full fold ([`crate::fold::Fold::display_title`]) gives; the tests compare the two on
//! damaged logs (torn and corrupt frames, garbage, lines across frames).
//!
//! Notes: a brief reports the header, the frame structure (garbage, torn last frame), the frames
//! it decoded (corrupt ones) and unreadable titles. Line-level problems in parts a listing never
//! reads are reported by the full fold (`find_request`, `verify`, a read that folds the whole log).

use std::io::{self, Read, Seek, SeekFrom};
use std::sync::OnceLock;

use memchr::memmem::Finder;
use serde_json::value::RawValue;

use crate::events::{is_chunk_row, Envelope, Header, MessageLite, SurfaceOp, TitleData};
use crate::fold::{header_line, oversized_header, prompt_fallback_title, Notes};
use crate::frames::{
    find_magic, next_complete_frame, scan_frame, FrameScan, Loc, Piece, Splitter, Windowed,
};
use crate::log::{budget_note, decode_stream, decode_unit, Encoding, Scratch, BUDGET};

/// The listing's view of one log.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Brief {
    pub header: Option<Header>,
    pub header_error: Option<String>,
    /// Last `session/title` title.
    pub title: Option<String>,
    /// The first-prompt fallback; only looked for when the log has no `session/title`.
    pub fallback_title: Option<String>,
    pub notes: Notes,
}

impl Brief {
    /// The title a listing shows: the last `session/title`, else the host's fallback.
    pub fn display_title(&self) -> Option<&str> {
        self.title.as_deref().or(self.fallback_title.as_deref())
    }
}

/// Where a scan of the same file, grown by appends, can start again: after the last complete
/// frame (zstd) or line (plain), which ended at a line boundary.
/// Its `brief` is always the brief the same scan returned (the index cache keeps only `offset`
/// and resumes from the brief it cached).
#[derive(Debug, Clone)]
pub struct Resume {
    pub offset: u64,
    pub brief: Brief,
}

struct Needles {
    title: Finder<'static>,
    user: Finder<'static>,
    esc_slash: Finder<'static>,
    esc_u: Finder<'static>,
}

fn needles() -> &'static Needles {
    static N: OnceLock<Needles> = OnceLock::new();
    N.get_or_init(|| Needles {
        title: Finder::new(b"session/title"),
        user: Finder::new(b"user/message"),
        // A type written with escapes (`session\/title`, `\u0073ession/title`) still counts.
        esc_slash: Finder::new(b"\\/"),
        esc_u: Finder::new(b"\\u"),
    })
}

/// Can these bytes hold a `session/title` (or, with `fallback`, a `user/message`) event?
fn may_matter(bytes: &[u8], fallback: bool) -> bool {
    let n = needles();
    n.title.find(bytes).is_some()
        || (fallback && n.user.find(bytes).is_some())
        || n.esc_slash.find(bytes).is_some()
        || n.esc_u.find(bytes).is_some()
}

enum Verdict {
    Nothing,
    Title(String),
    BadTitle(u64),
    Fallback(String),
}

/// What one event line (after the header) means for the title, exactly as the fold reads it.
fn judge(bytes: &[u8], fallback: bool) -> Verdict {
    if !may_matter(bytes, fallback) {
        return Verdict::Nothing;
    }
    let Ok(env) = serde_json::from_slice::<Envelope<'_>>(bytes) else {
        return Verdict::Nothing;
    };
    if is_chunk_row(&env.ty) {
        return Verdict::Nothing;
    }
    let Some(seq) = env.seq else {
        return Verdict::Nothing;
    };
    let data = env.data.map(RawValue::get).unwrap_or("null");
    match &*env.ty {
        "session/title" => match serde_json::from_str::<TitleData>(data) {
            Ok(t) => Verdict::Title(t.title),
            Err(_) => Verdict::BadTitle(seq),
        },
        "user/message" if fallback => {
            if env.surface_op.as_ref().and_then(SurfaceOp::parse).is_none() {
                return Verdict::Nothing;
            }
            match serde_json::from_str::<MessageLite<'_>>(data)
                .ok()
                .as_ref()
                .and_then(prompt_fallback_title)
            {
                Some(t) => Verdict::Fallback(t),
                None => Verdict::Nothing,
            }
        }
        _ => Verdict::Nothing,
    }
}

/// A note and where it belongs in file order: (frame or line position, 0 = line / 1 = frame end, offset inside).
type NoteAt = ((u64, u8, u64), String);

fn bad_title(seq: u64) -> String {
    format!("seq {seq}: unreadable session/title; ignored")
}

#[derive(Debug, Clone, Default)]
struct State {
    header: Option<Header>,
    header_error: Option<String>,
    title: Option<String>,
    fallback: Option<String>,
}

impl State {
    fn header_decided(&self) -> bool {
        self.header.is_some() || self.header_error.is_some()
    }

    /// One piece read in file order (the fold's rules).
    fn forward(&mut self, notes: &mut Vec<NoteAt>, p: Piece<'_>) {
        match p {
            Piece::Oversized { len, .. } => {
                oversized_header(&self.header, &mut self.header_error, len);
            }
            Piece::Line { bytes, loc } => {
                if header_line(&mut self.header, &mut self.header_error, bytes) {
                    return;
                }
                match judge(bytes, self.fallback.is_none()) {
                    Verdict::Title(t) => self.title = Some(t),
                    Verdict::BadTitle(seq) => {
                        notes.push(((loc.frame, 0, loc.inner), bad_title(seq)))
                    }
                    Verdict::Fallback(t) => self.fallback = Some(t),
                    Verdict::Nothing => {}
                }
            }
        }
    }

    fn finish(self, mut base: Notes, mut notes: Vec<NoteAt>) -> Brief {
        notes.sort_by_key(|n| n.0);
        for (_, n) in notes {
            base.push(n);
        }
        let fallback_title = if self.title.is_none() {
            self.fallback
        } else {
            None
        };
        Brief {
            header: self.header,
            header_error: self.header_error,
            title: self.title,
            fallback_title,
            notes: base,
        }
    }

    fn of(b: &Brief) -> State {
        State {
            header: b.header.clone(),
            header_error: b.header_error.clone(),
            title: b.title.clone(),
            fallback: b.fallback_title.clone(),
        }
    }
}

/// Scan a log (of trusted size `size`) for its brief, from `base` when the file only grew.
/// Returns the brief and, when a later scan of the grown file may start where this one ended,
/// the point to resume from.
pub fn scan<R: Read + Seek>(
    r: &mut R,
    enc: Encoding,
    size: u64,
    base: Option<&Resume>,
    sc: &mut Scratch,
) -> io::Result<(Brief, Option<Resume>)> {
    sc.reset_budget(BUDGET.get());
    let out = match enc {
        Encoding::Plain => scan_plain(r, size, base, sc),
        Encoding::Zstd => {
            let mut w = Windowed::with_buffer(r, sc.take_window());
            let out = scan_zstd(&mut w, size, base, sc);
            sc.put_window(w.into_buffer());
            out
        }
    };
    if sc.exhausted() {
        // Stopped at the bound: say so, and never resume from a half-read state.
        let (mut b, _) = out?;
        b.notes.push(budget_note(0, size));
        return Ok((b, None));
    }
    out
}

fn scan_plain<R: Read + Seek>(
    r: &mut R,
    size: u64,
    base: Option<&Resume>,
    sc: &mut Scratch,
) -> io::Result<(Brief, Option<Resume>)> {
    let (mut st, start, base_notes) = match base {
        Some(b) => (State::of(&b.brief), b.offset, b.brief.notes.clone()),
        None => (State::default(), 0, Notes::default()),
    };
    let mut notes = Vec::new();
    r.seek(SeekFrom::Start(start))?;
    let mut reader = r.take(size.saturating_sub(start));
    let mut buf = vec![0u8; 256 * 1024];
    let mut sp = Splitter::default();
    let mut pos = start;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !sc.spend(&buf[..n]) {
            break;
        }
        sp.feed(
            &buf[..n],
            Loc {
                frame: 0,
                inner: pos,
            },
            &mut |p| st.forward(&mut notes, p),
        );
        pos += n as u64;
    }
    // A final line without its newline is not a line yet (the fold's rule): resume at its start.
    let offset = sp.partial_start().map_or(pos, |l| l.inner);
    let brief = st.finish(base_notes, notes);
    Ok((brief.clone(), Some(Resume { offset, brief })))
}

/// One decodable stretch of a zstd log.
#[derive(Debug, Clone, Copy)]
struct Unit {
    start: u64,
    end: u64,
    /// The last frame, cut short (a write in flight): decoded as far as it goes.
    torn: bool,
    /// Garbage was skipped just before it: a line cannot continue into it.
    fresh: bool,
}

/// How a decoded unit left the line splitter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Its bytes ended with a newline.
    Clean,
    /// An unfinished line continues into what follows.
    Partial,
    /// It decoded to nothing: the state before it passes through.
    Empty,
    /// Damaged or torn: the unfinished line was dropped.
    Dropped,
}

/// Walk the frames of `[from, size)` without decoding them (the fold's walk, same notes).
fn walk<R: Read + Seek>(
    w: &mut R,
    from: u64,
    size: u64,
    notes: &mut Vec<NoteAt>,
) -> io::Result<Vec<Unit>> {
    let mut units = Vec::new();
    let mut pos = from;
    let mut fresh = false;
    while pos < size {
        match scan_frame(w, pos, size)? {
            FrameScan::Frame { end } => {
                units.push(Unit {
                    start: pos,
                    end,
                    torn: false,
                    fresh,
                });
                fresh = false;
                pos = end;
            }
            FrameScan::Skippable { end } => pos = end,
            FrameScan::Garbage(why) => {
                let next = find_magic(w, pos + 1, size)?.unwrap_or(size);
                notes.push((
                    (pos, 0, 0),
                    format!("byte {pos}: {why}; skipped {} bytes", next - pos),
                ));
                fresh = true;
                pos = next;
            }
            FrameScan::Torn => {
                if let Some(next) = next_complete_frame(w, pos + 4, size)? {
                    units.push(Unit {
                        start: pos,
                        end: next,
                        torn: false,
                        fresh,
                    });
                    fresh = false;
                    pos = next;
                    continue;
                }
                units.push(Unit {
                    start: pos,
                    end: size,
                    torn: true,
                    fresh,
                });
                break;
            }
        }
    }
    Ok(units)
}

/// Decode one unit through `sp`, handing each piece to `on`. With `filter`, a decoded chunk that
/// cannot hold a title is not split into lines (only its unfinished tail is kept).
fn decode<R: Read + Seek>(
    w: &mut R,
    u: Unit,
    sc: &mut Scratch,
    sp: &mut Splitter,
    notes: &mut Vec<NoteAt>,
    filter: bool,
    on: &mut dyn FnMut(Piece<'_>),
) -> io::Result<End> {
    let start = u.start;
    if u.torn {
        // As the fold reads a torn tail: decode as far as it goes, keep its complete lines.
        let mut kept = 0u64;
        let _ = decode_stream(w, start, u.end - start, sc, &mut |chunk, inner| {
            sp.feed(
                chunk,
                Loc {
                    frame: start,
                    inner,
                },
                &mut |p| {
                    kept += 1;
                    on(p)
                },
            )
        })?;
        sp.drop_partial();
        notes.push(((start, 1, 0), format!("torn last frame at byte {start} (a write in flight?): kept its {kept} complete lines")));
        return Ok(End::Dropped);
    }
    let mut any = false;
    let res = decode_unit(w, start, u.end, sc, &mut |chunk, inner| {
        any = true;
        let loc = Loc {
            frame: start,
            inner,
        };
        if filter && !sp.has_partial() && !may_matter(chunk, false) {
            // Nothing here can be a title: keep only the unfinished last line, if any.
            match memchr::memrchr(b'\n', chunk) {
                Some(i) if i + 1 == chunk.len() => {}
                Some(i) => sp.feed(
                    &chunk[i + 1..],
                    Loc {
                        frame: start,
                        inner: inner + i as u64 + 1,
                    },
                    on,
                ),
                None => sp.feed(chunk, loc, on),
            }
        } else {
            sp.feed(chunk, loc, on);
        }
    })?;
    Ok(match res {
        Ok(()) if sp.has_partial() => End::Partial,
        Ok(()) if !any => End::Empty,
        Ok(()) => End::Clean,
        Err(_) if sc.exhausted() => {
            sp.drop_partial();
            End::Dropped
        }
        Err(why) => {
            notes.push((
                (start, 1, 0),
                format!("corrupt zstd frame at byte {start} ({why}); skipped the rest of it"),
            ));
            sp.drop_partial();
            End::Dropped
        }
    })
}

fn scan_zstd<R: Read + Seek>(
    w: &mut Windowed<R>,
    size: u64,
    base: Option<&Resume>,
    sc: &mut Scratch,
) -> io::Result<(Brief, Option<Resume>)> {
    let mut walk_notes = Vec::new();
    let from = base.map_or(0, |b| b.offset);
    let units = walk(w, from, size, &mut walk_notes)?;
    let base_notes = base.map(|b| b.brief.notes.clone()).unwrap_or_default();
    let mut st = base.map(|b| State::of(&b.brief)).unwrap_or_default();
    let n = units.len();

    // 1. Forward until the header is known and a frame ends at a line boundary.
    let mut k = 0;
    let mut head_clean = true;
    if base.is_none() {
        let mut sp = Splitter::default();
        let mut head_notes = Vec::new();
        while k < n && (!st.header_decided() || sp.has_partial()) {
            if units[k].fresh {
                sp.drop_partial();
            }
            let mut line_notes = Vec::new();
            decode(w, units[k], sc, &mut sp, &mut head_notes, false, &mut |p| {
                st.forward(&mut line_notes, p)
            })?;
            head_notes.extend(line_notes);
            k += 1;
        }
        head_clean = !sp.has_partial();
        walk_notes.extend(head_notes);
        if st.header_error.is_some() || st.header.is_none() {
            return Ok((st.finish(base_notes, walk_notes), None));
        }
    }
    let head = st.clone();

    // 2. Backward from the last frame to the first one holding a title: each frame read as it
    // is, from the file (through the window, every frame refilled 256 KiB at its own offset: the
    // brief of the 1 GiB log cost ~1 s of reads instead of ~0.2–0.4 s, issue 18).
    let raw = w.inner_mut();
    let mut back_notes: Vec<NoteAt> = Vec::new();
    let mut found: Option<String> = None;
    let mut ok = true;
    let mut last_end = End::Clean;
    let mut i = n;
    while i > k {
        i -= 1;
        let u = units[i];
        let mut sp = Splitter::default();
        let mut verdicts: Vec<(u64, Verdict)> = Vec::new();
        let end = decode(raw, u, sc, &mut sp, &mut back_notes, true, &mut |p| {
            if let Piece::Line { bytes, loc } = p {
                match judge(bytes, false) {
                    Verdict::Nothing => {}
                    v => verdicts.push((loc.inner, v)),
                }
            }
        })?;
        if i + 1 == n {
            last_end = end;
        } else if !matches!(end, End::Clean | End::Dropped) && !units[i + 1].fresh {
            // A line runs on into the next frame: the frames cannot be read apart.
            ok = false;
            break;
        }
        let mut title = None;
        for (inner, v) in verdicts {
            match v {
                Verdict::Title(t) => title = Some((inner, t)),
                Verdict::BadTitle(seq) => back_notes.push(((u.start, 0, inner), bad_title(seq))),
                _ => {}
            }
        }
        if let Some((inner, t)) = title {
            if inner == 0 && i > k && !u.fresh {
                // Its first line starts a line only if the frame before it ended one.
                let mut sp = Splitter::default();
                let prev = decode(
                    raw,
                    units[i - 1],
                    sc,
                    &mut sp,
                    &mut Vec::new(),
                    true,
                    &mut |_| {},
                )?;
                if !matches!(prev, End::Clean | End::Dropped) {
                    ok = false;
                    break;
                }
            }
            found = Some(t);
            break;
        }
    }

    let mut notes = walk_notes;
    if ok {
        notes.extend(back_notes);
        if let Some(t) = found {
            st.title = Some(t);
        } else if st.title.is_none() && st.fallback.is_none() {
            // 3. No title anywhere: the first human prompt, read forward (its notes are the backward pass's).
            let mut sp = Splitter::default();
            let mut j = k;
            while j < n && st.fallback.is_none() {
                if units[j].fresh {
                    sp.drop_partial();
                }
                decode(w, units[j], sc, &mut sp, &mut Vec::new(), false, &mut |p| {
                    st.forward(&mut Vec::new(), p)
                })?;
                j += 1;
            }
        }
    } else {
        // Forward over everything after the header frames: the fold's own order.
        st = head;
        let mut sp = Splitter::default();
        for &u in &units[k..] {
            if u.fresh {
                sp.drop_partial();
            }
            let mut line_notes = Vec::new();
            last_end = decode(w, u, sc, &mut sp, &mut notes, false, &mut |p| {
                st.forward(&mut line_notes, p)
            })?;
            notes.extend(line_notes);
        }
    }
    let torn = units.last().is_some_and(|u| u.torn);
    let resumable = !torn
        && if n == k {
            head_clean
        } else {
            matches!(last_end, End::Clean | End::Dropped)
        };
    // Not torn: the walk consumed everything up to `size` (frames, skippable frames, garbage).
    let offset = size;
    let brief = st.finish(base_notes, notes);
    let resume = resumable.then(|| Resume {
        offset,
        brief: brief.clone(),
    });
    Ok((brief, resume))
}
