//! A read of a long log from its end (issue 18): the fold of the newest frames only, when they
//! prove what the full fold's current surface is.
//!
//! zstd frames are independent, so the frames are found by walking their headers (no
//! decompression), then decoded from the last one backwards. The newest frames are folded by the
//! ordinary [`Fold`], started "in window mode": the history before the first decoded frame is an
//! unknown prefix of the surface. Appends and replaces among decoded nodes are exact whatever
//! that prefix holds (a decoded node sits after every node of the prefix). The prefix is removed
//! by one thing only: a compaction checkpoint whose range starts before the window and ends on a
//! decoded node, right after its `compaction/summary` with the same `shadowedRange` — rc.8
//! appends the two together (`compaction-basic/src/region.ts` `commitCompactionBody`) — and
//! whose start is the head of the surface, so everything before the range's end goes. rc.8's own
//! compactions start there (`selectCompactableRange`: `start` is `surfaceNodes[0]`), but a
//! compaction need not: [`Chain`] checks it. Any other replace that reaches into the unknown
//! prefix (a pruned old tool result, a range not on the surface, a compaction of a middle span)
//! makes the window decode further back, down to that seq.
//!
//! The window is the answer when, after its last frame, the prefix is gone, the fold needed no
//! seq it did not decode, and it noted nothing (a note cites line numbers counted from the first
//! line of the log). Otherwise — no checkpoint, damage, a line across frames, more than the
//! window's budget — the caller folds the whole log. The header and the title come from the
//! listing's brief of the same log (header frame; last `session/title`, else the first-prompt
//! fallback), which the window's own titles can only confirm.
//!
//! What a window fold does not know: the requests (`find_request`, `verify`, the queue's checks
//! keep the full fold) and the notes about lines before the window — which a read does not report
//! either way (`Fold::read_notes`: the notes about the lines of the current surface; a window
//! decodes every such line, and declines when one has a note). See docs/store.md "Window read".
//!
//! What it takes from the host for the history it does not decode (rc.8 = toninfo/deepseek-harness
//! at `48fb3b528b`, release 0.1.0-rc.8):
//! 1. **A replace names nodes on the surface.** `Session.append` validates every event before
//!    it enters the log (`packages/core/session/src/index.ts` `append` →
//!    `surfaceManager.validateNext` → `surface.ts` `planSurfaceEvent` → `replacementRange`, which
//!    throws when `start` or `end` is not on the surface), and a log is loaded through the same
//!    check (`index.ts`, the seed loop: `invalid seed event`). So a replace wholly inside the
//!    prefix was valid there; only a log rc.8 would refuse to load breaks it.
//! 2. **Seqs are contiguous from 0.** `append` gives `seq: this.log.length`; a loaded seed must be
//!    "contiguous from 0" (`index.ts`), and `planSurfaceEvent` refuses any other seq.
//!
//! **Not taken from the host: that a compaction starts at the head of the surface.** Every
//! compaction rc.8 itself runs picks its range with `selectCompactableRange`
//! (`packages/compaction/compaction-basic/src/region.ts`: `start` is `surfaceNodes[0]`): pressure
//! and overflow (`compaction-basic/src/index.ts` `compactIfNeeded`) and `/compact` (`compactNow`).
//! But `compactRegion(start, end)` is a public method of the compaction service
//! (`packages/compaction/compaction/src/index.ts`, listed in
//! `packages/extensions/tool-cordis/src/api-catalog.ts`), and `region.ts` `validateSurfaceRegion`
//! accepts any balanced span of the surface: a plugin can compact a middle span, and the nodes
//! before it stay. So the window checks it ([`Chain`]) before it drops the prefix.

use std::collections::VecDeque;
use std::io::{self, Read, Seek};

use memchr::memmem;

use crate::brief::Brief;
use crate::events::{Envelope, Header, Role, SurfaceOp, TitleData};
use crate::fold::Fold;
use crate::frames::{next_complete_frame, scan_frame, FrameScan, Loc, Windowed};
use crate::log::{continue_fold, decode_unit, Encoding, Scratch, WINDOW};
use crate::threshold::Threshold;

/// Logs smaller than this (file bytes) are folded whole: cheap, and exactly as before.
pub const WINDOW_MIN: u64 = 2 * 1024 * 1024;
/// Most decompressed bytes a window decodes before it gives up (then the full fold).
pub const WINDOW_MAX: u64 = 32 * 1024 * 1024;

/// [`WINDOW_MIN`]; tests lower it for their thread (they read small logs from the end).
pub(crate) static MIN: Threshold = Threshold::new(WINDOW_MIN);

pub(crate) fn window_min() -> u64 {
    MIN.get()
}

/// `DSH_SESSION_MAIL_NO_WINDOW=1`: every read folds the whole log (the bench's baseline).
pub(crate) fn disabled() -> bool {
    std::env::var_os("DSH_SESSION_MAIL_NO_WINDOW").is_some_and(|v| v == "1")
}

/// What one attempt over the decoded frames showed.
enum Outcome {
    Done(Box<Fold>),
    /// Decode back to this seq, then try again.
    Seq(u64),
    /// No checkpoint removed the prefix: decode back to the next `compaction/summary`.
    Checkpoint,
    /// The window cannot give the full fold's answer.
    Fail,
}

struct Decoded {
    start: u64,
    bytes: Vec<u8>,
    first_seq: Option<u64>,
    checkpoint: bool,
}

/// Whether the decoded frames (oldest first) reach back to seq `s`: the first seq of the oldest one
/// with an event is at or below it, so decoding further back cannot bring `s` in.
fn holds(frames: &VecDeque<Decoded>, s: u64) -> bool {
    frames
        .iter()
        .find_map(|d| d.first_seq)
        .is_some_and(|f| f <= s)
}

/// The seq of the first event in `bytes` (a packed chunk row counts with its `seq0`).
fn first_seq(bytes: &[u8]) -> Option<u64> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice::<Envelope<'_>>(l).ok())
        .find_map(|e| e.seq.or(e.seq0))
}

/// The log's header and title as the full fold has them: from the listing's brief of the same
/// file when this process has one, else found by the window itself.
struct Head {
    header: Header,
    /// Decided: the last `session/title` (None: no title; then `fallback` is the brief's).
    title: Option<Option<String>>,
    fallback: Option<String>,
}

fn attempt(head: &Head, title: Option<String>, frames: &VecDeque<Decoded>) -> Outcome {
    let Some(first) = frames.iter().find_map(|d| d.first_seq) else {
        return Outcome::Checkpoint;
    };
    let mut f = Fold::window_start(head.header.clone(), title, head.fallback.clone(), first);
    for d in frames {
        f.feed(
            &d.bytes,
            Loc {
                frame: d.start,
                inner: 0,
            },
        );
    }
    let Some(m) = f.window.clone() else {
        return Outcome::Fail;
    };
    if m.broken || !f.notes.is_empty() || f.splitter.has_partial() {
        return Outcome::Fail;
    }
    match (m.need, m.resolved, m.soft) {
        (Some(s), _, _) => Outcome::Seq(s),
        (None, true, _) => Outcome::Done(Box::new(f)),
        (None, false, Some(s)) => Outcome::Seq(s),
        (None, false, None) => Outcome::Checkpoint,
    }
}

enum TitleScan {
    Nothing,
    Title(String),
    /// An unreadable `session/title`: the full fold notes it.
    Bad,
}

/// The last `session/title` among the lines of one frame, read as the fold reads it (a line is
/// parsed only when its bytes can hold one: the type itself, or written with escapes).
fn last_title(bytes: &[u8]) -> TitleScan {
    let title = memmem::Finder::new(b"session/title");
    let esc = [memmem::Finder::new(b"\\/"), memmem::Finder::new(b"\\u")];
    let may = |b: &[u8]| title.find(b).is_some() || esc.iter().any(|f| f.find(b).is_some());
    if !may(bytes) {
        return TitleScan::Nothing;
    }
    let mut out = TitleScan::Nothing;
    for line in bytes.split(|b| *b == b'\n').filter(|l| may(l)) {
        let Ok(env) = serde_json::from_slice::<Envelope<'_>>(line) else {
            continue;
        };
        if env.seq.is_none() || env.ty != "session/title" {
            continue;
        }
        let data = env
            .data
            .map(serde_json::value::RawValue::get)
            .unwrap_or("null");
        match serde_json::from_str::<TitleData>(data) {
            Ok(t) => out = TitleScan::Title(t.title),
            Err(_) => return TitleScan::Bad,
        }
    }
    out
}

/// The complete frames of a log (start, end), found from their headers, and the scratch that
/// decodes them.
struct Units {
    units: Vec<(u64, u64)>,
    sc: Scratch,
}

impl Units {
    /// Frame `i` decoded; None: it is corrupt.
    fn raw<R: Read + Seek>(&mut self, r: &mut R, i: usize) -> io::Result<Option<Vec<u8>>> {
        self.raw_with(r, i, None)
    }

    /// [`Units::raw`], decoded with `sc` (its own budget) when given; None also when that budget
    /// runs out.
    fn raw_with<R: Read + Seek>(
        &mut self,
        r: &mut R,
        i: usize,
        sc: Option<&mut Scratch>,
    ) -> io::Result<Option<Vec<u8>>> {
        let (start, end) = self.units[i];
        let mut bytes = Vec::new();
        let sc = sc.unwrap_or(&mut self.sc);
        let ok = decode_unit(r, start, end, sc, &mut |c, _| bytes.extend_from_slice(c))?;
        Ok(ok.is_ok().then_some(bytes))
    }

    /// Frame `i` decoded whole; None: it is corrupt, or its last line runs on into the next frame
    /// (then the frames cannot be read apart).
    fn whole<R: Read + Seek>(&mut self, r: &mut R, i: usize) -> io::Result<Option<Vec<u8>>> {
        Ok(self
            .raw(r, i)?
            .filter(|b| b.last().is_none_or(|b| *b == b'\n')))
    }
}

/// Most decompressed bytes one read's head check ([`Chain::at_head`]) decodes before it gives up
/// (then the full fold): an eighth of the full fold's budget (`log::DECODE_BUDGET`). The 1 GiB
/// bench log's 1,522 compactions cost 27 MB of it (about 2 frames each).
pub const CHAIN_MAX: u64 = 256 * 1024 * 1024;
/// Most frames one lookup of a seq decodes (an interpolation search over ~150 k frames needs a
/// handful).
const PROBES: usize = 64;

/// The check that the compaction ending a window's unknown prefix starts at the head of the
/// surface, by its chain of earlier replaces (the frames are found by seq, not read in order).
///
/// The head of the surface is the first node ever appended until a replace whose range starts at
/// the head puts its node there — nothing else ever stands before the head: an append goes to the
/// end, a replace's node takes its range's place, the oldest node goes only past
/// [`crate::fold::MAX_SURFACE`] (then the head is one that was neither: this check says no). So
/// node `s`, still on the surface (host rule 2, module comment), is the head iff the event at
/// seq `s` is the log's first surface node, or a replace whose `start` was the head when it
/// ran — the same question one step further back. rc.8's compactions form exactly that chain
/// (each starts at the previous checkpoint's node, the first at the first prompt); a
/// `compactRegion` of a middle span breaks it (its `start` is a node that was appended after
/// others), and so does a chain the check cannot read within [`CHAIN_MAX`] (a corrupt frame, a
/// line across frames, a seq it cannot find): every one of those is "no".
struct Chain<'a> {
    /// What the check keeps of each frame it looked at.
    spans: std::collections::HashMap<usize, Span>,
    /// The bytes of the frame looked at last (frame 0's are `frame0`).
    last: Option<(usize, Vec<u8>)>,
    /// The header frame, as the read decoded it (not decoded again).
    frame0: &'a [u8],
    /// `frame0`'s cost is charged to the budget (once, as one decode of it would be).
    frame0_charged: bool,
    /// The check's own decoder, its budget [`CHAIN_MAX`] (a frame that decodes to more stops it
    /// there, not after).
    sc: Scratch,
    /// What the check cost so far.
    cost: Cost,
    /// Decided already: the anchor and the answer (a window tried again asks once more).
    known: Vec<(u64, bool)>,
}

/// What a read's head check cost: the manual timing (`window_on_a_real_log`) reports it; nothing
/// decides by it (the budget is `Chain::sc`'s, a walk's first probe its own: [`Chain::at_head`]).
#[derive(Clone, Copy, Default)]
struct Cost {
    /// Bytes decoded.
    spent: u64,
    /// Frames decoded.
    decodes: usize,
    /// Replaces walked back.
    steps: usize,
}

/// A line of a frame that the full fold reads as an event (not the header, not over the line
/// cap), parsed as the fold parses it.
fn event_line(line: &[u8]) -> Option<Envelope<'_>> {
    if line.len() >= crate::frames::LINE_CAP {
        return None;
    }
    serde_json::from_slice::<Envelope<'_>>(line).ok()
}

/// Only where a line sits in the log (the search aid: nothing else of the line is kept).
#[derive(serde::Deserialize)]
struct SeqOnly {
    #[serde(default)]
    seq: Option<u64>,
    #[serde(default)]
    seq0: Option<u64>,
}

/// What the check keeps of a frame it decoded (not its bytes).
#[derive(Clone, Copy)]
struct Span {
    /// (first, last) seq of its lines ([`span_of`]); None: no event line in it.
    seqs: Option<(u64, u64)>,
    /// It ends a line (its last byte is a newline, or it is empty): the next frame's first line
    /// is a whole line.
    ends_line: bool,
}

impl Span {
    fn of(bytes: &[u8]) -> Span {
        Span {
            seqs: span_of(bytes),
            ends_line: bytes.last().is_none_or(|c| *c == b'\n'),
        }
    }
}

/// The first and the last seq among the lines of a frame (a search aid only: the line that
/// answers is checked on its own).
fn span_of(bytes: &[u8]) -> Option<(u64, u64)> {
    let seq = |l: &[u8]| {
        serde_json::from_slice::<SeqOnly>(l)
            .ok()
            .and_then(|e| e.seq.or(e.seq0))
    };
    let first = bytes.split(|b| *b == b'\n').find_map(seq)?;
    let last = bytes.rsplit(|b| *b == b'\n').find_map(seq)?;
    Some((first, last.max(first)))
}

impl<'a> Chain<'a> {
    /// The check of one read; `frame0`: its header frame, decoded whole.
    fn new(frame0: &'a [u8]) -> Chain<'a> {
        let mut sc = Scratch::new();
        sc.reset_budget(CHAIN_MAX);
        Chain {
            spans: Default::default(),
            last: None,
            frame0,
            frame0_charged: false,
            sc,
            cost: Cost::default(),
            known: Vec::new(),
        }
    }

    /// Frame `i` decoded into `self.last`; false: it cannot be read (corrupt, the budget spent).
    fn decode<R: Read + Seek>(&mut self, log: &mut Units, r: &mut R, i: usize) -> io::Result<bool> {
        if self.last.as_ref().is_some_and(|(j, _)| *j == i) {
            return Ok(true);
        }
        if i == 0 {
            // The read holds it: only its cost against the budget, the first time.
            if !self.frame0_charged {
                if !self.sc.spend(self.frame0) {
                    return Ok(false);
                }
                self.frame0_charged = true;
            }
            self.last = Some((0, Vec::new()));
            return Ok(true);
        }
        let Some(bytes) = log.raw_with(r, i, Some(&mut self.sc))? else {
            return Ok(false);
        };
        self.cost.spent += bytes.len() as u64;
        self.cost.decodes += 1;
        self.last = Some((i, bytes));
        Ok(true)
    }

    fn bytes(&self) -> &[u8] {
        match &self.last {
            Some((0, _)) => self.frame0,
            Some((_, b)) => b,
            None => &[],
        }
    }

    /// What the check keeps of frame `i` (decoded at its first look). Err(()) : it cannot be
    /// read (corrupt, the budget spent).
    fn span<R: Read + Seek>(
        &mut self,
        log: &mut Units,
        r: &mut R,
        i: usize,
    ) -> io::Result<Result<Span, ()>> {
        if let Some(s) = self.spans.get(&i) {
            return Ok(Ok(*s));
        }
        if !self.decode(log, r, i)? {
            return Ok(Err(()));
        }
        let s = Span::of(self.bytes());
        self.spans.insert(i, s);
        Ok(Ok(s))
    }

    /// The event at seq `s` — in a frame at or before `hi`, whose events are all before `hi_seq` —
    /// as the full fold reads it: its type and surface op. `guess`: the frame to look at first.
    /// None: not found as one whole line, or found twice in its frame, or anything doubtful.
    fn event_at<R: Read + Seek>(
        &mut self,
        log: &mut Units,
        r: &mut R,
        s: u64,
        (mut hi, mut hi_seq): (usize, u64),
        mut guess: Option<usize>,
    ) -> io::Result<Option<(usize, String, Option<serde_json::Value>)>> {
        let (mut lo, mut lo_seq) = (0usize, 0u64);
        let mut found = None;
        for probe in 0..PROBES {
            if lo > hi {
                return Ok(None);
            }
            // The guess, else interpolation (seqs grow about evenly over the frames); from the
            // fourth probe on every other one halves (a skewed log still converges).
            let j = match guess.take() {
                Some(g) => g.clamp(lo, hi),
                None if (probe < 3 || probe % 2 == 0) && hi_seq > lo_seq && s >= lo_seq => {
                    let w = (hi - lo) as u128 + 1;
                    (lo + ((s - lo_seq) as u128 * w / (hi_seq - lo_seq) as u128) as usize).min(hi)
                }
                None => lo + (hi - lo) / 2,
            };
            // The first frame from `j` on that holds an event line.
            let mut k = j;
            let span = loop {
                if k > hi {
                    break None;
                }
                match self.span(log, r, k)?.map(|sp| sp.seqs) {
                    Err(()) => return Ok(None),
                    Ok(Some(sp)) => break Some(sp),
                    Ok(None) => k += 1,
                }
            };
            match span {
                // Frames `j..=hi` hold no event.
                None => match j.checked_sub(1) {
                    Some(h) => hi = h,
                    None => return Ok(None),
                },
                Some((f, _)) if s < f => match j.checked_sub(1) {
                    Some(h) => (hi, hi_seq) = (h, f),
                    None => return Ok(None),
                },
                Some((_, l)) if s > l => (lo, lo_seq) = (k + 1, l + 1),
                Some(_) => {
                    found = Some(k);
                    break;
                }
            }
        }
        let Some(k) = found else {
            return Ok(None);
        };
        if !self.decode(log, r, k)? {
            return Ok(None);
        }
        let bytes = self.bytes();
        // Complete lines only: what follows the last newline runs on into the next frame.
        let Some(end) = bytes.iter().rposition(|b| *b == b'\n') else {
            return Ok(None);
        };
        // The one line with seq `s` (a line whose seq cannot be read is no event: the fold skips
        // it too), then read whole.
        let mut lines = bytes[..end]
            .split(|b| *b == b'\n')
            .enumerate()
            .filter(|(_, l)| serde_json::from_slice::<SeqOnly>(l).is_ok_and(|e| e.seq == Some(s)));
        let (Some((idx, line)), None) = (lines.next(), lines.next()) else {
            return Ok(None);
        };
        let Some(e) = event_line(line).filter(|e| e.seq == Some(s)) else {
            return Ok(None);
        };
        let (ty, op) = (e.ty.to_string(), e.surface_op);
        if idx == 0 {
            // The frame's first line: the header in frame 0, else a whole line only when the
            // frame before ended one (kept with its span: decoded once, if ever).
            let Some(prev) = k.checked_sub(1) else {
                return Ok(None);
            };
            if !self.span(log, r, prev)?.is_ok_and(|sp| sp.ends_line) {
                return Ok(None);
            }
        }
        Ok(Some((k, ty, op)))
    }

    /// Whether node `anchor` is the head of the surface (see [`Chain`]). `top`: above every seq of
    /// the complete frames' events; `low`: the window's lowest frame with an event line and its
    /// first seq.
    fn at_head<R: Read + Seek>(
        &mut self,
        log: &mut Units,
        r: &mut R,
        anchor: u64,
        top: u64,
        low: Option<(usize, u64)>,
    ) -> io::Result<bool> {
        if let Some((_, k)) = self.known.iter().find(|(a, _)| *a == anchor) {
            return Ok(*k);
        }
        // The first lookup searches the frames below the window when the anchor is before its
        // first seq (in the unknown prefix: every frame from `low` on holds later seqs), else
        // every frame.
        let bound = match low {
            Some((k, f)) if anchor < f && k > 0 => (k - 1, f),
            _ => (log.units.len().saturating_sub(1), top),
        };
        let (mut s, mut bound) = (anchor, bound);
        // From the second lookup of this walk on, the frames per seq of the step before say where
        // the next event likely is (the first one interpolates over its range: no step before it).
        let (mut guess, mut stepped) = (None, false);
        let k = loop {
            let Some((k, ty, op)) = self.event_at(log, r, s, bound, guess)? else {
                break false;
            };
            if Role::of_event(&ty).is_none() {
                break false;
            }
            match op.as_ref().and_then(SurfaceOp::parse) {
                // A replace that started at the head: its node was the head.
                Some(SurfaceOp::Replace { start, .. }) if start < s => {
                    if stepped {
                        // as many frames back per seq as the step before took
                        let (pk, ps) = bound;
                        let back = (pk - k) as u128 * (s - start) as u128 / (ps - s).max(1) as u128;
                        guess = Some(k.saturating_sub(back.min(k as u128) as usize));
                    }
                    bound = (k, s);
                    s = start;
                    stepped = true;
                    self.cost.steps += 1;
                }
                Some(SurfaceOp::Append) => break self.first_node(log, r, s)?,
                _ => break false,
            }
        };
        self.known.push((anchor, k));
        Ok(k)
    }

    /// Whether the first node the log's fold puts on the surface is `s`: the log folded from its
    /// first frame until the surface holds one.
    fn first_node<R: Read + Seek>(
        &mut self,
        log: &mut Units,
        r: &mut R,
        s: u64,
    ) -> io::Result<bool> {
        let mut f = Fold::default();
        for i in 0..log.units.len() {
            if !self.decode(log, r, i)? {
                return Ok(false);
            }
            f.feed(
                self.bytes(),
                Loc {
                    frame: log.units[i].0,
                    inner: 0,
                },
            );
            if let Some(n) = f.surface.iter().next() {
                return Ok(n.seq == s);
            }
            if f.last_seq.is_some_and(|l| l >= s) {
                return Ok(false);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
thread_local! {
    /// The manual timing (`window_on_a_real_log`): skip the head check (its baseline), and what
    /// the last one cost (replaces walked, frames decoded, bytes decoded).
    static SKIP_HEAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static LAST_CHAIN: std::cell::Cell<Cost> = const { std::cell::Cell::new(Cost { spent: 0, decodes: 0, steps: 0 }) };
}

fn head_checked<R: Read + Seek>(
    chain: &mut Chain<'_>,
    log: &mut Units,
    r: &mut R,
    anchor: u64,
    top: u64,
    low: Option<(usize, u64)>,
) -> io::Result<bool> {
    #[cfg(test)]
    if SKIP_HEAD.with(|c| c.get()) {
        return Ok(true);
    }
    let at = chain.at_head(log, r, anchor, top, low)?;
    #[cfg(test)]
    LAST_CHAIN.with(|c| c.set(chain.cost));
    Ok(at)
}

/// The fold of a zstd log of `size` bytes from its end. `cached`: this process's brief of the
/// same file (header, title), if it has one. Ok(None): the window cannot prove the answer; fold
/// the whole log. Ok(Some): the committed fold (resumable at the end of the last complete frame)
/// and, when the last frame is torn, the view with its complete lines, as [`continue_fold`]
/// returns them; and how many file bytes the window covers (from its first frame to the end).
pub(crate) fn read<R: Read + Seek>(
    r: &mut R,
    size: u64,
    cached: Option<&Brief>,
) -> io::Result<Option<(Fold, Option<Fold>, u64)>> {
    if let Some(b) = cached {
        // The brief's notes are about the part after its title: only a torn last frame is one
        // the window reproduces itself (`continue_fold`); anything else is the full fold's.
        if b.header.is_none()
            || b.header_error.is_some()
            || b.notes.more > 0
            || b.notes
                .items
                .iter()
                .any(|n| !n.starts_with("torn last frame at byte"))
        {
            return Ok(None);
        }
    }
    // Frame boundaries from the frame and block headers alone (a forward walk: the same frames
    // the full fold reads).
    let mut units: Vec<(u64, u64)> = Vec::new();
    let mut pos = 0u64;
    {
        let mut w = Windowed::new(&mut *r, 4 * WINDOW);
        while pos < size {
            match scan_frame(&mut w, pos, size)? {
                FrameScan::Frame { end } => {
                    units.push((pos, end));
                    pos = end;
                }
                FrameScan::Torn => {
                    if next_complete_frame(&mut w, pos + 4, size)?.is_some() {
                        return Ok(None);
                    }
                    break;
                }
                FrameScan::Skippable { .. } | FrameScan::Garbage(_) => return Ok(None),
            }
        }
    }
    let committed_end = pos;
    let n = units.len();
    if n < 3 {
        return Ok(None);
    }
    let mut log = Units {
        units,
        sc: Scratch::new(),
    };
    // The header frame: its first line is the header (a header the fold cannot read is the full
    // fold's to report).
    let Some(frame0) = log.whole(r, 0)? else {
        return Ok(None);
    };
    // made at the first head check (its decoder is a zstd context and a buffer; most reads need none)
    let mut chain: Option<Chain> = None;
    let head = match cached {
        Some(b) => Head {
            header: b.header.clone().expect("checked"),
            title: Some(b.title.clone()),
            fallback: b.fallback_title.clone(),
        },
        None => {
            let line = frame0.split(|b| *b == b'\n').next().unwrap_or(&[]);
            match Header::parse(line) {
                Ok(h) if frame0.contains(&b'\n') => Head {
                    header: h,
                    title: None,
                    fallback: None,
                },
                _ => return Ok(None),
            }
        }
    };
    let finder = memmem::Finder::new(b"\"compaction/summary\"");
    let mut title = head.title.clone();
    // The lowest frame whose first line must start a line (the window's and the title's first).
    let mut lowest = n;
    let mut frames: VecDeque<Decoded> = VecDeque::new();
    let mut total = 0u64;
    let mut want_seq: Option<u64> = None;
    let mut window: Option<Fold> = None;
    let mut i = n;
    loop {
        if window.is_some() && title.is_some() && i < lowest {
            // Every frame from `lowest` on starts a line: its predecessor ended one.
            break;
        }
        if i == 1 {
            // Down to the header frame: the window needs the whole log, or no event holds a
            // title (the first-prompt fallback is read forward: the full fold).
            if window.is_none() || title.is_none() || !frame0.ends_with(b"\n") {
                return Ok(None);
            }
            break;
        }
        i -= 1;
        let Some(bytes) = log.whole(r, i)? else {
            return Ok(None);
        };
        if title.is_none() {
            match last_title(&bytes) {
                TitleScan::Nothing => {}
                TitleScan::Title(t) => {
                    title = Some(Some(t));
                    lowest = lowest.min(i);
                }
                TitleScan::Bad => return Ok(None),
            }
        }
        if window.is_some() {
            continue;
        }
        total += bytes.len() as u64;
        if total > WINDOW_MAX {
            return Ok(None);
        }
        let d = Decoded {
            start: log.units[i].0,
            first_seq: first_seq(&bytes),
            checkpoint: finder.find(&bytes).is_some(),
            bytes,
        };
        let ready = match want_seq {
            Some(s) => d.first_seq.is_some_and(|f| f <= s),
            None => d.checkpoint,
        };
        frames.push_front(d);
        if !ready {
            continue;
        }
        // The title is settled by the window's own titles when it has one; if it has none, by
        // the search further back (set on the fold below).
        match attempt(&head, title.clone().flatten(), &frames) {
            Outcome::Done(f) => {
                // The checkpoint that removed the unknown prefix was taken to start at the head
                // of the surface; it must have (rc.8's own compactions do, `compactRegion` of a
                // middle span does not: the nodes before that span stay).
                let Some(anchor) = f.window.as_ref().and_then(|w| w.anchor) else {
                    return Ok(None);
                };
                let top = f.last_seq.map_or(0, |l| l.saturating_add(1));
                // `frames` holds frames `i..n` (frame `i` first)
                let low = frames
                    .iter()
                    .enumerate()
                    .find_map(|(p, d)| d.first_seq.map(|f| (i + p, f)));
                if head_checked(
                    chain.get_or_insert_with(|| Chain::new(&frame0)),
                    &mut log,
                    r,
                    anchor,
                    top,
                    low,
                )? {
                    window = Some(*f);
                    lowest = lowest.min(i);
                } else if holds(&frames, anchor) {
                    // A node the window holds: no decoding further back puts it on the surface.
                    return Ok(None);
                } else {
                    // Decode back to where the span starts: there the compaction is a replace
                    // among decoded nodes, and an older checkpoint has to remove the prefix.
                    want_seq = Some(anchor);
                }
            }
            // A seq the window holds but not on the surface: the full fold notes that replace.
            Outcome::Seq(s) if holds(&frames, s) => return Ok(None),
            Outcome::Seq(s) => want_seq = Some(s),
            Outcome::Checkpoint => want_seq = None,
            Outcome::Fail => return Ok(None),
        }
    }
    let from = frames.front().map_or(committed_end, |d| d.start);
    drop(frames);
    let Some(mut fold) = window else {
        return Ok(None);
    };
    // A title found behind the window (the window's own titles already set the later ones).
    if fold.title.is_none() {
        fold.title = title.flatten();
    }
    fold.offset = committed_end;
    let (committed, view) = continue_fold(r, Encoding::Zstd, size, fold)?;
    // What the rest added (a torn last frame's lines) must not bring a note a full fold would
    // number differently; the torn frame's own note is the same in both.
    if !committed.notes.is_empty() {
        return Ok(None);
    }
    Ok(Some((committed, view, size - from)))
}

/// What a read from the end shows (the committed fold, or the view with a torn last frame's
/// complete lines), or None when it declines and a read folds the whole log: for the fuzz
/// targets and manual checks, which compare it with the full fold.
pub fn view_from_end<R: Read + Seek>(r: &mut R, size: u64) -> Option<Fold> {
    read(r, size, None)
        .ok()
        .flatten()
        .map(|(c, v, _)| v.unwrap_or(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::brief;
    use crate::events::{Header, Role};
    use crate::fold::Class;
    use crate::testgen::{LogBuilder, Rng, DS};
    use serde_json::json;
    use std::io::Cursor;

    type NodeView = (u64, Role, Class, bool, bool, String, Option<String>, Loc);

    /// Everything of a fold a `sessions_read` shows, notes aside: the header, the title, the
    /// surface (every field a window row and the counts use) and the last seq.
    fn answer(f: &Fold) -> (Option<Header>, Option<String>, Vec<NodeView>, Option<u64>) {
        let nodes = f
            .surface
            .iter()
            .map(|n| {
                (
                    n.seq,
                    n.role,
                    n.class,
                    n.replaced,
                    n.is_error,
                    n.label.to_string(),
                    n.request.as_deref().map(str::to_string),
                    n.loc,
                )
            })
            .collect();
        (
            f.header.clone(),
            f.display_title().map(str::to_string),
            nodes,
            f.last_seq,
        )
    }

    /// A host-shaped session: turns with tool rounds, titles (turn 1, now and then a rename),
    /// pruned tool results (single-node replaces, recent or old), compactions as rc.8
    /// `selectCompactableRange` picks them (from the head of the surface, keeping a recent
    /// tail) and one in five of a middle span (`compactRegion` called by a plugin), queued
    /// requests, and now and then a line the full fold notes.
    fn host_log(r: &mut Rng, v4: bool, turns: u64, bad: bool) -> LogBuilder {
        host_log_titled(r, v4, turns, bad, false)
    }

    /// [`host_log`]; `title_once`: the only `session/title` is the first turn's (the window then
    /// decodes every frame back to it).
    fn host_log_titled(
        r: &mut Rng,
        v4: bool,
        turns: u64,
        bad: bool,
        title_once: bool,
    ) -> LogBuilder {
        host_log_counted(r, v4, turns, bad, title_once).0
    }

    /// [`host_log_titled`], and how many of its compactions are of a middle span.
    fn host_log_counted(
        r: &mut Rng,
        v4: bool,
        turns: u64,
        bad: bool,
        title_once: bool,
    ) -> (LogBuilder, usize) {
        let mut middles = 0;
        let id = "session-0c0c0c0c-1111-4222-8333-444444444444";
        let mut b = if v4 {
            LogBuilder::v4(id, Some("/home/ana/proj"), 1)
        } else {
            LogBuilder::v0(id, Some("/home/ana/proj"), 1)
        };
        let mut tools: Vec<(u64, String)> = Vec::new();
        for t in 0..turns {
            let p = b.prompt(
                &format!("prompt {t} {}", "word ".repeat(r.below(30) as usize)),
                &format!("dsh-session-mail:req-{t}"),
            );
            if t == 0 || (r.chance(5) && !title_once) {
                b.title(&format!("title {t}"), json!({"kind":"fallback"}), &[p]);
            }
            for k in 0..r.below(4) {
                let call = format!("call_{t}_{k}");
                let seq = b.tool_round(
                    &call,
                    "read_file",
                    r#"{"path":"a"}"#,
                    &"line\n".repeat(1 + r.below(50) as usize),
                    DS.0,
                    DS.1,
                );
                tools.push((seq, call));
                if r.chance(30) {
                    b.flush();
                }
            }
            b.reply(&format!("reply {t}"), DS.0, DS.1);
            if bad && r.chance(4) {
                b.raw("{oops not json".into());
            }
            b.end_turn();
            if r.chance(20) {
                b.queued("later", &format!("dsh-session-mail:q-{t}"), "next-turn");
            }
            if r.chance(20) {
                let live: Vec<_> = tools
                    .iter()
                    .filter(|(s, _)| b.surface.contains(s))
                    .cloned()
                    .collect();
                if !live.is_empty() {
                    // Mostly the newest tool result, sometimes any one still on the surface.
                    let (seq, call) = if r.chance(70) {
                        live[live.len() - 1].clone()
                    } else {
                        live[r.below(live.len() as u64) as usize].clone()
                    };
                    b.prune(seq, &call, "[pruned]");
                    b.flush();
                }
            }
            if b.surface.len() > 6 && r.chance(25) {
                let n = b.surface.len();
                let keep = 1 + r.below(n as u64 / 3) as usize;
                // Now and then a span that does not start at the head: `compactRegion(start,
                // end)` of a plugin (the nodes before it stay on the surface).
                let from = if r.chance(20) {
                    1 + r.below((n - 1 - keep) as u64) as usize
                } else {
                    0
                };
                middles += usize::from(from > 0);
                let (s, e) = (b.surface[from], b.surface[n - 1 - keep]);
                b.compact(s, e, &format!("summary after turn {t}"));
            }
        }
        (b, middles)
    }

    fn full(bytes: &[u8]) -> Fold {
        let (c, t) = continue_fold(
            &mut Cursor::new(bytes),
            Encoding::Zstd,
            bytes.len() as u64,
            Fold::default(),
        )
        .unwrap();
        t.unwrap_or(c)
    }

    fn brief_of(bytes: &[u8]) -> Brief {
        brief::scan(
            &mut Cursor::new(bytes),
            Encoding::Zstd,
            bytes.len() as u64,
            None,
            &mut Scratch::new(),
        )
        .unwrap()
        .0
    }

    fn window(bytes: &[u8], r: &mut Rng) -> Option<(Fold, Option<Fold>, u64)> {
        let brief = brief_of(bytes);
        let cached = (r.below(2) == 0).then_some(&brief);
        read(&mut Cursor::new(bytes), bytes.len() as u64, cached).unwrap()
    }

    /// Frame ends of a zstd log.
    fn boundaries(bytes: &[u8]) -> Vec<u64> {
        let size = bytes.len() as u64;
        let mut c = Cursor::new(bytes);
        let (mut out, mut pos) = (Vec::new(), 0);
        while let Ok(FrameScan::Frame { end }) = scan_frame(&mut c, pos, size) {
            out.push(end);
            pos = end;
        }
        out
    }

    /// The fuzz corpus of `log_reader` (fuzz/corpus), shaped as that target shapes zstd input (frames
    /// cut at NULs, the raw bytes, and the log the input scripts: `testgen::scripted`): a read from
    /// the end declines or equals the full fold.
    #[test]
    fn the_fuzz_corpus_reads_from_the_end_as_the_full_fold_does() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/log_reader");
        let mut seen = 0;
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let data = std::fs::read(e.path()).unwrap();
            let rest = data.get(1..).unwrap_or(&[]);
            let cut: Vec<u8> = rest
                .split_inclusive(|&b| b == 0)
                .flat_map(|c| zstd::encode_all(c, 1).unwrap_or_default())
                .collect();
            let generated = crate::testgen::scripted(rest);
            for bytes in [cut, rest.to_vec(), data.clone(), generated] {
                seen += 1;
                let want = full(&bytes);
                if let Some(got) = view_from_end(&mut Cursor::new(&bytes[..]), bytes.len() as u64) {
                    assert_eq!(answer(&got), answer(&want), "{}", e.path().display());
                    assert_eq!(
                        got.read_notes(),
                        want.read_notes(),
                        "{}",
                        e.path().display()
                    );
                }
            }
        }
        assert!(seen >= 30, "{seen}");
    }

    /// `b` with its surface compacted up to its last two nodes and one turn after that (the window
    /// then stops at the compaction), written as a zstd session log under `home`; `b` goes on from there.
    fn compacted_on_disk(
        home: &std::path::Path,
        b: &mut LogBuilder,
    ) -> (std::path::PathBuf, Vec<u8>, crate::layout::LogFile) {
        let n = b.surface.len();
        let (s, e) = (b.surface[0], b.surface[n - 3]);
        b.compact(s, e, "the last summary");
        b.prompt("after the compaction", "dsh-session-mail:after");
        b.reply("done", DS.0, DS.1);
        b.end_turn();
        let path = home
            .join("sessions/--home-ana-proj--/session-0c0c0c0c-1111-4222-8333-444444444444/session.jsonl.zstd");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = b.zstd();
        std::fs::write(&path, &bytes).unwrap();
        let log = crate::layout::LogFile {
            path: path.clone(),
            enc: Encoding::Zstd,
            generation: 0,
        };
        (path, bytes, log)
    }

    /// Through the cache: `sessions_read`'s loader reads a long log from its end; a caller that
    /// needs the requests (`load_log`: find_request, verify, the queue) gets the full fold, never
    /// the window's, and the read after it takes that full fold. Nothing is written anywhere.
    #[test]
    fn only_reads_take_the_window_and_callers_that_need_requests_fold_the_log() {
        let dir = tempfile::tempdir().unwrap();
        crate::checkpoint::set_cache_dir(None);
        MIN.set(Some(0));
        let mut r = Rng(99);
        let (path, bytes, log) =
            compacted_on_disk(dir.path(), &mut host_log(&mut r, false, 40, false));
        let want = full(&bytes);
        let (got, read) = crate::index::load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(got.is_window());
        assert!(
            read < bytes.len() as u64 / 2,
            "read {read} of {}",
            bytes.len()
        );
        assert_eq!(answer(&got), answer(&want));
        assert!(got.requests.len() < want.requests.len());
        // Warm: the same fold.
        let again = crate::index::load_log_for_read(&log).unwrap();
        assert!(std::sync::Arc::ptr_eq(&got, &again));
        // A caller that needs the requests: the full fold, which later reads then take.
        let all = crate::index::load_log(&log).unwrap();
        assert!(!all.is_window());
        assert_eq!(all.requests, want.requests);
        let after = crate::index::load_log_for_read(&log).unwrap();
        assert!(std::sync::Arc::ptr_eq(&all, &after));
        let files: Vec<_> = walk(dir.path());
        assert_eq!(files, vec![path.clone()], "nothing written next to the log");
        crate::index::forget(&path);
        MIN.set(None);
    }

    /// A home and a private cache folder for one test's reads: read checkpoints persisted and logs
    /// read from the end whatever their size, all put back when dropped.
    struct Persisting {
        home: tempfile::TempDir,
        _cache: tempfile::TempDir,
    }

    impl Persisting {
        fn new() -> Persisting {
            let cache = tempfile::tempdir().unwrap();
            crate::checkpoint::set_cache_dir(Some(cache.path().to_path_buf()));
            crate::checkpoint::PERSIST.set(Some(0));
            MIN.set(Some(0));
            Persisting {
                home: tempfile::tempdir().unwrap(),
                _cache: cache,
            }
        }
    }

    impl Drop for Persisting {
        fn drop(&mut self) {
            crate::checkpoint::set_cache_dir(None);
            crate::checkpoint::PERSIST.set(None);
            MIN.set(None);
        }
    }

    /// The worst case for a read from the end — the only title at the first turn, so the first read
    /// decodes every frame back to it — is paid once: that read leaves its window fold as a read
    /// checkpoint (marked as a window), a fresh process resumes it (reading nothing of the log
    /// again) with the same answer; a caller that needs the requests never takes it, folds the log
    /// and leaves a full fold's checkpoint in its place; a forged or edited checkpoint changes no
    /// answer.
    #[test]
    fn a_window_read_leaves_a_checkpoint_that_only_reads_resume() {
        let p = Persisting::new();
        let dir = &p.home;
        let mut r = Rng(7);
        let mut b = host_log_titled(&mut r, false, 40, false, true);
        let (path, bytes, log) = compacted_on_disk(dir.path(), &mut b);
        let want = full(&bytes);
        assert_eq!(want.title.as_deref(), Some("title 0"));
        let (got, _) = crate::index::load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(got.is_window());
        assert_eq!(answer(&got), answer(&want));
        let ck = crate::checkpoint::path_of(&path).unwrap();
        assert!(ck.exists(), "the window fold is persisted");
        // A fresh process (nothing cached): the checkpoint, not the log's history.
        crate::index::forget(&path);
        let (again, read) = crate::index::load_log_for_read_counted(&log);
        let again = again.unwrap();
        assert!(again.is_window());
        assert_eq!(read, 0, "resumed at the end of the log");
        assert_eq!(answer(&again), answer(&want));
        // Grown: resumed from the checkpoint, folded over the new frames.
        let mut more = b;
        more.prompt("later", "dsh-session-mail:later");
        more.reply("later reply", DS.0, DS.1);
        more.end_turn();
        let grown = more.zstd();
        std::fs::write(&path, &grown).unwrap();
        crate::index::forget(&path);
        let (g, read) = crate::index::load_log_for_read_counted(&log);
        assert!(read < (grown.len() - bytes.len()) as u64 + 1, "{read}");
        assert_eq!(answer(&g.unwrap()), answer(&full(&grown)));
        // Forged: the body edited under the old tag — not used (the window reads the log again).
        let orig = std::fs::read(&ck).unwrap();
        let forged = String::from_utf8_lossy(&orig[32..]).replace("title 0", "FORGED!");
        let mut f = orig[..32].to_vec();
        f.extend_from_slice(forged.as_bytes());
        std::fs::write(&ck, &f).unwrap();
        crate::index::forget(&path);
        let (w, read) = crate::index::load_log_for_read_counted(&log);
        let w = w.unwrap();
        assert!(read > 0);
        assert_eq!(answer(&w), answer(&full(&grown)));
        assert_eq!(w.title.as_deref(), Some("title 0"));
        // A caller that needs the requests: never the window's checkpoint.
        crate::index::forget(&path);
        let all = crate::index::load_log(&log).unwrap();
        assert!(!all.is_window());
        assert_eq!(all.requests, full(&grown).requests);
        crate::index::forget(&path);
        let after = crate::index::load_log_for_read(&log).unwrap();
        assert!(
            !after.is_window(),
            "the full fold's checkpoint replaced the window's"
        );
        crate::index::forget(&path);
    }

    /// Past the decode budget (`log::DECODE_BUDGET`, 2 GiB: the bound on one read's work) the
    /// full fold stops where the budget ran out and says so (`stopped reading at byte …; later
    /// events are not shown`, one of the read's notes); the read from the end is bounded by its own
    /// budgets (the frame walk decodes nothing; `WINDOW_MAX`, `CHAIN_MAX`) and answers what the log
    /// holds now — the answer a full fold without the bound would give. That is the right one;
    /// a read gets the stopped fold only where the window declines, and its note says so (a
    /// stopped fold in this process's cache, or in a checkpoint: the next tests).
    #[test]
    fn past_the_decode_budget_the_window_reads_what_the_log_holds_now() {
        let p = Persisting::new();
        let mut b = host_log(&mut Rng(99), false, 40, false);
        let (_, bytes, _) = compacted_on_disk(p.home.path(), &mut b);
        let want = full(&bytes);
        let cost = crate::log::chunk_cost(b.text().as_bytes());
        crate::log::BUDGET.set(Some(cost * 3 / 4));
        let stopped = full(&bytes);
        let got = view_from_end(&mut Cursor::new(&bytes[..]), bytes.len() as u64);
        crate::log::BUDGET.set(None);
        assert!(
            stopped
                .read_notes()
                .items
                .iter()
                .any(|n| n.starts_with("stopped reading at byte")),
            "{:?}",
            stopped.read_notes()
        );
        assert_ne!(
            answer(&stopped),
            answer(&want),
            "the stopped fold misses the newest events"
        );
        let got = got.expect("the window answers past the budget");
        assert_eq!(answer(&got), answer(&want), "what the log holds now");
        assert!(got.read_notes().is_empty());
    }

    /// Within one process, a full fold that stopped at the decode budget (`load_log` folded the log
    /// for a caller that needs the requests) does not shadow the read from the end: a later read
    /// still answers what the log holds now (its window fold kept beside the full fold, resumed
    /// over an append); `load_log` keeps its stopped fold (not folded again), and the checkpoint
    /// stays the full fold's.
    #[test]
    fn a_stopped_full_fold_in_the_cache_does_not_shadow_the_read_from_the_end() {
        use crate::index::{forget, load_log_counted, load_log_for_read_counted};
        let p = Persisting::new();
        let mut b = host_log(&mut Rng(99), false, 40, false);
        let (path, bytes, log) = compacted_on_disk(p.home.path(), &mut b);
        let want = full(&bytes);
        let low = Some(crate::log::chunk_cost(b.text().as_bytes()) * 3 / 4);
        crate::log::BUDGET.set(low);
        forget(&path);
        let (all, read) = load_log_counted(&log);
        let all = all.unwrap();
        assert!(all.stopped && !all.is_window() && read > 0);
        assert_ne!(
            answer(&all),
            answer(&want),
            "the stopped fold misses the newest events"
        );
        let (got, read) = load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(got.is_window() && read > 0, "read from the end");
        assert_eq!(answer(&got), answer(&want), "what the log holds now");
        assert!(got.read_notes().is_empty(), "{:?}", got.read_notes());
        // Warm, both: the read its window fold, `load_log` its stopped fold.
        let (again, read) = load_log_for_read_counted(&log);
        assert!(read == 0 && std::sync::Arc::ptr_eq(&again.unwrap(), &got));
        let (kept, read) = load_log_counted(&log);
        assert!(read == 0 && std::sync::Arc::ptr_eq(&kept.unwrap(), &all));
        // Grown: the window fold is resumed over the append.
        let mut more = b;
        more.prompt("later", "dsh-session-mail:later");
        more.reply("later reply", DS.0, DS.1);
        more.end_turn();
        let grown = more.zstd();
        std::fs::write(&path, &grown).unwrap();
        let (g, read) = load_log_for_read_counted(&log);
        let g = g.unwrap();
        assert!(
            g.is_window() && read <= (grown.len() - bytes.len()) as u64,
            "{read}"
        );
        crate::log::BUDGET.set(None);
        assert_eq!(answer(&g), answer(&full(&grown)));
        crate::log::BUDGET.set(low);
        // The checkpoint is still the full fold's (a read beside it writes none).
        forget(&path);
        std::fs::write(&path, &bytes).unwrap();
        let (ck, read) = load_log_counted(&log);
        let ck = ck.unwrap();
        assert!(read == 0 && !ck.is_window(), "{read}");
        assert_eq!(answer(&ck), answer(&all), "the stopped fold, resumed");
        crate::log::BUDGET.set(None);
        forget(&path);
    }

    /// A log past the decode budget, folded whole by `load_log` (stopped, with its note), its full
    /// fold's checkpoint left (marked stopped).
    struct StoppedLog {
        path: std::path::PathBuf,
        bytes: Vec<u8>,
        log: crate::layout::LogFile,
        b: LogBuilder,
        /// The stopped fold.
        all: std::sync::Arc<Fold>,
        /// The lowered budget (still set for the calling thread).
        low: Option<u64>,
    }

    fn stopped_on_disk(p: &Persisting) -> StoppedLog {
        let mut b = host_log(&mut Rng(99), false, 40, false);
        let (path, bytes, log) = compacted_on_disk(p.home.path(), &mut b);
        let low = Some(crate::log::chunk_cost(b.text().as_bytes()) * 3 / 4);
        crate::log::BUDGET.set(low);
        crate::index::forget(&path);
        let all = crate::index::load_log(&log).unwrap();
        assert!(all.stopped && !all.is_window());
        assert!(crate::checkpoint::path_of(&path).unwrap().exists());
        StoppedLog {
            path,
            bytes,
            log,
            b,
            all,
            low,
        }
    }

    fn says_stopped(f: &Fold) -> bool {
        f.read_notes()
            .items
            .iter()
            .any(|n| n.starts_with("stopped reading at byte"))
    }

    /// A fresh process (nothing cached) that finds the checkpoint of a full fold that stopped at
    /// the decode budget treats it as the fold this process would have folded: the read takes the
    /// window beside it (what the log holds now) and writes nothing over the checkpoint; `load_log`
    /// resumes the stopped fold with its note (not folded again); grown, both resume over the
    /// append. (Before the checkpoint said a fold stopped, the read resumed and showed it.)
    #[test]
    fn a_stopped_full_folds_checkpoint_does_not_shadow_the_read_in_a_fresh_process() {
        use crate::index::{forget, load_log_counted, load_log_for_read_counted};
        let p = Persisting::new();
        let StoppedLog {
            path,
            bytes,
            log,
            b,
            all,
            low,
        } = stopped_on_disk(&p);
        crate::log::BUDGET.set(None);
        let want = full(&bytes);
        crate::log::BUDGET.set(low);
        assert_ne!(answer(&all), answer(&want));
        let ck = crate::checkpoint::path_of(&path).unwrap();
        let saved = std::fs::read(&ck).unwrap();
        // A fresh process reads first: the window, the checkpoint untouched.
        forget(&path);
        let (got, read) = load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(got.is_window() && read > 0, "read from the end ({read})");
        assert_eq!(answer(&got), answer(&want), "what the log holds now");
        assert!(got.read_notes().is_empty(), "{:?}", got.read_notes());
        assert_eq!(std::fs::read(&ck).unwrap(), saved, "no checkpoint over it");
        let (again, read) = load_log_for_read_counted(&log);
        assert!(read == 0 && std::sync::Arc::ptr_eq(&again.unwrap(), &got));
        // Then `load_log` in that process: the stopped fold of the checkpoint, not folded again.
        let (kept, read) = load_log_counted(&log);
        let kept = kept.unwrap();
        assert!(read == 0 && kept.stopped && says_stopped(&kept), "{read}");
        assert_eq!(answer(&kept), answer(&all));
        assert_eq!(kept.requests, all.requests);
        let (after, _) = load_log_for_read_counted(&log);
        assert!(std::sync::Arc::ptr_eq(&after.unwrap(), &got));
        // A fresh process whose window declines (here: the log below its floor): the read takes
        // the stopped fold, as beside a cached one; `load_log` the same fold.
        MIN.set(Some(u64::MAX));
        forget(&path);
        let (s, read) = load_log_for_read_counted(&log);
        let s = s.unwrap();
        assert!(read == 0 && s.stopped && says_stopped(&s), "{read}");
        assert_eq!(answer(&s), answer(&all));
        let (k, read) = load_log_counted(&log);
        assert!(read == 0 && std::sync::Arc::ptr_eq(&k.unwrap(), &s));
        MIN.set(Some(0));
        // A fresh process calls `load_log` first: resumed, stopped; a read after it, the window.
        forget(&path);
        let (k, read) = load_log_counted(&log);
        let k = k.unwrap();
        assert!(read == 0 && k.stopped && says_stopped(&k), "{read}");
        let (w, _) = load_log_for_read_counted(&log);
        assert_eq!(answer(&w.unwrap()), answer(&want));
        assert_eq!(std::fs::read(&ck).unwrap(), saved);
        // Grown, a fresh process: the read takes the window of the grown log; `load_log` resumes
        // the stopped fold over the append (and leaves its checkpoint, still stopped).
        let mut more = b;
        more.prompt("later", "dsh-session-mail:later");
        more.reply("later reply", DS.0, DS.1);
        more.end_turn();
        let grown = more.zstd();
        std::fs::write(&path, &grown).unwrap();
        forget(&path);
        let (g, read) = load_log_for_read_counted(&log);
        let g = g.unwrap();
        assert!(g.is_window() && read > 0);
        assert_eq!(std::fs::read(&ck).unwrap(), saved, "no checkpoint over it");
        let (k, read) = load_log_counted(&log);
        let k = k.unwrap();
        assert_eq!(
            read,
            (grown.len() - bytes.len()) as u64,
            "resumed at the stop"
        );
        assert!(k.stopped && says_stopped(&k));
        crate::log::BUDGET.set(None);
        assert_eq!(answer(&g), answer(&full(&grown)));
        forget(&path);
        let (k, read) = load_log_counted(&log);
        assert!(
            read == 0 && k.unwrap().stopped,
            "the grown stopped fold's checkpoint"
        );
        forget(&path);
    }

    /// The stopped bit is part of the signed body: edited under the old tag, or signed under
    /// another key, the checkpoint is not used (the read takes the window, `load_log` folds the
    /// log). Signed as ours but wrong — what a bug of ours could leave — it still changes no
    /// answer beyond what the full fold or the window gives: "not stopped" on a stopped fold ⇒ the
    /// read shows that full fold with its note (the answer before this bit existed); "stopped" on
    /// a fold that did not stop ⇒ the read takes the window (the full fold's answer), `load_log`
    /// the fold; "stopped" on a window fold ⇒ not used.
    #[test]
    fn a_forged_stopped_bit_changes_no_answer() {
        use crate::index::{forget, load_log_counted, load_log_for_read_counted};
        let p = Persisting::new();
        let StoppedLog {
            path,
            bytes,
            log,
            all,
            low,
            ..
        } = stopped_on_disk(&p);
        crate::log::BUDGET.set(None);
        let want = full(&bytes);
        crate::log::BUDGET.set(low);
        let ck = crate::checkpoint::path_of(&path).unwrap();
        let orig = std::fs::read(&ck).unwrap();
        let body = String::from_utf8_lossy(&orig[32..]).into_owned();
        assert_eq!(
            body.matches("\"stopped\":true").count(),
            1,
            "marked stopped"
        );
        let unstopped = body.replacen("\"stopped\":true", "\"stopped\":false", 1);
        // 1. edited under the old tag; 2. signed under another key: neither is used.
        let mut edited = orig[..32].to_vec();
        edited.extend_from_slice(unstopped.as_bytes());
        let mut theirs = base::seal::mac(&[9u8; 32], &[b"", unstopped.as_bytes()]).to_vec();
        theirs.extend_from_slice(unstopped.as_bytes());
        for forged in [&edited, &theirs] {
            std::fs::write(&ck, forged).unwrap();
            forget(&path);
            let (got, read) = load_log_for_read_counted(&log);
            let got = got.unwrap();
            assert!(got.is_window() && read > 0);
            assert_eq!(answer(&got), answer(&want));
            std::fs::write(&ck, forged).unwrap();
            forget(&path);
            let (k, read) = load_log_counted(&log);
            assert_eq!(read, bytes.len() as u64, "folded from the start");
            let k = k.unwrap();
            assert!(k.stopped && says_stopped(&k));
            assert_eq!(answer(&k), answer(&all));
        }
        // 3. signed as ours, "not stopped" on a stopped fold: the full fold, its note shown.
        std::fs::write(&ck, &orig).unwrap();
        crate::checkpoint::reseal(&path, |_| unstopped.clone());
        forget(&path);
        let (got, read) = load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(read == 0 && !got.is_window() && says_stopped(&got));
        assert_eq!(answer(&got), answer(&all));
        // 4. signed as ours, "stopped" on a full fold that did not stop: the read takes the
        // window, `load_log` the fold; both the full fold's answers.
        crate::log::BUDGET.set(None);
        forget(&path);
        let _ = std::fs::remove_file(&ck);
        let (f, _) = load_log_counted(&log);
        assert!(!f.unwrap().stopped);
        let stop = |b: &str| {
            assert_eq!(b.matches("\"stopped\":false").count(), 1);
            b.replacen("\"stopped\":false", "\"stopped\":true", 1)
        };
        crate::checkpoint::reseal(&path, stop);
        forget(&path);
        let (got, _) = load_log_for_read_counted(&log);
        let got = got.unwrap();
        assert!(got.is_window());
        assert_eq!(answer(&got), answer(&want));
        let (k, read) = load_log_counted(&log);
        let k = k.unwrap();
        assert_eq!(read, 0);
        assert_eq!((answer(&k), &k.requests), (answer(&want), &want.requests));
        // 5. signed as ours, "stopped" on a window fold: not used (the log is read again).
        forget(&path);
        let _ = std::fs::remove_file(&ck);
        let (w, _) = load_log_for_read_counted(&log);
        assert!(w.unwrap().is_window());
        crate::checkpoint::reseal(&path, stop);
        forget(&path);
        let (got, read) = load_log_for_read_counted(&log);
        assert!(read > 0, "not resumed");
        assert_eq!(answer(&got.unwrap()), answer(&want));
        forget(&path);
    }

    /// A window fold persisted by a build that did not check where its compaction starts (body
    /// version 2) may have dropped the nodes before a compaction of a middle span: it is not
    /// resumed. A full fold of version 2 or 3 may have stopped at the decode budget without saying
    /// so (`FoldState::stopped` is of version 4): not resumed either (folded again, and a version 4
    /// checkpoint left). A window fold of version 3 is (it never stops; nothing else changed).
    #[test]
    fn a_checkpoint_of_an_older_version_is_resumed_only_as_a_checked_window_fold() {
        let p = Persisting::new();
        let dir = &p.home;
        let mut b = host_log(&mut Rng(99), false, 40, false);
        let (path, bytes, log) = compacted_on_disk(dir.path(), &mut b);
        let want = full(&bytes);
        let now = format!("{{\"v\":{},", crate::checkpoint::VERSION);
        let older = |v: u32| {
            let now = now.clone();
            move |body: &str| {
                assert!(body.starts_with(&now));
                body.replacen(&now, &format!("{{\"v\":{v},"), 1).replacen(
                    ",\"stopped\":false",
                    "",
                    1,
                )
            }
        };
        let (got, _) = crate::index::load_log_for_read_counted(&log);
        assert!(got.unwrap().is_window());
        // A window fold of version 2: not resumed; of version 3: resumed.
        crate::checkpoint::reseal(&path, older(2));
        crate::index::forget(&path);
        let (again, read) = crate::index::load_log_for_read_counted(&log);
        assert!(read > 0, "a version 2 window fold is not resumed");
        assert_eq!(answer(&again.unwrap()), answer(&want));
        crate::checkpoint::reseal(&path, older(3));
        crate::index::forget(&path);
        let (again, read) = crate::index::load_log_for_read_counted(&log);
        let again = again.unwrap();
        assert!(
            read == 0 && again.is_window(),
            "a version 3 window fold is resumed"
        );
        assert_eq!(answer(&again), answer(&want));
        // A full fold's checkpoint of version 2 or 3: folded again (by a read: the window).
        for v in [2, 3] {
            crate::index::forget(&path);
            assert!(!crate::index::load_log(&log).unwrap().is_window());
            crate::checkpoint::reseal(&path, older(v));
            crate::index::forget(&path);
            let (all, read) = crate::index::load_log_counted(&log);
            assert_eq!(read, bytes.len() as u64, "version {v}: folded again");
            assert_eq!(answer(&all.unwrap()), answer(&want));
            crate::checkpoint::reseal(&path, older(v));
            crate::index::forget(&path);
            let (got, read) = crate::index::load_log_for_read_counted(&log);
            assert!(read > 0 && got.as_ref().unwrap().is_window(), "version {v}");
            assert_eq!(answer(&got.unwrap()), answer(&want));
        }
        crate::index::forget(&path);
    }

    fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
        out
    }

    /// The logs the `log_reader` fuzz target generates (`testgen::scripted`), over random scripts:
    /// a read from the end declines or gives the full fold's answer, with compactions of middle
    /// spans among them.
    #[test]
    fn scripted_logs_read_from_the_end_as_the_full_fold_does() {
        let mut r = Rng(0x5c71_97ed_0042_0001);
        let (mut applied, mut middle) = (0, 0);
        for round in 0..300 {
            // Host-like: turns of a prompt, tool rounds, a reply, now and then a frame end, a
            // compaction (its start anywhere in the first eight nodes), a prune, a rename, a
            // queued request; rarely a bad line.
            let mut script = vec![r.next_u64() as u8];
            for _ in 0..4 + r.below(60) {
                let mut op = |o: u8, a: u8| script.extend([o, a]);
                op(0, 0);
                for _ in 0..r.below(3) {
                    op(2, r.next_u64() as u8);
                }
                op(1, r.next_u64() as u8);
                op(4, 0);
                for (o, pct) in [(3, 20), (5, 12), (6, 10), (7, 5), (9, 5), (8, 1)] {
                    if r.chance(pct) {
                        op(o, r.next_u64() as u8);
                    }
                }
            }
            let (b, middles) = crate::testgen::scripted_log(&script);
            let bytes = b.zstd();
            let want = full(&bytes);
            let Some(got) = view_from_end(&mut Cursor::new(&bytes[..]), bytes.len() as u64) else {
                continue;
            };
            applied += 1;
            assert_eq!(answer(&got), answer(&want), "round {round}: {script:?}");
            assert_eq!(got.read_notes(), want.read_notes(), "round {round}");
            middle += usize::from(middles > 0);
        }
        eprintln!("scripted: {applied} of 300 read from the end, {middle} of them with a compaction of a middle span");
        assert!(applied > 30 && middle > 10, "{applied} {middle}");
    }

    /// One step of a case of [`a_compaction_of_a_middle_span_leaves_the_nodes_before_it`].
    #[derive(Clone, Copy)]
    enum Step {
        /// Turns of a prompt and a reply (the first one titled).
        Turns(u64),
        /// A compaction from surface position `.0` through the node `.1` from the end.
        Compact(usize, usize),
        /// A compaction from the node the last compaction put, through the node `.0` from the end.
        FromLast(usize),
    }

    fn build(v4: bool, steps: &[Step]) -> LogBuilder {
        let id = "session-0c0c0c0c-1111-4222-8333-444444444444";
        let mut b = if v4 {
            LogBuilder::v4(id, Some("/home/ana/proj"), 1)
        } else {
            LogBuilder::v0(id, Some("/home/ana/proj"), 1)
        };
        let (mut t, mut last) = (0, None);
        for step in steps {
            let n = b.surface.len();
            let (i, keep) = match *step {
                Step::Turns(k) => {
                    for _ in 0..k {
                        let p =
                            b.prompt(&format!("prompt {t}"), &format!("dsh-session-mail:r-{t}"));
                        if t == 0 {
                            b.title("the title", json!({"kind":"fallback"}), &[p]);
                        }
                        b.reply(&format!("reply {t}"), DS.0, DS.1);
                        b.end_turn();
                        t += 1;
                    }
                    continue;
                }
                Step::Compact(i, keep) => (i, keep),
                Step::FromLast(keep) => (
                    b.surface.iter().position(|s| Some(*s) == last).unwrap(),
                    keep,
                ),
            };
            let (s, e) = (b.surface[i], b.surface[n - 1 - keep]);
            last = Some(b.compact(s, e, &format!("compaction from position {i}")));
        }
        b
    }

    /// rc.8's `compactRegion(start, end)` takes any balanced span of the surface
    /// (`packages/compaction/compaction-basic/src/region.ts` `validateSurfaceRegion`; public on
    /// the compaction service, `packages/compaction/compaction/src/index.ts`): a compaction of a
    /// middle span leaves the nodes before it on the surface, which a read from the end must not
    /// drop. With no head compaction before it the window declines (the full fold answers);
    /// with one, the window reads back to that one; a head compaction after a middle one (its
    /// chain passes the middle one by) is read as before; a compaction from a middle one's node
    /// is no head compaction either. Every answer is the full fold's.
    #[test]
    fn a_compaction_of_a_middle_span_leaves_the_nodes_before_it() {
        use Step::*;
        // (steps, the window answers: Some(yes / no), None: either)
        let cases: [(&[Step], Option<bool>); 4] = [
            (&[Turns(6), Compact(2, 2), Turns(2)], Some(false)),
            (
                &[Turns(5), Compact(0, 3), Turns(5), Compact(3, 2), Turns(2)],
                Some(true),
            ),
            (
                &[Turns(5), Compact(2, 3), Turns(3), Compact(0, 2), Turns(2)],
                Some(true),
            ),
            (
                &[
                    Turns(5),
                    Compact(0, 4),
                    Turns(3),
                    Compact(2, 3),
                    Turns(3),
                    FromLast(2),
                    Turns(2),
                ],
                None,
            ),
        ];
        for v4 in [false, true] {
            for (k, (steps, answers)) in cases.iter().enumerate() {
                let b = build(v4, steps);
                let bytes = b.zstd();
                let want = full(&bytes);
                let seqs: Vec<u64> = want.surface.iter().map(|n| n.seq).collect();
                assert_eq!(seqs, b.surface, "case {k}: the builder's surface");
                let got = read(&mut Cursor::new(&bytes[..]), bytes.len() as u64, None)
                    .unwrap()
                    .map(|(c, v, _)| v.unwrap_or(c));
                if let Some(got) = &got {
                    assert_eq!(
                        answer(got),
                        answer(&want),
                        "case {k} (v4 {v4}): the window and the full fold"
                    );
                    assert_eq!(got.read_notes(), want.read_notes(), "case {k}");
                }
                if let Some(yes) = answers {
                    assert_eq!(got.is_some(), *yes, "case {k} (v4 {v4}): read from the end");
                }
            }
        }
    }

    /// The property (issue 18): a read from the end gives the full fold's answer — header,
    /// title, every surface node (seq, role, class, replaced, error, label, request, where its
    /// line starts) and the last seq — over host-shaped V0 and V4 logs with head-anchored
    /// compactions, pruned tool results (recent and old), renames, queued requests and torn
    /// last frames; it notes nothing the full fold does not; and a window fold resumed over
    /// what was appended later is still the full fold's answer. Where the window cannot prove
    /// it (no compaction, damage, a replace reaching back past the budget) it declines.
    #[test]
    fn a_read_from_the_end_gives_the_full_folds_answer() {
        let mut r = Rng(0x0123_4567_89ab_cdef);
        let (mut applied, mut resumed, mut noted, mut once) = (0, 0, 0, 0);
        // rounds with a compaction of a middle span: read from the end, declined
        let (mut middle_read, mut middle_declined) = (0, 0);
        let rounds = 200;
        for round in 0..rounds {
            let v4 = r.chance(50);
            let bad = r.chance(30);
            let turns = 4 + r.below(60);
            // now and then the worst case for the title: only the first turn has one
            let title_once = r.chance(20);
            let (b, middles) = host_log_counted(&mut r, v4, turns, bad, title_once);
            let chopped = r.chance(15);
            let mut bytes = if chopped {
                // Frames cut anywhere, lines across frames included.
                let text = b.text();
                let (h, rest) = text.split_at(text.find('\n').unwrap() + 1);
                let mut out = crate::testgen::frame(h.as_bytes());
                let mut rest = rest.as_bytes();
                while !rest.is_empty() {
                    let k = (1 + r.below(3000) as usize).min(rest.len());
                    out.extend(crate::testgen::frame(&rest[..k]));
                    rest = &rest[k..];
                }
                out
            } else {
                b.zstd()
            };
            let bounds = boundaries(&bytes);
            let torn = r.chance(30) && bounds.len() > 2;
            if torn {
                let last = bounds[bounds.len() - 2];
                let cut = last + 1 + r.below(bytes.len() as u64 - last - 1);
                bytes.truncate(cut as usize);
            }
            let want = full(&bytes);
            let Some((c, v, covered)) = window(&bytes, &mut r) else {
                middle_declined += usize::from(middles > 0);
                continue;
            };
            applied += 1;
            middle_read += usize::from(middles > 0);
            assert!(c.is_window() && covered <= bytes.len() as u64);
            let got = v.unwrap_or_else(|| c.clone());
            assert_eq!(
                answer(&got),
                answer(&want),
                "round {round} (v4 {v4}, torn {torn}, {} bytes)",
                bytes.len()
            );
            for n in got.notes.items.iter().filter(|_| want.notes.more == 0) {
                assert!(
                    want.notes.items.contains(n),
                    "round {round}: the window noted {n:?}, the full fold {:?}",
                    want.notes
                );
            }
            // What a read reports: the notes about the lines of its surface, the same both ways
            // (the full fold's notes about compacted history are not a read's).
            assert_eq!(
                got.read_notes(),
                want.read_notes(),
                "round {round}: all of the full fold's notes {:?}",
                want.notes
            );
            if bad && !want.notes.is_empty() && want.read_notes() != want.notes {
                noted += 1;
            }
            if title_once {
                once += 1;
            }
            if !bad {
                assert_eq!(got.notes, want.notes, "round {round}");
            }
            // Grown: the rest of a longer log folded onto the window's committed state.
            if torn || chopped {
                continue;
            }
            let mut more = b;
            for t in 0..1 + r.below(4) {
                more.prompt(&format!("later {t}"), &format!("dsh-session-mail:l-{t}"));
                more.reply("later reply", DS.0, DS.1);
                more.end_turn();
            }
            let grown = more.zstd();
            assert!(grown.starts_with(&bytes));
            let (gc, gt) = continue_fold(
                &mut Cursor::new(&grown[..]),
                Encoding::Zstd,
                grown.len() as u64,
                c,
            )
            .unwrap();
            let g = gt.unwrap_or(gc);
            assert_eq!(answer(&g), answer(&full(&grown)), "round {round} grown");
            resumed += 1;
        }
        eprintln!(
            "window: {applied} of {rounds} reads, {resumed} resumed, {noted} with notes in the \
             full fold about compacted history only, {once} titled only at turn 1; with a \
             compaction of a middle span {middle_read} read from the end, {middle_declined} \
             declined"
        );
        assert!(noted > 5 && once > 5, "{noted} {once}");
        assert!(
            middle_read > 5 && middle_declined > 5,
            "{middle_read} {middle_declined}"
        );
        assert!(
            applied * 2 > rounds,
            "the window answered {applied} of {rounds} reads"
        );
        assert!(resumed > rounds / 4, "{resumed}");
    }
}

/// Manual check against a real log: `WINDOW_LOG=<file.jsonl.zstd> cargo test -p dsh-session-mail-store
/// --profile ci --lib window_on_a_real_log -- --ignored --nocapture` (times and compares both reads).
#[cfg(test)]
#[test]
#[ignore = "needs WINDOW_LOG pointing at a zstd session log"]
fn window_on_a_real_log() {
    let Some(p) = std::env::var_os("WINDOW_LOG") else {
        return;
    };
    let mut file = std::fs::File::open(&p).unwrap();
    let size = file.metadata().unwrap().len();
    if std::env::var_os("WINDOW_ONLY").is_some() {
        // Interleaved: the read from the end, and the same without the head check (`Chain`).
        let (mut with, mut without) = (Vec::new(), Vec::new());
        read(&mut file, size, None).unwrap(); // the page cache, not counted
        for _ in 0..std::env::var("WINDOW_REPS").map_or(5, |v| v.parse().unwrap()) {
            for skip in [false, true] {
                SKIP_HEAD.with(|c| c.set(skip));
                let t = std::time::Instant::now();
                let w = read(&mut file, size, None).unwrap();
                let ms = t.elapsed().as_secs_f64() * 1e3;
                assert!(w.is_some(), "declined");
                if skip {
                    without.push(ms);
                } else {
                    with.push(ms);
                }
            }
        }
        SKIP_HEAD.with(|c| c.set(false));
        let Cost {
            steps,
            decodes,
            spent,
        } = LAST_CHAIN.with(|c| c.get());
        let q = |v: &mut Vec<f64>, p: f64| {
            v.sort_by(f64::total_cmp);
            v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
        };
        eprintln!(
            "window with the head check p50/p99/max {:.1}/{:.1}/{:.1} ms, without {:.1}/{:.1}/{:.1} ms; \
             ratio of medians {:.2}; the check walked {steps} replaces, decoded {decodes} frames, {spent} bytes",
            q(&mut with, 0.5), q(&mut with, 0.99), q(&mut with, 1.0),
            q(&mut without, 0.5), q(&mut without, 0.99), q(&mut without, 1.0),
            q(&mut with, 0.5) / q(&mut without, 0.5)
        );
        return;
    }
    let t = std::time::Instant::now();
    let (b, _) =
        crate::brief::scan(&mut file, Encoding::Zstd, size, None, &mut Scratch::new()).unwrap();
    let tb = t.elapsed();
    let t = std::time::Instant::now();
    let t2 = std::time::Instant::now();
    let w0 = read(&mut file, size, None).unwrap();
    let tw0 = t2.elapsed();
    eprintln!(
        "window without a brief {tw0:?} (declined: {})",
        w0.is_none()
    );
    let w = read(&mut file, size, Some(&b)).unwrap();
    let tw = t.elapsed();
    let t = std::time::Instant::now();
    let (c, v) = continue_fold(&mut file, Encoding::Zstd, size, Fold::default()).unwrap();
    let tf = t.elapsed();
    let full = v.unwrap_or(c);
    eprintln!("brief {tb:?}, window {tw:?}, full fold {tf:?}");
    let Some((c, v, covered)) = w else {
        eprintln!("the window declined");
        return;
    };
    let got = v.unwrap_or(c);
    eprintln!(
        "window covered {covered} of {size} bytes; {} surface nodes; notes {:?} / full {:?}",
        got.surface.len(),
        got.notes,
        full.notes
    );
    assert_eq!(got.display_title(), full.display_title());
    assert_eq!(got.last_seq, full.last_seq);
    let a: Vec<_> = got
        .surface
        .iter()
        .map(|n| (n.seq, n.loc, n.replaced, n.label.clone()))
        .collect();
    let z: Vec<_> = full
        .surface
        .iter()
        .map(|n| (n.seq, n.loc, n.replaced, n.label.clone()))
        .collect();
    assert_eq!(a, z);
}

/// Manual check over a whole corpus, every log whatever its size: `WINDOW_DIR=<sessions dir> cargo test -p
/// dsh-session-mail-store --profile ci --lib window_on_a_corpus -- --ignored --nocapture`: how many logs the
/// window reads (the rest fall back to the full fold), and every window read equals the full fold.
#[cfg(test)]
#[test]
#[ignore = "needs WINDOW_DIR pointing at a sessions folder"]
fn window_on_a_corpus() {
    let Some(d) = std::env::var_os("WINDOW_DIR") else {
        return;
    };
    fn logs(d: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                logs(&p, out);
            } else if p.extension().is_some_and(|x| x == "zstd") {
                out.push(p);
            }
        }
    }
    let mut all = Vec::new();
    logs(std::path::Path::new(&d), &mut all);
    let (mut applied, mut covered, mut total) = (0usize, 0u64, 0u64);
    for p in &all {
        let mut file = std::fs::File::open(p).unwrap();
        let size = file.metadata().unwrap().len();
        total += size;
        let w = read(&mut file, size, None).unwrap();
        let Some((c, v, cov)) = w else { continue };
        applied += 1;
        covered += cov;
        let got = v.unwrap_or(c);
        let (c, v) = continue_fold(&mut file, Encoding::Zstd, size, Fold::default()).unwrap();
        let full = v.unwrap_or(c);
        let key = |f: &Fold| {
            (
                f.display_title().map(str::to_string),
                f.last_seq,
                f.surface
                    .iter()
                    .map(|n| (n.seq, n.loc, n.replaced, n.class, n.label.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(key(&got), key(&full), "{}", p.display());
    }
    eprintln!(
        "{applied} of {} logs read from the end (the rest: the full fold); the windows cover {covered} of {total} bytes",
        all.len()
    );
}
