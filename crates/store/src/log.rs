//! Reading a log into a [`Fold`] (from its resume point) and fetching the text of a few events.
//! Files are opened read-only; nothing here writes or locks.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::Value;

use crate::error::DecodeStop;
use crate::fold::Fold;
use crate::frames::{
    find_magic, frame_decoder, next_complete_frame, scan_frame, FrameScan, Loc, Windowed, LINE_CAP,
};

/// Physical encoding of a log file: `.jsonl.zstd` or `.jsonl`
/// [R8 `packages/session/session-persistence-jsonl/src/format.ts` `logSuffix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Zstd,
    Plain,
}

/// Frames whose compressed bytes are at most this long are read whole with one read.
const CBUF_MAX: u64 = 8 * 1024 * 1024;
/// Frames that declare at most this many decompressed bytes are decoded in one call.
const BULK_MAX: u64 = 8 * 1024 * 1024;
/// How much decoding one read of one log may do (the "cost" of a read: decoded bytes plus
/// [`LINE_COST`] per line). Past it the read stops with a note: a 164 KB zstd bomb of millions of
/// events, or a few KB of run-length blocks expanding to a gigabyte of newlines, costs a bounded
/// time. The bench's 1 GiB log (910 k events) costs about 1.06 GiB.
pub const DECODE_BUDGET: u64 = 2 * 1024 * 1024 * 1024;
/// [`DECODE_BUDGET`]; tests lower it for their thread (a small log past the budget).
pub(crate) static BUDGET: crate::threshold::Threshold =
    crate::threshold::Threshold::new(DECODE_BUDGET);
/// What one line costs against [`DECODE_BUDGET`] (lines, not bytes, are what a fold spends time on).
pub const LINE_COST: u64 = 64;

/// The cost of a decoded chunk against [`DECODE_BUDGET`].
pub fn chunk_cost(chunk: &[u8]) -> u64 {
    chunk.len() as u64 + LINE_COST * memchr::memchr_iter(b'\n', chunk).count() as u64
}

/// Read-ahead window of a frame walk.
pub(crate) const WINDOW: usize = 256 * 1024;

/// What is left of the decode budget of one read (see [`DECODE_BUDGET`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    left: u64,
    /// The budget ran out during this read.
    exhausted: bool,
}

impl Budget {
    fn new(left: u64) -> Budget {
        Budget {
            left,
            exhausted: false,
        }
    }

    /// Spend the cost of `chunk`; false (and exhausted) when it would overdraw: the read must stop.
    pub(crate) fn spend(&mut self, chunk: &[u8]) -> bool {
        let c = chunk_cost(chunk);
        if c > self.left {
            self.left = 0;
            self.exhausted = true;
            return false;
        }
        self.left -= c;
        true
    }
}

/// Buffers reused across the frames of one read: one zstd context, the compressed bytes of a
/// frame, its decompressed bytes, and a chunk buffer for the streaming path.
pub struct Scratch {
    dctx: zstd::zstd_safe::DCtx<'static>,
    buf: Vec<u8>,
    cbuf: Vec<u8>,
    out: Vec<u8>,
    window: Vec<u8>,
    budget: Budget,
}

impl Default for Scratch {
    fn default() -> Self {
        Scratch::new()
    }
}

impl Scratch {
    pub fn new() -> Scratch {
        Scratch {
            dctx: zstd::zstd_safe::DCtx::create(),
            buf: vec![0u8; 64 * 1024],
            cbuf: Vec::new(),
            out: Vec::new(),
            window: Vec::new(),
            budget: Budget::new(BUDGET.get()),
        }
    }

    /// Start a new read with a full budget.
    pub(crate) fn reset_budget(&mut self, budget: u64) {
        self.budget = Budget::new(budget);
    }

    /// Spend the cost of `chunk`; false when the budget is used up (the read must stop).
    pub(crate) fn spend(&mut self, chunk: &[u8]) -> bool {
        self.budget.spend(chunk)
    }

    /// The budget ran out during this read.
    pub(crate) fn exhausted(&self) -> bool {
        self.budget.exhausted
    }

    pub(crate) fn take_window(&mut self) -> Vec<u8> {
        let w = std::mem::take(&mut self.window);
        if w.len() == WINDOW {
            w
        } else {
            vec![0u8; WINDOW]
        }
    }

    pub(crate) fn put_window(&mut self, w: Vec<u8>) {
        self.window = w;
    }

    /// Drop buffers a huge frame left behind (keeps memory bounded between logs).
    pub(crate) fn trim(&mut self) {
        for v in [&mut self.cbuf, &mut self.out] {
            if v.capacity() > 1024 * 1024 {
                *v = Vec::new();
            }
        }
    }
}

/// Decode the complete frame `[start, end)` of `r`, handing its decompressed bytes to `sink`
/// (chunk, offset of the chunk inside the frame). A frame that declares its size is decoded in
/// one call into a reused buffer; others, and damaged ones, stream (so the lines before the
/// damage still reach `sink`). Err: why the frame could not be decoded to its end.
pub(crate) fn decode_unit<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
    sc: &mut Scratch,
    sink: &mut dyn FnMut(&[u8], u64),
) -> io::Result<Result<(), DecodeStop>> {
    let len = end - start;
    if sc.budget.exhausted {
        return Ok(Err(DecodeStop::BudgetSpent));
    }
    if len > CBUF_MAX {
        // Rare: stream it from the file.
        return decode_stream(r, start, len, sc, sink);
    }
    let Scratch {
        dctx,
        buf,
        cbuf,
        out,
        budget,
        ..
    } = sc;
    cbuf.clear();
    cbuf.resize(len as usize, 0);
    r.seek(SeekFrom::Start(start))?;
    r.read_exact(cbuf)?;
    if let Ok(Some(n)) = zstd::zstd_safe::get_frame_content_size(cbuf) {
        if n <= BULK_MAX {
            out.clear();
            out.reserve(n as usize);
            let _ = dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly);
            if let Ok(got) = dctx.decompress(out, cbuf) {
                if got > 0 {
                    if !budget.spend(&out[..got]) {
                        return Ok(Err(DecodeStop::BudgetSpent));
                    }
                    sink(&out[..got], 0);
                }
                return Ok(Ok(()));
            }
        }
    }
    reset(dctx)?;
    let dec = zstd::stream::read::Decoder::with_context(&cbuf[..], dctx).single_frame();
    Ok(stream_into(dec, buf, budget, sink))
}

/// Stream the zstd frame that starts at `start` (at most `len` bytes of it: a torn last frame, or one
/// too long to read whole) to `sink`, as far as it decodes. Err: why it stopped before its end
/// ([`DecodeStop::BudgetSpent`] when the budget ran out).
pub(crate) fn decode_stream<R: Read + Seek>(
    r: &mut R,
    start: u64,
    len: u64,
    sc: &mut Scratch,
    sink: &mut dyn FnMut(&[u8], u64),
) -> io::Result<Result<(), DecodeStop>> {
    if sc.budget.exhausted {
        return Ok(Err(DecodeStop::BudgetSpent));
    }
    r.seek(SeekFrom::Start(start))?;
    let Scratch {
        dctx, buf, budget, ..
    } = sc;
    reset(dctx)?;
    let input = BufReader::with_capacity(64 * 1024, (&mut *r).take(len));
    let dec = zstd::stream::read::Decoder::with_context(input, dctx).single_frame();
    Ok(stream_into(dec, buf, budget, sink))
}

fn reset(dctx: &mut zstd::zstd_safe::DCtx<'static>) -> io::Result<()> {
    dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly)
        .map(|_| ())
        .map_err(|c| io::Error::other(zstd::zstd_safe::get_error_name(c)))
}

/// The one streaming loop: read `dec` in `buf`-sized chunks, spend each chunk's cost, hand it to
/// `sink` with its offset inside the frame.
fn stream_into<D: Read>(
    mut dec: D,
    buf: &mut [u8],
    budget: &mut Budget,
    sink: &mut dyn FnMut(&[u8], u64),
) -> Result<(), DecodeStop> {
    let mut inner = 0u64;
    loop {
        let n = match dec.read(buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        if !budget.spend(&buf[..n]) {
            return Err(DecodeStop::BudgetSpent);
        }
        sink(&buf[..n], inner);
        inner += n as u64;
    }
}

/// Continue `fold` over `r` (whose trusted size is `size`). Returns the committed fold (safe to
/// cache and to resume from) and, when the last zstd frame is torn, a view that also holds the
/// complete lines of that torn frame.
pub fn continue_fold<R: Read + Seek>(
    r: &mut R,
    enc: Encoding,
    size: u64,
    mut fold: Fold,
) -> io::Result<(Fold, Option<Fold>)> {
    match enc {
        Encoding::Plain => {
            let start = fold.offset;
            r.seek(SeekFrom::Start(start))?;
            let mut reader = r.take(size.saturating_sub(start));
            let mut buf = vec![0u8; 64 * 1024];
            let mut pos = start;
            let mut budget = Scratch::new();
            loop {
                let n = reader.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                if !budget.spend(&buf[..n]) {
                    fold.splitter.drop_partial();
                    fold.note_at(
                        Loc {
                            frame: 0,
                            inner: pos,
                        },
                        budget_note(pos, size),
                    );
                    fold.offset = size;
                    fold.stopped = true;
                    return Ok((fold, None));
                }
                fold.feed(
                    &buf[..n],
                    Loc {
                        frame: 0,
                        inner: pos,
                    },
                );
                pos += n as u64;
            }
            // A final line without its newline is a torn tail: not committed, re-read next time
            // [R8 `format.ts` `SessionLogScanner.finish` "ignoring a final record without a newline"].
            fold.offset = match fold.splitter.partial_start() {
                Some(loc) => {
                    fold.splitter.drop_partial();
                    loc.inner
                }
                None => pos,
            };
            Ok((fold, None))
        }
        Encoding::Zstd => {
            let mut sc = Scratch::new();
            let r = &mut Windowed::new(r, WINDOW);
            let mut pos = fold.offset;
            while pos < size {
                match scan_frame(r, pos, size)? {
                    FrameScan::Frame { end } => {
                        decode_frame(r, pos, end, &mut fold, &mut sc);
                        if sc.exhausted() {
                            fold.splitter.drop_partial();
                            fold.note_at(
                                Loc {
                                    frame: pos,
                                    inner: 0,
                                },
                                budget_note(pos, size),
                            );
                            fold.offset = size;
                            fold.stopped = true;
                            return Ok((fold, None));
                        }
                        pos = end;
                    }
                    FrameScan::Skippable { end } => pos = end,
                    FrameScan::Garbage(why) => {
                        let next = find_magic(r, pos + 1, size)?.unwrap_or(size);
                        fold.note_at(
                            Loc {
                                frame: pos,
                                inner: 0,
                            },
                            format!("byte {pos}: {why}; skipped {} bytes", next - pos),
                        );
                        fold.splitter.drop_partial();
                        pos = next;
                    }
                    FrameScan::Torn => {
                        // A frame that runs past the end of the file. If a complete frame follows it,
                        // it was a corrupt frame in the middle, not a write in flight.
                        if let Some(next) = next_complete_frame(r, pos + 4, size)? {
                            decode_frame(r, pos, next, &mut fold, &mut sc);
                            pos = next;
                            fold.offset = pos;
                            continue;
                        }
                        let mut tail = fold.clone();
                        let complete_before = tail.lines;
                        let _ = decode_stream(r, pos, size - pos, &mut sc, &mut |chunk, inner| {
                            tail.feed(chunk, Loc { frame: pos, inner })
                        });
                        tail.splitter.drop_partial();
                        let kept = tail.lines - complete_before;
                        tail.note_at(Loc { frame: pos, inner: 0 }, format!("torn last frame at byte {pos} (a write in flight?): kept its {kept} complete lines"));
                        fold.offset = pos;
                        return Ok((fold, Some(tail)));
                    }
                }
                fold.offset = pos;
            }
            Ok((fold, None))
        }
    }
}

/// The note of a read that stopped at its budget.
pub fn budget_note(at: u64, size: u64) -> String {
    format!(
        "stopped reading at byte {at} of {size}: this log decodes to more than the {} bound of one read (run-length bomb or a giant log); later events are not shown",
        crate::fold::human_bytes(BUDGET.get())
    )
}

fn decode_frame<R: Read + Seek>(
    r: &mut R,
    start: u64,
    end: u64,
    fold: &mut Fold,
    sc: &mut Scratch,
) {
    let res = decode_unit(r, start, end, sc, &mut |chunk, inner| {
        fold.feed(
            chunk,
            Loc {
                frame: start,
                inner,
            },
        )
    });
    let why = match res {
        Ok(Ok(())) => return,
        Ok(Err(_)) if sc.exhausted() => return,
        Ok(Err(why)) => why,
        Err(e) => e.into(),
    };
    fold.note_at(
        Loc {
            frame: start,
            inner: 0,
        },
        format!("corrupt zstd frame at byte {start} ({why}); skipped the rest of it"),
    );
    fold.splitter.drop_partial();
}

/// Where the events to fetch live.
pub enum Source<'a> {
    File { path: &'a Path, enc: Encoding },
    Memory(&'a [u8]),
}

/// Fetch the full JSON of the events at `wanted` (seq → where its line starts). An event that
/// cannot be found again (the file changed meanwhile) or whose line is over the cap is absent.
pub fn fetch_events(src: &Source<'_>, wanted: &[(u64, Loc)]) -> HashMap<u64, Value> {
    let mut out = HashMap::new();
    let mut groups: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    for &(seq, loc) in wanted {
        groups.entry(loc.frame).or_default().push((loc.inner, seq));
    }
    // zstd: one open file, one read-ahead window and one decoder context for all the frames.
    let mut reuse = match src {
        Source::File {
            path,
            enc: Encoding::Zstd,
        } => base::fsafe::open_regular(path, base::fsafe::Follow::Yes, None)
            .map(|(f, m)| (m.len(), f))
            .ok()
            .map(|(size, f)| {
                (
                    size,
                    Windowed::new(f, 64 * 1024),
                    Scratch::new(),
                    Vec::new(),
                )
            }),
        _ => None,
    };
    for (frame, mut items) in groups {
        items.sort_unstable();
        if let Some((size, w, sc, buf)) = reuse.as_mut() {
            if fetch_in_frame(w, *size, sc, buf, frame, &items, &mut out) {
                continue;
            }
        }
        let _ = fetch_group(src, frame, &items, &mut out);
    }
    out
}

/// Fetch lines that lie wholly inside the complete frame at `frame` (the usual case: a frame
/// holds whole lines). False: not that case, or the frame could not be read; use [`fetch_group`].
fn fetch_in_frame<R: Read + Seek>(
    w: &mut R,
    size: u64,
    sc: &mut Scratch,
    buf: &mut Vec<u8>,
    frame: u64,
    items: &[(u64, u64)],
    out: &mut HashMap<u64, Value>,
) -> bool {
    let Ok(FrameScan::Frame { end }) = scan_frame(w, frame, size) else {
        return false;
    };
    buf.clear();
    let mut big = false;
    sc.reset_budget(BUDGET.get());
    let res = decode_unit(w, frame, end, sc, &mut |chunk, _| {
        if buf.len() + chunk.len() > 2 * LINE_CAP {
            big = true;
        } else {
            buf.extend_from_slice(chunk);
        }
    });
    if big || !matches!(res, Ok(Ok(()))) {
        return false;
    }
    let mut lines = Vec::with_capacity(items.len());
    for &(inner, seq) in items {
        let Some(rest) = buf.get(inner as usize..) else {
            return false;
        };
        let Some(nl) = memchr::memchr(b'\n', rest) else {
            return false;
        };
        lines.push((seq, &rest[..nl]));
    }
    for (seq, line) in lines {
        // The same cap as the streaming path, which counts the newline.
        if line.len() < LINE_CAP {
            if let Ok(v) = base::utf16::parse_lossy(line).ok_or(()) {
                if v.get("seq").and_then(Value::as_u64) == Some(seq) {
                    out.insert(seq, v);
                }
            }
        }
    }
    if buf.capacity() > 1024 * 1024 {
        *buf = Vec::new();
    }
    true
}

fn fetch_group(
    src: &Source<'_>,
    frame: u64,
    items: &[(u64, u64)],
    out: &mut HashMap<u64, Value>,
) -> io::Result<()> {
    let mut keep = |seq: u64, line: &[u8]| {
        if line.len() > LINE_CAP {
            return;
        }
        if let Ok(v) = base::utf16::parse_lossy(line).ok_or(()) {
            if v.get("seq").and_then(Value::as_u64) == Some(seq) {
                out.insert(seq, v);
            }
        }
    };
    match src {
        Source::Memory(bytes) => {
            for &(inner, seq) in items {
                let Some(rest) = bytes.get(inner as usize..) else {
                    continue;
                };
                let end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                keep(seq, &rest[..end]);
            }
        }
        Source::File {
            path,
            enc: Encoding::Plain,
        } => {
            let mut reader =
                BufReader::new(base::fsafe::open_regular(path, base::fsafe::Follow::Yes, None)?.0);
            for &(inner, seq) in items {
                reader.seek(SeekFrom::Start(inner))?;
                let mut line = Vec::new();
                (&mut reader)
                    .take(LINE_CAP as u64 + 1)
                    .read_until(b'\n', &mut line)?;
                keep(seq, &line);
            }
        }
        Source::File {
            path,
            enc: Encoding::Zstd,
        } => {
            let (mut f, m) = base::fsafe::open_regular(path, base::fsafe::Follow::Yes, None)?;
            let size = m.len();
            f.seek(SeekFrom::Start(frame))?;
            // Not single-frame: a line may continue into the next frame.
            let mut reader = BufReader::new(frame_decoder(f, size.saturating_sub(frame), false)?);
            let mut pos = 0u64;
            for &(inner, seq) in items {
                if inner < pos {
                    continue;
                }
                io::copy(&mut (&mut reader).take(inner - pos), &mut io::sink())?;
                pos = inner;
                let mut line = Vec::new();
                let n = (&mut reader)
                    .take(LINE_CAP as u64 + 1)
                    .read_until(b'\n', &mut line)?;
                pos += n as u64;
                keep(seq, &line);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    type Sink<'a> = &'a mut dyn FnMut(&[u8], u64);
    type Reader =
        fn(&mut Cursor<&[u8]>, u64, &mut Scratch, Sink<'_>) -> io::Result<Result<(), DecodeStop>>;

    fn whole(
        r: &mut Cursor<&[u8]>,
        end: u64,
        sc: &mut Scratch,
        s: Sink<'_>,
    ) -> io::Result<Result<(), DecodeStop>> {
        decode_unit(r, 0, end, sc, s)
    }
    fn stream(
        r: &mut Cursor<&[u8]>,
        end: u64,
        sc: &mut Scratch,
        s: Sink<'_>,
    ) -> io::Result<Result<(), DecodeStop>> {
        decode_stream(r, 0, end, sc, s)
    }
    fn torn(
        r: &mut Cursor<&[u8]>,
        end: u64,
        sc: &mut Scratch,
        s: Sink<'_>,
    ) -> io::Result<Result<(), DecodeStop>> {
        decode_stream(r, 0, end / 2, sc, s)
    }

    fn frame(lines: usize) -> (Vec<u8>, Vec<u8>) {
        let plain: Vec<u8> = (0..lines)
            .flat_map(|i| format!("{{\"seq\":{i},\"pad\":\"{}\"}}\n", "x".repeat(40)).into_bytes())
            .collect();
        (zstd::encode_all(&plain[..], 3).unwrap(), plain)
    }

    fn read(z: &[u8], budget: u64, f: Reader) -> (Vec<u8>, Result<(), DecodeStop>, bool) {
        let mut sc = Scratch::new();
        sc.reset_budget(budget);
        let mut got = Vec::new();
        let res = f(
            &mut Cursor::new(z),
            z.len() as u64,
            &mut sc,
            &mut |chunk, inner| {
                assert_eq!(
                    inner as usize,
                    got.len(),
                    "offsets inside the frame are contiguous"
                );
                got.extend_from_slice(chunk)
            },
        )
        .unwrap();
        (got, res, sc.exhausted())
    }

    #[test]
    fn whole_frames_and_torn_tails_share_one_budgeted_reader() {
        let (z, plain) = frame(20_000);
        // a full budget: both paths deliver the frame; a torn frame delivers a prefix and says why
        assert_eq!(
            read(&z, DECODE_BUDGET, whole),
            (plain.clone(), Ok(()), false)
        );
        assert_eq!(
            read(&z, DECODE_BUDGET, stream),
            (plain.clone(), Ok(()), false)
        );
        let (prefix, why, spent) = read(&z, DECODE_BUDGET, torn);
        assert!(why.is_err() && !spent && !prefix.is_empty() && plain.starts_with(&prefix));
        // a budget below the frame's cost: both stop, exhausted, having spent no more than it
        let small = chunk_cost(&plain) / 3;
        for f in [whole as Reader, stream] {
            let (got, why, spent) = read(&z, small, f);
            assert_eq!((why, spent), (Err(DecodeStop::BudgetSpent), true));
            assert!(chunk_cost(&got) <= small && plain.starts_with(&got));
        }
        // once exhausted, a read does nothing
        let mut sc = Scratch::new();
        sc.reset_budget(1);
        let end = z.len() as u64;
        let _ = decode_unit(&mut Cursor::new(&z[..]), 0, end, &mut sc, &mut |_, _| {});
        let res = decode_stream(&mut Cursor::new(&z[..]), 0, end, &mut sc, &mut |_, _| {
            panic!("no chunk after the budget is spent")
        });
        assert_eq!(res.unwrap(), Err(DecodeStop::BudgetSpent));
    }
}
