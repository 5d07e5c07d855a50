//! Physical layer of a session log: zstd frame boundaries and bounded line splitting.
//!
//! A zstd log is a concatenation of independent frames: the header line in its own frame, then
//! one frame per append batch, each checksummed [R8 `packages/session/session-persistence-jsonl/src/index.ts`
//! `encodeMaterialization`, `encodeEventBatch`; Z17 `generation.ts` `ZSTD_c_checksumFlag`]. The last
//! frame can be torn while a write is in flight. We find each frame's end by walking its block
//! headers (RFC 8878 §3.1.1) *before* decoding it, so a torn frame is known as torn up front and a
//! reader can keep the committed state apart from the torn tail.

use std::io::{self, Read, Seek, SeekFrom};

/// Longest line we accept (bytes). Longer lines are skipped with a note, never buffered whole.
pub const LINE_CAP: usize = 16 * 1024 * 1024;

/// `0xFD2FB528` little-endian.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// RFC 8878 §3.1.1.2.3: `Block_Maximum_Size` is 128 KiB.
const BLOCK_MAX: u64 = 128 * 1024;

/// Where a line starts: the frame it starts in (for plain logs 0) and the offset inside that
/// frame's decompressed bytes (for plain logs the absolute byte offset).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Loc {
    pub frame: u64,
    pub inner: u64,
}

/// What sits at an offset of a zstd log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameScan {
    /// A structurally complete zstd frame ending (exclusive) at `end`.
    Frame { end: u64 },
    /// A skippable frame (magic `0x184D2A5?`), ending at `end`.
    Skippable { end: u64 },
    /// A frame whose bytes run past the end of the file: a write in flight (or a torn tail).
    Torn,
    /// Not a frame: bad magic or an impossible header/block.
    Garbage(&'static str),
}

fn read_at<R: Read + Seek>(r: &mut R, pos: u64, buf: &mut [u8]) -> io::Result<()> {
    r.seek(SeekFrom::Start(pos))?;
    r.read_exact(buf)
}

/// Walk the frame starting at `start` without decoding it. `size` is the file size to trust
/// (a file that grows meanwhile is read up to `size` only).
pub fn scan_frame<R: Read + Seek>(r: &mut R, start: u64, size: u64) -> io::Result<FrameScan> {
    if start + 4 > size {
        return Ok(FrameScan::Torn);
    }
    let mut magic = [0u8; 4];
    read_at(r, start, &mut magic)?;
    if magic[1..] == [0x2A, 0x4D, 0x18] && magic[0] & 0xF0 == 0x50 {
        if start + 8 > size {
            return Ok(FrameScan::Torn);
        }
        let mut len = [0u8; 4];
        r.read_exact(&mut len)?;
        let end = start + 8 + u32::from_le_bytes(len) as u64;
        return Ok(if end > size {
            FrameScan::Torn
        } else {
            FrameScan::Skippable { end }
        });
    }
    if magic != ZSTD_MAGIC {
        return Ok(FrameScan::Garbage("not a zstd frame"));
    }
    let mut pos = start + 4;
    if pos + 1 > size {
        return Ok(FrameScan::Torn);
    }
    let mut fhd = [0u8; 1];
    r.read_exact(&mut fhd)?;
    let fhd = fhd[0];
    if fhd & 0x08 != 0 {
        return Ok(FrameScan::Garbage(
            "reserved bit set in a zstd frame header",
        ));
    }
    let single_segment = fhd & 0x20 != 0;
    let checksum = fhd & 0x04 != 0;
    let did = [0u64, 1, 2, 4][(fhd & 0x03) as usize];
    let fcs = match fhd >> 6 {
        0 => u64::from(single_segment),
        1 => 2,
        2 => 4,
        _ => 8,
    };
    pos += 1 + u64::from(!single_segment) + did + fcs;
    loop {
        if pos + 3 > size {
            return Ok(FrameScan::Torn);
        }
        let mut bh = [0u8; 3];
        read_at(r, pos, &mut bh)?;
        let bh = u32::from(bh[0]) | u32::from(bh[1]) << 8 | u32::from(bh[2]) << 16;
        let last = bh & 1 != 0;
        let block_type = (bh >> 1) & 0x3;
        let block_size = u64::from(bh >> 3);
        if block_size > BLOCK_MAX {
            return Ok(FrameScan::Garbage("zstd block larger than 128 KiB"));
        }
        pos += 3 + match block_type {
            0 | 2 => block_size,
            1 => 1,
            _ => return Ok(FrameScan::Garbage("reserved zstd block type")),
        };
        if last {
            break;
        }
    }
    if checksum {
        pos += 4;
    }
    Ok(if pos > size {
        FrameScan::Torn
    } else {
        FrameScan::Frame { end: pos }
    })
}

/// How far one resync looks for the next frame magic. Real damage (a torn write, a bad sector) is
/// small; past this the rest of the file is garbage (a 20 GiB sparse file costs one bounded scan).
pub const RESYNC_MAX: u64 = 64 * 1024 * 1024;

/// The next offset in `[from, size)` where a zstd frame magic starts, reading in bounded chunks,
/// looking at most [`RESYNC_MAX`] bytes ahead.
pub fn find_magic<R: Read + Seek>(r: &mut R, from: u64, size: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pos = from;
    let size = size.min(from.saturating_add(RESYNC_MAX));
    while pos < size {
        let want = ((size - pos) as usize).min(buf.len());
        r.seek(SeekFrom::Start(pos))?;
        r.read_exact(&mut buf[..want])?;
        if let Some(i) = memchr::memmem::find(&buf[..want], &ZSTD_MAGIC) {
            return Ok(Some(pos + i as u64));
        }
        if want < 4 {
            break;
        }
        pos += (want - 3) as u64;
    }
    Ok(None)
}

/// The start of the next structurally complete frame in `[from, size)`, if any (a torn frame
/// followed by a complete one was a corrupt frame in the middle, not a write in flight).
pub fn next_complete_frame<R: Read + Seek>(
    r: &mut R,
    from: u64,
    size: u64,
) -> io::Result<Option<u64>> {
    let mut at = from;
    while let Some(m) = find_magic(r, at, size)? {
        if let FrameScan::Frame { .. } = scan_frame(r, m, size)? {
            return Ok(Some(m));
        }
        at = m + 1;
    }
    Ok(None)
}

/// A positional reader with a read-ahead window: the many small reads of a frame walk (magic,
/// frame header, block headers) and the frame bytes that follow cost a copy, not a syscall.
/// Seeking only moves the cursor.
pub struct Windowed<R> {
    inner: R,
    buf: Vec<u8>,
    /// File offset of `buf[0]`, and how many bytes of `buf` are valid.
    base: u64,
    len: usize,
    pos: u64,
}

impl<R: Read + Seek> Windowed<R> {
    pub fn new(inner: R, window: usize) -> Self {
        Self::with_buffer(inner, vec![0u8; window.max(4096)])
    }

    /// Use `buf` (its length is the window) as the window; get it back with [`Windowed::into_buffer`].
    pub fn with_buffer(inner: R, buf: Vec<u8>) -> Self {
        Windowed {
            inner,
            buf,
            base: 0,
            len: 0,
            pos: 0,
        }
    }

    pub fn into_buffer(self) -> Vec<u8> {
        self.buf
    }

    /// The reader under the window, for reads that gain nothing from it: frames decoded from the
    /// end backwards (each would refill the whole window at its own offset for a frame of a few
    /// KB). The window stays right: it is refilled only after seeking the reader to its position.
    pub fn inner_mut(&mut self) -> &mut R {
        &mut self.inner
    }
}

impl<R: Read + Seek> Read for Windowed<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        let in_window = self.pos >= self.base && self.pos < self.base + self.len as u64;
        if !in_window {
            self.inner.seek(SeekFrom::Start(self.pos))?;
            if out.len() >= self.buf.len() {
                // A big read: straight into the caller's buffer.
                let n = self.inner.read(out)?;
                self.pos += n as u64;
                return Ok(n);
            }
            let n = loop {
                match self.inner.read(&mut self.buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    other => break other?,
                }
            };
            self.base = self.pos;
            self.len = n;
            if n == 0 {
                return Ok(0);
            }
        }
        let off = (self.pos - self.base) as usize;
        let n = out.len().min(self.len - off);
        out[..n].copy_from_slice(&self.buf[off..off + n]);
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Read + Seek> Seek for Windowed<R> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        self.pos = match to {
            SeekFrom::Start(p) => p,
            SeekFrom::Current(d) => self
                .pos
                .checked_add_signed(d)
                .ok_or_else(|| io::Error::other("seek before the start"))?,
            SeekFrom::End(_) => {
                let p = self.inner.seek(to)?;
                self.len = 0;
                p
            }
        };
        Ok(self.pos)
    }
}

/// One item out of the splitter.
#[derive(Debug)]
pub enum Piece<'a> {
    Line {
        bytes: &'a [u8],
        loc: Loc,
    },
    /// A line longer than [`LINE_CAP`] was skipped; `len` bytes (the newline excluded).
    Oversized {
        loc: Loc,
        len: u64,
    },
}

/// Splits decompressed bytes into lines. A line may cross frames; it is never buffered past
/// `cap` bytes (then the rest up to the next newline is skipped and reported).
#[derive(Debug, Clone)]
pub struct Splitter {
    cap: usize,
    pending: Vec<u8>,
    pending_loc: Loc,
    skipping: bool,
    skipped: u64,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter::new(LINE_CAP)
    }
}

impl Splitter {
    pub fn new(cap: usize) -> Self {
        Splitter {
            cap,
            pending: Vec::new(),
            pending_loc: Loc::default(),
            skipping: false,
            skipped: 0,
        }
    }

    /// Bytes of an unfinished line held over (0 at a clean line boundary).
    pub fn has_partial(&self) -> bool {
        !self.pending.is_empty() || self.skipping
    }

    /// Where the unfinished line (if any) starts.
    pub fn partial_start(&self) -> Option<Loc> {
        self.has_partial().then_some(self.pending_loc)
    }

    /// Forget an unfinished line (a corrupt frame cut it).
    pub fn drop_partial(&mut self) {
        self.pending = Vec::new();
        self.skipping = false;
        self.skipped = 0;
    }

    /// Feed `chunk`, whose first byte sits at `base` (frame, inner offset).
    pub fn feed(&mut self, chunk: &[u8], base: Loc, out: &mut dyn FnMut(Piece<'_>)) {
        let mut start = 0usize;
        while start < chunk.len() {
            let nl = memchr::memchr(b'\n', &chunk[start..]).map(|i| start + i);
            let seg_end = nl.unwrap_or(chunk.len());
            let seg = &chunk[start..seg_end];
            let seg_loc = Loc {
                frame: base.frame,
                inner: base.inner + start as u64,
            };
            let fresh = self.pending.is_empty() && !self.skipping;
            if fresh {
                self.pending_loc = seg_loc;
            }
            if self.skipping {
                self.skipped += seg.len() as u64;
            } else if self.pending.len() + seg.len() > self.cap {
                self.skipped = (self.pending.len() + seg.len()) as u64;
                self.pending = Vec::new();
                self.skipping = true;
            } else if nl.is_some() && fresh {
                // Whole line inside this chunk: no copy.
                out(Piece::Line {
                    bytes: seg,
                    loc: seg_loc,
                });
                start = seg_end + 1;
                continue;
            } else {
                self.pending.extend_from_slice(seg);
            }
            if nl.is_some() {
                if self.skipping {
                    out(Piece::Oversized {
                        loc: self.pending_loc,
                        len: self.skipped,
                    });
                    self.skipping = false;
                    self.skipped = 0;
                } else {
                    let line = std::mem::take(&mut self.pending);
                    out(Piece::Line {
                        bytes: &line,
                        loc: self.pending_loc,
                    });
                }
                start = seg_end + 1;
            } else {
                start = seg_end;
            }
        }
    }
}

/// A zstd decoder over exactly `len` bytes of `r` starting at its current position: one frame
/// (or several, when `single` is false).
pub fn frame_decoder<'a, R: Read + 'a>(
    r: R,
    len: u64,
    single: bool,
) -> io::Result<Box<dyn Read + 'a>> {
    let reader = io::BufReader::with_capacity(64 * 1024, r.take(len));
    let dec = zstd::stream::read::Decoder::with_buffer(reader)?;
    Ok(if single {
        Box::new(dec.single_frame())
    } else {
        Box::new(dec)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Cursor, Write};

    fn frame(text: &str) -> Vec<u8> {
        let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
        enc.include_checksum(true).unwrap();
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap()
    }

    #[test]
    fn scan_frame_finds_each_frame_end_and_a_torn_tail() {
        let a = frame("one\n");
        let b = frame(&"x".repeat(300_000));
        let mut all = a.clone();
        all.extend_from_slice(&b);
        let size = all.len() as u64;
        let mut c = Cursor::new(all.clone());
        assert_eq!(
            scan_frame(&mut c, 0, size).unwrap(),
            FrameScan::Frame {
                end: a.len() as u64
            }
        );
        assert_eq!(
            scan_frame(&mut c, a.len() as u64, size).unwrap(),
            FrameScan::Frame { end: size }
        );
        // Cut the second frame: torn.
        let cut = size - 5;
        assert_eq!(
            scan_frame(&mut c, a.len() as u64, cut).unwrap(),
            FrameScan::Torn
        );
        // Not a frame.
        let mut g = Cursor::new(b"hello world".to_vec());
        assert!(matches!(
            scan_frame(&mut g, 0, 11).unwrap(),
            FrameScan::Garbage(_)
        ));
        // Resync finds the second magic.
        assert_eq!(find_magic(&mut c, 1, size).unwrap(), Some(a.len() as u64));
    }

    #[test]
    fn skippable_frames_are_recognised() {
        let mut data = vec![0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 1, 2, 3];
        data.extend(frame("a\n"));
        let size = data.len() as u64;
        let mut c = Cursor::new(data);
        assert_eq!(
            scan_frame(&mut c, 0, size).unwrap(),
            FrameScan::Skippable { end: 11 }
        );
        assert!(matches!(
            scan_frame(&mut c, 11, size).unwrap(),
            FrameScan::Frame { .. }
        ));
    }

    fn collect(s: &mut Splitter, chunks: &[(&[u8], Loc)]) -> Vec<String> {
        let mut out = Vec::new();
        for (chunk, loc) in chunks {
            s.feed(chunk, *loc, &mut |p| match p {
                Piece::Line { bytes, loc } => out.push(format!(
                    "{}@{}:{}",
                    String::from_utf8_lossy(bytes),
                    loc.frame,
                    loc.inner
                )),
                Piece::Oversized { loc, len } => {
                    out.push(format!("<{len}>@{}:{}", loc.frame, loc.inner))
                }
            });
        }
        out
    }

    #[test]
    fn splitter_joins_lines_across_chunks_and_keeps_their_start() {
        let mut s = Splitter::new(100);
        let got = collect(
            &mut s,
            &[
                (b"ab\ncd", Loc { frame: 0, inner: 0 }),
                (b"ef\ng", Loc { frame: 9, inner: 0 }),
            ],
        );
        assert_eq!(got, vec!["ab@0:0", "cdef@0:3"]);
        assert!(s.has_partial());
    }

    #[test]
    fn splitter_skips_an_oversized_line_without_buffering_it() {
        let mut s = Splitter::new(8);
        let big = vec![b'z'; 20];
        let got = collect(
            &mut s,
            &[
                (b"ok\n", Loc::default()),
                (&big, Loc { frame: 0, inner: 3 }),
                (
                    b"zz\nnext\n",
                    Loc {
                        frame: 0,
                        inner: 23,
                    },
                ),
            ],
        );
        assert_eq!(got, vec!["ok@0:0", "<22>@0:3", "next@0:26"]);
        assert!(s.pending.capacity() <= 16, "never buffered the big line");
    }
}
