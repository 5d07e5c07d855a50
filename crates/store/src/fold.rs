//! Folds over one session's events: title, current model surface, request landing, lineage.
//!
//! The fold keeps no message text: each surface node records where its event starts in the log
//! ([`Loc`]) and the little needed to filter and label it. A read fetches the text of the few
//! nodes it shows afterwards (`log::fetch_events`). Memory is bounded by the number of surface
//! nodes, never by the size of the log.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::value::RawValue;

use crate::events::{
    is_chunk_row, ChunkRowData, EndSeedData, Envelope, Header, MessageLite, Role, SpliceData,
    SurfaceOp, TitleData, TurnData, Wrapped,
};
use crate::frames::{Loc, Piece, Splitter};

pub use crate::classify::{classify, Class, INJECTED_PREFIXES, REQUEST_PREFIX};
pub use crate::title::prompt_fallback_title;

/// One node of the current model surface.
#[derive(Debug, Clone)]
pub struct Node {
    pub seq: u64,
    pub role: Role,
    pub class: Class,
    /// Entered the surface by replacing others (compaction checkpoint, pruned tool result).
    pub replaced: bool,
    pub is_error: bool,
    /// `user`, `model:<provider>/<model>`, `plugin:<name>/<form>`, `tool:<callId>`, or a V4 producer kind.
    pub label: Arc<str>,
    /// The `source.rpcId` when it is one of ours (`dsh-session-mail:`).
    pub request: Option<Arc<str>>,
    pub loc: Loc,
}

/// What the log says about one request id (`source.rpcId`).
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RequestTrace {
    /// Inserted into the inbox: (seq of the splice, target queue).
    pub queued: Option<(u64, String)>,
    /// Landed as a `user/message`: (seq, turn of the enclosing `turn/start`).
    pub landed: Option<(u64, Option<u64>)>,
    /// Removed from the inbox with `outcome:'canceled'` before landing.
    pub canceled: bool,
    /// How often it was inserted into an inbox (a re-delivery inserts it again) and landed (more
    /// than one landing is a double).
    #[serde(default)]
    pub insertions: u32,
    #[serde(default)]
    pub landings: u32,
    /// The splice that canceled the latest insertion (cleared by a later insertion).
    #[serde(default)]
    pub cancel: Option<Cancel>,
    /// Claimed (removed without an outcome: a turn or step took it) at this seq.
    #[serde(default)]
    pub claimed: Option<u64>,
}

/// How a queued request was canceled. rc.8 writes the same `outcome: 'canceled'` splice for a
/// human's queue-row delete (`host/apiproxy/src/api-proxy.ts` `updateQueue` → `Inbox.remove`: one
/// item at its index) and for a cancel without `keepInbox` (`core/agent-loop/src/agent.ts`
/// `cancel` → `Inbox.clear()`: the whole list from 0 — what disposal at shutdown does,
/// `core/agent-loop/src/index.ts` `dispose` → `cancel({kind:'disposed'})`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cancel {
    pub seq: u64,
    /// The splice took the whole list from position 0 (the shape of `Inbox.clear()`).
    pub whole: bool,
    /// How many items the list held before that splice (1: a clear and a row delete look alike).
    pub list_len: usize,
}

/// Bounded list of notes about one log.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Notes {
    pub items: Vec<String>,
    pub more: usize,
}

impl Notes {
    pub const MAX: usize = 8;
    pub fn push(&mut self, s: String) {
        if self.items.len() < Self::MAX {
            self.items.push(s);
        } else {
            self.more += 1;
        }
    }
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    pub fn summary(&self) -> String {
        let mut s = self.items.join("; ");
        if self.more > 0 {
            s.push_str(&format!("; and {} more", self.more));
        }
        s
    }
}

/// The folded state of one log (or of live events), resumable at `offset`.
#[derive(Debug, Clone, Default)]
pub struct Fold {
    pub header: Option<Header>,
    pub header_error: Option<String>,
    /// Last `session/title` title.
    pub title: Option<String>,
    /// The host's deterministic fallback from the first eligible human prompt.
    pub fallback_title: Option<String>,
    pub surface: Surface,
    pub last_seq: Option<u64>,
    pub events: u64,
    turn: Option<u64>,
    pub requests: HashMap<String, RequestTrace>,
    inbox_next_turn: Vec<Option<String>>,
    inbox_next_step: Vec<Option<String>>,
    /// Events with a lower seq were inherited from the parent (fork/seed prefix).
    pub inherited_cut: Option<u64>,
    /// The seq of the last untagged `session/end-seed`: where the process holding the session now
    /// resumed it (rc.8 appends one on every resume). A claim before it was a previous holder's.
    pub resumed_at: Option<u64>,
    pub notes: Notes,
    pub lines: u64,
    gap_noted: bool,
    /// Resume point: byte offset after the last committed frame (zstd) or line (plain).
    pub offset: u64,
    /// This fold stopped at the decode budget (`log::DECODE_BUDGET`): it misses what the log holds
    /// past that point, also once resumed over later appends (persisted: `FoldState::stopped`).
    pub(crate) stopped: bool,
    pub(crate) splitter: Splitter,
    labels: Vec<Arc<str>>,
    surface_capped: bool,
    /// Set on a fold that started at a frame in the middle of the log (`store::window`): what it
    /// knows of the history before that frame. None: a full fold (from byte 0 or a checkpoint).
    pub(crate) window: Option<WindowMode>,
    /// The newest notes, with where their lines are: what a read reports ([`Fold::read_notes`]).
    read: ReadNotes,
    /// The line being folded (where a note about it is placed).
    at: Loc,
}

fn key(l: Loc) -> (u64, u64) {
    (l.frame, l.inner)
}

/// The newest notes of a fold, each with where its line starts, with a count of the older ones;
/// and where the history a read no longer shows ends (see [`Fold::read_notes`]).
#[derive(Debug, Clone, Default, PartialEq)]
struct ReadNotes {
    items: std::collections::VecDeque<((u64, u64), String)>,
    older: usize,
    /// Where the newest of the `older` notes is.
    older_last: Option<(u64, u64)>,
    /// Just after the line of the last node a compaction (a replace from the head of the surface)
    /// removed: the latest such place.
    after: Option<(u64, u64)>,
}

impl ReadNotes {
    fn push(&mut self, at: (u64, u64), s: String) {
        self.items.push_back((at, s));
        if self.items.len() > Notes::MAX {
            if let Some((l, _)) = self.items.pop_front() {
                self.older += 1;
                self.older_last = Some(self.older_last.map_or(l, |o| o.max(l)));
            }
        }
    }
}

/// The first line of a log is its header (both readers: the fold and the listing's brief scan). True when
/// `bytes` is taken by it: parsed as the header, or ignored because the header could not be read.
pub(crate) fn header_line(
    header: &mut Option<Header>,
    error: &mut Option<String>,
    bytes: &[u8],
) -> bool {
    if error.is_some() {
        return true;
    }
    if header.is_some() {
        return false;
    }
    match Header::parse(bytes) {
        Ok(h) => *header = Some(h),
        Err(e) => *error = Some(e.to_string()),
    }
    true
}

/// An over-long line where the header should be: the log has no usable header. True when it was that line.
pub(crate) fn oversized_header(
    header: &Option<Header>,
    error: &mut Option<String>,
    len: u64,
) -> bool {
    if header.is_some() || error.is_some() {
        return false;
    }
    *error = Some(format!("header line of {len} bytes exceeds the line cap"));
    true
}

/// Most surface nodes one fold keeps (about 64 bytes each): past it the oldest go.
pub const MAX_SURFACE: usize = 1_000_000;

/// The current model surface, in order. Replacing a range costs the nodes it removes (amortized
/// constant per node): a node is found by seq through a map, its slot keeps its place, removed
/// slots are skipped with path-compressed "next live slot" links, and tombstones are compacted
/// away once they outnumber the live nodes. A replace storm is linear, never quadratic.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    slots: Vec<Option<Node>>,
    /// `next[i] == i` for a live slot; else a link towards the next live slot (or `slots.len()`).
    next: Vec<usize>,
    /// seq → slot of the live node with that seq (the newest one when a log repeats a seq).
    pos: HashMap<u64, usize>,
    live: usize,
}

impl Surface {
    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// The live nodes in surface order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Node> + '_ {
        self.slots.iter().filter_map(Option::as_ref)
    }

    pub fn clear(&mut self) {
        *self = Surface::default();
    }

    pub fn push(&mut self, node: Node) {
        if self.slots.len() > 1024 && self.slots.len() - self.live > self.live {
            self.compact();
        }
        let i = self.slots.len();
        self.pos.insert(node.seq, i);
        self.slots.push(Some(node));
        self.next.push(i);
        self.live += 1;
    }

    /// The first live slot at or after `i` (`slots.len()` when none).
    fn find(&mut self, i: usize) -> usize {
        let n = self.slots.len();
        let mut r = i;
        while r < n && self.next[r] != r {
            r = self.next[r];
        }
        // Path compression.
        let mut j = i;
        while j < n && self.next[j] != j && self.next[j] != r {
            let k = self.next[j];
            self.next[j] = r;
            j = k;
        }
        r
    }

    fn remove(&mut self, i: usize) {
        if let Some(node) = self.slots[i].take() {
            if self.pos.get(&node.seq) == Some(&i) {
                self.pos.remove(&node.seq);
            }
            self.next[i] = i + 1;
            self.live -= 1;
        }
    }

    /// Replace the nodes from seq `start` to seq `end` (inclusive, in surface order) with `node`.
    /// Err(node): the range is not on the surface.
    pub fn replace(&mut self, start: u64, end: u64, node: Node) -> Result<(), Node> {
        let (Some(&si), Some(&ei)) = (self.pos.get(&start), self.pos.get(&end)) else {
            return Err(node);
        };
        if si > ei {
            return Err(node);
        }
        self.remove_range(si + 1, ei + 1);
        // The new node takes the first slot of the range (so it keeps its place).
        self.put(si, node);
        Ok(())
    }

    /// Remove the live nodes of the slots `from..to`.
    fn remove_range(&mut self, from: usize, to: usize) {
        let mut i = self.find(from);
        while i < to && i < self.slots.len() {
            self.remove(i);
            i = self.find(i + 1);
        }
    }

    /// Put `node` in the live slot `i`, in place of the node there.
    fn put(&mut self, i: usize, node: Node) {
        if let Some(old) = self.slots[i].take() {
            if self.pos.get(&old.seq) == Some(&i) {
                self.pos.remove(&old.seq);
            }
        }
        self.pos.insert(node.seq, i);
        self.slots[i] = Some(node);
    }

    /// Whether a live node has this seq.
    pub fn contains(&self, seq: u64) -> bool {
        self.pos.contains_key(&seq)
    }

    /// The live node with this seq.
    fn get(&self, seq: u64) -> Option<&Node> {
        self.slots.get(*self.pos.get(&seq)?)?.as_ref()
    }

    /// The first live node (the head of the surface).
    fn head(&mut self) -> Option<&Node> {
        let i = self.find(0);
        self.slots.get(i)?.as_ref()
    }

    /// Replace every node from the head of the surface through seq `end` with `node` (the
    /// window's unknown history included). Err(node): `end` is not on the surface.
    pub(crate) fn replace_head_through(&mut self, end: u64, node: Node) -> Result<(), Node> {
        let Some(&ei) = self.pos.get(&end) else {
            return Err(node);
        };
        self.remove_range(0, ei);
        self.put(ei, node);
        Ok(())
    }

    /// Drop the oldest live node.
    pub fn drop_oldest(&mut self) {
        let i = self.find(0);
        if i < self.slots.len() {
            self.remove(i);
        }
    }

    fn compact(&mut self) {
        let nodes: Vec<Node> = std::mem::take(&mut self.slots)
            .into_iter()
            .flatten()
            .collect();
        self.next.clear();
        self.pos.clear();
        self.live = 0;
        for n in nodes {
            let i = self.slots.len();
            self.pos.insert(n.seq, i);
            self.slots.push(Some(n));
            self.next.push(i);
            self.live += 1;
        }
    }
}

impl std::ops::Index<usize> for Surface {
    type Output = Node;
    fn index(&self, i: usize) -> &Node {
        self.iter().nth(i).expect("surface index out of range")
    }
}

/// What a window fold (`store::window`) knows of the history before its first frame: the
/// surface before it is an unknown prefix, which only a compaction checkpoint removes (see there).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct WindowMode {
    /// The seq of the window's first event: a lower seq is an event of the unknown history.
    pub(crate) first: u64,
    /// A compaction checkpoint removed the unknown prefix: the surface is known whole.
    pub(crate) resolved: bool,
    /// The smallest seq a replace needed that the window did not hold.
    pub(crate) need: Option<u64>,
    /// A checkpoint inside the prefix: its seq (it is the head of the surface now) and the end
    /// of its range (decoding back to it lets that checkpoint remove the prefix).
    pub(crate) head: Option<u64>,
    pub(crate) soft: Option<u64>,
    /// The window cannot give the full fold's answer (a replace of a decoded node that is gone,
    /// the surface over [`MAX_SURFACE`] with the prefix unknown).
    pub(crate) broken: bool,
    /// The last `compaction/summary`: (its seq, `shadowedRange.start`, `shadowedRange.end`).
    pub(crate) summary: Option<(u64, u64, u64)>,
    /// Where the line of the last node the resolving checkpoint removed starts (see
    /// `Fold::read_notes`).
    pub(crate) cut: Option<Loc>,
    /// The seq the resolving checkpoint's range starts at. The fold takes it for the head of the
    /// surface; `store::window` checks that it was (a compaction of a middle span leaves the
    /// nodes before it) before the window is the answer.
    pub(crate) anchor: Option<u64>,
}

#[derive(serde::Deserialize)]
struct SummaryData {
    #[serde(rename = "shadowedRange")]
    shadowed_range: Option<Range>,
}

#[derive(serde::Deserialize)]
struct Range {
    start: u64,
    end: u64,
}

impl WindowMode {
    pub(crate) fn new(first: u64) -> WindowMode {
        WindowMode {
            first,
            ..WindowMode::default()
        }
    }

    /// A `compaction/summary` at `seq`.
    pub(crate) fn summary(&mut self, seq: u64, data: &str) {
        self.summary = serde_json::from_str::<SummaryData>(data)
            .ok()
            .and_then(|d| d.shadowed_range)
            .map(|r| (seq, r.start, r.end));
    }

    /// A replace of `start..=end` by `node` (event `seq`). Some(node): fold it as a full fold
    /// does (the range is decoded, or the prefix is known to be gone); None: taken care of here.
    pub(crate) fn replace(
        &mut self,
        surface: &mut Surface,
        seq: u64,
        start: u64,
        end: u64,
        node: Node,
    ) -> Option<Node> {
        if self.resolved {
            return Some(node);
        }
        let (ks, ke) = (surface.contains(start), surface.contains(end));
        if ks && ke {
            return Some(node);
        }
        let head = self.head;
        let before = |x: u64| x < self.first || Some(x) == head;
        if (!ks && !before(start)) || (!ke && !before(end)) {
            // A decoded node that is no longer on the surface: the full fold notes this replace.
            self.broken = true;
            return None;
        }
        let checkpoint = self.summary == Some((seq.wrapping_sub(1), start, end));
        match (ks, ke) {
            (false, true) if checkpoint => {
                // The host's compaction checkpoint: from the head of the surface through `end`
                // (that `start` was the head is `store::window`'s to check: `anchor`).
                let at = surface.get(end).map(|n| n.loc);
                match surface.replace_head_through(end, node) {
                    Ok(()) => {
                        self.resolved = true;
                        self.cut = at;
                        self.anchor = Some(start);
                    }
                    Err(_) => self.broken = true,
                }
            }
            // Wholly inside the unknown prefix: its node stays there, before every decoded node,
            // where a later checkpoint removes it. A checkpoint's node is the new head.
            (false, false) => {
                if checkpoint {
                    self.head = Some(seq);
                    self.soft = Some(end);
                }
            }
            // Reaches from a decoded node into the prefix, or a replace from the prefix that is
            // no checkpoint: decode back to the seq it starts from.
            _ => {
                let unknown = if ks { end } else { start };
                self.need = Some(self.need.map_or(unknown, |n| n.min(unknown)));
            }
        }
        None
    }

    pub(crate) fn overflow(&mut self) {
        if !self.resolved {
            self.broken = true;
        }
    }
}

/// One surface node as plain data (see [`FoldState`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct NodeState {
    seq: u64,
    role: u8,
    class: u8,
    replaced: bool,
    is_error: bool,
    label: String,
    request: Option<String>,
    frame: u64,
    inner: u64,
}

const ROLES: [Role; 5] = [
    Role::User,
    Role::Assistant,
    Role::Tool,
    Role::System,
    Role::Developer,
];
const CLASSES: [Class; 4] = [
    Class::Conversation,
    Class::Injected,
    Class::System,
    Class::Empty,
];

/// A committed [`Fold`] as plain data, every field a fold resumed from it needs: what the read
/// checkpoint (`store::checkpoint`) persists. Only a fold at a line boundary has one.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct FoldState {
    header: Option<Header>,
    header_error: Option<String>,
    title: Option<String>,
    fallback_title: Option<String>,
    nodes: Vec<NodeState>,
    last_seq: Option<u64>,
    events: u64,
    turn: Option<u64>,
    requests: Vec<(String, RequestTrace)>,
    inbox_next_turn: Vec<Option<String>>,
    inbox_next_step: Vec<Option<String>>,
    inherited_cut: Option<u64>,
    #[serde(default)]
    resumed_at: Option<u64>,
    notes: Notes,
    lines: u64,
    gap_noted: bool,
    offset: u64,
    surface_capped: bool,
    /// A window fold (`store::window`) whose unknown prefix a compaction checkpoint removed: the
    /// seq of its first decoded event. Only `sessions_read` resumes such a state (its requests
    /// and inbox lists are those of the decoded frames only); None: a full fold.
    #[serde(default)]
    window: Option<u64>,
    /// `Fold::stopped`: a full fold that stopped at the decode budget (a read takes the window
    /// beside it, `index::read_beside`). Absent in bodies before version 4 (a full fold of those is
    /// not resumed: whether it stopped is not known).
    #[serde(default)]
    stopped: bool,
    /// `Fold::read` (see `ReadNotes`).
    #[serde(default)]
    read_items: Vec<((u64, u64), String)>,
    #[serde(default)]
    read_older: usize,
    #[serde(default)]
    read_older_last: Option<(u64, u64)>,
    #[serde(default)]
    read_after: Option<(u64, u64)>,
}

impl FoldState {
    /// Where a fold resumed from this state starts reading.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The state of a window fold (`store::window`), not of a full fold.
    pub(crate) fn is_window(&self) -> bool {
        self.window.is_some()
    }
}

impl Fold {
    /// This fold as plain data; None while a line is unfinished (a line that runs into the next
    /// frame: the splitter's bytes are not persisted), or for a window fold whose prefix is still
    /// unknown (a resolved one is persisted, marked as a window: `FoldState::window`).
    pub(crate) fn state(&self) -> Option<FoldState> {
        if self.splitter.has_partial() || self.window.as_ref().is_some_and(|w| !w.resolved) {
            return None;
        }
        let idx = |r: Role| ROLES.iter().position(|x| *x == r).unwrap_or(0) as u8;
        let cls = |c: Class| CLASSES.iter().position(|x| *x == c).unwrap_or(0) as u8;
        let mut requests: Vec<(String, RequestTrace)> = self
            .requests
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        requests.sort_by(|a, b| a.0.cmp(&b.0));
        Some(FoldState {
            header: self.header.clone(),
            header_error: self.header_error.clone(),
            title: self.title.clone(),
            fallback_title: self.fallback_title.clone(),
            nodes: self
                .surface
                .iter()
                .map(|n| NodeState {
                    seq: n.seq,
                    role: idx(n.role),
                    class: cls(n.class),
                    replaced: n.replaced,
                    is_error: n.is_error,
                    label: n.label.to_string(),
                    request: n.request.as_deref().map(str::to_string),
                    frame: n.loc.frame,
                    inner: n.loc.inner,
                })
                .collect(),
            last_seq: self.last_seq,
            events: self.events,
            turn: self.turn,
            requests,
            inbox_next_turn: self.inbox_next_turn.clone(),
            inbox_next_step: self.inbox_next_step.clone(),
            inherited_cut: self.inherited_cut,
            resumed_at: self.resumed_at,
            notes: self.notes.clone(),
            lines: self.lines,
            gap_noted: self.gap_noted,
            offset: self.offset,
            surface_capped: self.surface_capped,
            window: self.window.as_ref().map(|w| w.first),
            stopped: self.stopped,
            read_items: self.read.items.iter().cloned().collect(),
            read_older: self.read.older,
            read_older_last: self.read.older_last,
            read_after: self.read.after,
        })
    }

    /// The fold a [`FoldState`] describes. None when the state is not one a fold can be in (an
    /// unknown role or class, more nodes than [`MAX_SURFACE`], a window fold that stopped: one
    /// that meets the budget is folded whole instead).
    pub(crate) fn from_state(s: FoldState) -> Option<Fold> {
        if s.nodes.len() > MAX_SURFACE
            || s.notes.items.len() > Notes::MAX
            || s.read_items.len() > Notes::MAX
            || (s.stopped && s.window.is_some())
        {
            return None;
        }
        let mut f = Fold {
            header: s.header,
            header_error: s.header_error,
            title: s.title,
            fallback_title: s.fallback_title,
            last_seq: s.last_seq,
            events: s.events,
            turn: s.turn,
            requests: s.requests.into_iter().collect(),
            inbox_next_turn: s.inbox_next_turn,
            inbox_next_step: s.inbox_next_step,
            inherited_cut: s.inherited_cut,
            resumed_at: s.resumed_at,
            notes: s.notes,
            lines: s.lines,
            gap_noted: s.gap_noted,
            offset: s.offset,
            surface_capped: s.surface_capped,
            stopped: s.stopped,
            read: ReadNotes {
                items: s.read_items.into(),
                older: s.read_older,
                older_last: s.read_older_last,
                after: s.read_after,
            },
            // resolved: a window fold from here on folds as a full fold does (see `WindowMode`)
            window: s.window.map(|first| WindowMode {
                first,
                resolved: true,
                ..WindowMode::default()
            }),
            ..Fold::default()
        };
        for n in s.nodes {
            let role = *ROLES.get(n.role as usize)?;
            let class = *CLASSES.get(n.class as usize)?;
            let label = f.intern(n.label);
            f.surface.push(Node {
                seq: n.seq,
                role,
                class,
                replaced: n.replaced,
                is_error: n.is_error,
                label,
                request: n.request.map(Arc::from),
                loc: Loc {
                    frame: n.frame,
                    inner: n.inner,
                },
            });
        }
        Some(f)
    }
}

impl Fold {
    /// A fold whose header is known already (live events, which carry no header line).
    pub fn with_header(h: Header) -> Fold {
        Fold {
            header: Some(h),
            ..Fold::default()
        }
    }

    /// A fold that starts at a frame in the middle of a log (`store::window`): the header, title
    /// and first-prompt fallback are the log's (its brief); the surface before is unknown.
    pub(crate) fn window_start(
        h: Header,
        title: Option<String>,
        fallback_title: Option<String>,
        first: u64,
    ) -> Fold {
        Fold {
            header: Some(h),
            title,
            fallback_title,
            window: Some(WindowMode::new(first)),
            ..Fold::default()
        }
    }

    /// Read from the end (`store::window`): the surface, title and last seq are the full fold's,
    /// the requests and the notes about lines before the window are not known.
    pub fn is_window(&self) -> bool {
        self.window.is_some()
    }

    /// The title a listing shows: the last `session/title`, else the host's fallback.
    pub fn display_title(&self) -> Option<&str> {
        self.title.as_deref().or(self.fallback_title.as_deref())
    }

    /// A note about the line being folded.
    pub fn note(&mut self, s: String) {
        let at = self.at;
        self.note_at(at, s);
    }

    /// A note about what starts at `at` (a frame, a torn tail: `log`).
    pub fn note_at(&mut self, at: Loc, s: String) {
        self.read.push(key(at), s.clone());
        self.notes.push(s);
    }

    /// A compaction removed the head of the surface through the node whose line starts at `end`:
    /// the lines up to that one are no longer a read's business (unless a node still on the
    /// surface comes from one of them: [`Fold::read_notes`]).
    fn cut_at(&mut self, end: Loc) {
        let after = (end.frame, end.inner.saturating_add(1));
        if self.read.after.is_none_or(|a| a < after) {
            self.read.after = Some(after);
        }
    }

    /// The notes a `sessions_read` reports: those about the lines its surface is made of — every
    /// line after the last one a compaction took off the head of the surface, and every line from
    /// the earliest node still on it (a replacing node sits where its range was) —, the newest
    /// [`Notes::MAX`] of them, with a count of the older ones (when the oldest notes kept fall
    /// before that line and after it, all of them are counted). A note about older history, which
    /// no message of the read comes from, is the full fold's (`list_sessions`, `verify`). The same
    /// for a window fold (`store::window`): it decodes every line such a note can be about and
    /// declines when one of them has one.
    pub fn read_notes(&self) -> Notes {
        let from = self.read.after.map(|a| {
            let first = self.surface.iter().map(|n| key(n.loc)).min();
            first.map_or(a, |f| f.min(a))
        });
        let keep = |l: (u64, u64)| from.is_none_or(|f| l >= f);
        Notes {
            items: self
                .read
                .items
                .iter()
                .filter(|(l, _)| keep(*l))
                .map(|(_, s)| s.clone())
                .collect(),
            more: if self.read.older_last.is_some_and(keep) {
                self.read.older
            } else {
                0
            },
        }
    }

    /// Feed decompressed bytes whose first byte sits at `base`.
    pub fn feed(&mut self, chunk: &[u8], base: Loc) {
        let mut sp = std::mem::take(&mut self.splitter);
        sp.feed(chunk, base, &mut |p| self.piece(p));
        self.splitter = sp;
    }

    fn piece(&mut self, p: Piece<'_>) {
        self.lines += 1;
        self.at = match &p {
            Piece::Oversized { loc, .. } | Piece::Line { loc, .. } => *loc,
        };
        match p {
            Piece::Oversized { len, .. } => {
                if oversized_header(&self.header, &mut self.header_error, len) {
                    return;
                }
                let what = format!(
                    "line {}: skipped a {} line (over the 16 MiB cap)",
                    self.lines,
                    human_bytes(len)
                );
                self.note(what);
            }
            Piece::Line { bytes, loc } => self.line(bytes, loc),
        }
    }

    fn line(&mut self, bytes: &[u8], loc: Loc) {
        if header_line(&mut self.header, &mut self.header_error, bytes) {
            return;
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let env: Envelope<'_> = match serde_json::from_slice(bytes) {
            Ok(e) => e,
            Err(e) => {
                let why = if std::str::from_utf8(bytes).is_err() {
                    "invalid UTF-8".to_string()
                } else {
                    format!("invalid JSON ({e})")
                };
                self.note(format!("line {}: {why}; skipped", self.lines));
                return;
            }
        };
        let data = env.data.map(RawValue::get).unwrap_or("null");
        if is_chunk_row(&env.ty) {
            if let (Some(seq0), Ok(d)) = (env.seq0, serde_json::from_str::<ChunkRowData>(data)) {
                if d.members() > 0 {
                    self.saw_seq(seq0);
                    let end = seq0 + d.members() as u64 - 1;
                    self.last_seq = Some(self.last_seq.map_or(end, |l| l.max(end)));
                }
            }
            return;
        }
        let Some(seq) = env.seq else {
            self.note(format!(
                "line {}: event {:?} has no seq; skipped",
                self.lines,
                truncate_for_note(&env.ty)
            ));
            return;
        };
        self.saw_seq(seq);
        self.events += 1;
        let ty: &str = &env.ty;
        match ty {
            "turn/start" => {
                if let Ok(t) = serde_json::from_str::<TurnData>(data) {
                    self.turn = t.turn;
                }
            }
            // Title: last `session/title` wins [R8 `packages/session/session-title/src/index.ts` `foldSessionTitle`].
            "session/title" => match serde_json::from_str::<TitleData>(data) {
                Ok(t) => self.title = Some(t.title),
                Err(_) => self.note(format!("seq {seq}: unreadable session/title; ignored")),
            },
            "agent/inbox/spliced" => self.splice(seq, data),
            // Log-only for a full fold; a window fold remembers its range (`store::window`).
            "compaction/summary" => {
                if let Some(w) = self.window.as_mut() {
                    w.summary(seq, data);
                }
            }
            "session/end-seed" => {
                if let Ok(d) = serde_json::from_str::<EndSeedData>(data) {
                    if d.inherited != Some(true) {
                        self.resumed_at = Some(seq);
                    }
                    if d.inherited == Some(true) {
                        // Everything before the last tagged marker is the parent's prefix.
                        self.inherited_cut = Some(seq);
                        self.requests.clear();
                        self.inbox_next_turn.clear();
                        self.inbox_next_step.clear();
                    }
                }
            }
            _ => {
                if let Some(role) = Role::of_event(ty) {
                    self.surface_event(role, seq, env.surface_op.as_ref(), data, loc);
                }
                // Every other type (known or not) is log-only for us: skipped, never fatal.
            }
        }
    }

    fn saw_seq(&mut self, seq: u64) {
        if let Some(last) = self.last_seq {
            if seq != last + 1 && !self.gap_noted {
                self.gap_noted = true;
                self.note(format!("seq {seq} follows seq {last} (not contiguous)"));
            }
            if seq <= last {
                return;
            }
        }
        self.last_seq = Some(seq);
    }

    fn inherited(&self, seq: u64) -> bool {
        // V0: `seedLength` events are the parent's prefix [R8 `packages/core/session/src/types.ts` `seedLength`;
        // R8 `packages/core/agent/src/inbox.ts` replays splices after `seedLength`]. V4: the last tagged end-seed.
        let v0 = self
            .header
            .as_ref()
            .and_then(|h| h.seed_length)
            .is_some_and(|n| seq < n);
        v0 || self.inherited_cut.is_some_and(|c| seq < c)
    }

    fn splice(&mut self, seq: u64, data: &str) {
        if self.inherited(seq) {
            return;
        }
        let d: SpliceData<'_> = match serde_json::from_str(data) {
            Ok(d) => d,
            Err(_) => {
                self.note(format!(
                    "seq {seq}: unreadable agent/inbox/spliced; ignored"
                ));
                return;
            }
        };
        let target = d.target.to_string();
        let inserted: Vec<Option<String>> = d
            .inserted
            .iter()
            .map(|m| m.source.rpc_id.as_deref().map(str::to_string))
            .collect();
        let list = match target.as_str() {
            "next-turn" => &mut self.inbox_next_turn,
            "next-step" => &mut self.inbox_next_step,
            _ => return,
        };
        let start = (d.start as usize).min(list.len());
        let end = start
            .saturating_add(d.removed_count as usize)
            .min(list.len());
        let list_len = list.len();
        let removed: Vec<Option<String>> =
            list.splice(start..end, inserted.iter().cloned()).collect();
        let canceled = d.outcome.as_deref() == Some("canceled");
        let whole = start == 0 && end == list_len;
        for id in removed.into_iter().flatten() {
            if let Some(r) = self.requests.get_mut(&id) {
                if canceled {
                    if r.landed.is_none() {
                        r.canceled = true;
                    }
                    r.cancel = Some(Cancel {
                        seq,
                        whole,
                        list_len,
                    });
                } else {
                    r.claimed = Some(seq);
                }
            }
        }
        for id in inserted.into_iter().flatten() {
            let r = self.requests.entry(id).or_default();
            r.queued = Some((seq, target.clone()));
            r.canceled = false;
            r.cancel = None;
            r.claimed = None;
            r.insertions = r.insertions.saturating_add(1);
        }
    }

    fn intern(&mut self, s: String) -> Arc<str> {
        if let Some(a) = self.labels.iter().find(|a| ***a == *s) {
            return a.clone();
        }
        let a: Arc<str> = s.into();
        if self.labels.len() >= 32 {
            self.labels.remove(0);
        }
        self.labels.push(a.clone());
        a
    }

    fn surface_event(
        &mut self,
        role: Role,
        seq: u64,
        op: Option<&serde_json::Value>,
        data: &str,
        loc: Loc,
    ) {
        let Some(op) = op.and_then(SurfaceOp::parse) else {
            self.note(format!(
                "seq {seq}: {} without a valid surfaceOp; ignored",
                role.name()
            ));
            return;
        };
        let parsed = match role {
            Role::User => serde_json::from_str::<MessageLite<'_>>(data),
            _ => serde_json::from_str::<Wrapped<'_>>(data).map(|w| w.message),
        };
        let (class, label, request, is_error) = match &parsed {
            Ok(m) => {
                let (class, label) = classify(role, m);
                let rpc = m.source.rpc_id.as_deref();
                let request = rpc
                    .filter(|r| r.starts_with(REQUEST_PREFIX))
                    .map(Arc::<str>::from);
                if role == Role::User {
                    if let Some(r) = rpc {
                        if !self.inherited(seq) {
                            let turn = self.turn;
                            let t = self.requests.entry(r.to_string()).or_default();
                            t.landed = Some((seq, turn));
                            t.landings = t.landings.saturating_add(1);
                        }
                    }
                    if self.fallback_title.is_none() {
                        self.fallback_title = prompt_fallback_title(m);
                    }
                }
                let is_error = m.is_error == Some(true)
                    || m.content.iter().any(|b| {
                        b.ty.as_deref() == Some("tool-result") && b.is_error == Some(true)
                    });
                (class, label, request, is_error)
            }
            Err(_) => {
                self.note(format!("seq {seq}: unreadable {} message", role.name()));
                (Class::Conversation, "unknown".to_string(), None, false)
            }
        };
        let label = self.intern(label);
        let mut node = Node {
            seq,
            role,
            class,
            replaced: false,
            is_error,
            label,
            request,
            loc,
        };
        match op {
            SurfaceOp::Append => self.surface.push(node),
            SurfaceOp::Replace { start, end } => {
                // Positions are found in the CURRENT surface, not as a numeric range
                // [R8 `packages/core/session/src/surface.ts` `replacementRange`].
                node.replaced = true;
                let node = match self.window.as_mut() {
                    Some(w) => {
                        let node = w.replace(&mut self.surface, seq, start, end, node);
                        if let Some(cut) = w.cut.take() {
                            self.cut_at(cut);
                        }
                        match node {
                            Some(node) => node,
                            None => return,
                        }
                    }
                    None => node,
                };
                // From the head (a compaction): what it removes is no longer a read's business.
                // (A window fold knows the head once its prefix is gone.)
                let known = self.window.as_ref().is_none_or(|w| w.resolved);
                let cut = match self.surface.head() {
                    Some(h) if known && h.seq == start => self.surface.get(end).map(|n| n.loc),
                    _ => None,
                };
                if let Err(node) = self.surface.replace(start, end, node) {
                    self.note(format!("seq {seq}: replaces {start}..{end}, which is not on the surface; appended instead"));
                    self.surface.push(node);
                } else if let Some(cut) = cut {
                    self.cut_at(cut);
                }
            }
        }
        if self.surface.len() > MAX_SURFACE {
            if let Some(w) = self.window.as_mut() {
                w.overflow();
            }
            // Keep the newest: a read shows the newest messages first.
            self.surface.drop_oldest();
            if !self.surface_capped {
                self.surface_capped = true;
                self.note(format!(
                    "more than {MAX_SURFACE} messages on the surface: the oldest are not kept"
                ));
            }
        }
    }
}

fn truncate_for_note(s: &str) -> String {
    s.chars().take(40).collect()
}

pub use base::text::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    fn fold_lines(lines: &[String]) -> Fold {
        let mut f = Fold::default();
        let mut text = lines.join("\n");
        text.push('\n');
        f.feed(text.as_bytes(), Loc::default());
        f
    }

    const H0: &str = r#"{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}"#;

    #[test]
    fn the_fold_and_the_brief_scan_take_the_header_line_alike() {
        use crate::brief;
        use crate::log::{Encoding, Scratch};
        let both = |text: &[u8]| {
            let mut f = Fold::default();
            f.feed(text, Loc::default());
            let (b, _) = brief::scan(
                &mut std::io::Cursor::new(text),
                Encoding::Plain,
                text.len() as u64,
                None,
                &mut Scratch::new(),
            )
            .unwrap();
            assert_eq!(f.header, b.header, "the same header");
            assert_eq!(f.header_error, b.header_error, "the same header error");
            f
        };
        // a header over the line cap: no usable header, and nothing after it counts
        let big = format!("{}\n{}\n", "x".repeat(crate::frames::LINE_CAP + 1), H0);
        no_header_because(&both(big.as_bytes()), "exceeds the line cap");
        // an unreadable header: the same
        let f = both(format!("not json\n{H0}\n").as_bytes());
        assert!(f.header.is_none() && f.header_error.is_some());
        // a header, then an over-long line: the header stands, the line is skipped with a note
        let later = format!("{H0}\n{}\n", "y".repeat(crate::frames::LINE_CAP + 1));
        let f = both(later.as_bytes());
        assert_eq!(f.header.as_ref().map(|h| h.id.as_str()), Some("s"));
        assert!(f.header_error.is_none());
        assert!(
            f.notes.summary().contains("over the 16 MiB cap"),
            "{}",
            f.notes.summary()
        );
    }

    /// The fold has no usable header, and says why: the reason contains `why`.
    fn no_header_because(f: &Fold, why: &str) {
        assert!(f.header.is_none());
        let error = f.header_error.as_deref().unwrap();
        assert!(error.contains(why), "{error}");
    }

    fn um(seq: u64, text: &str, source: &str, op: &str) -> String {
        format!(
            r#"{{"type":"user/message","seq":{seq},"time":1,"data":{{"id":"m{seq}","role":"user","content":[{{"type":"text","text":{}}}],"source":{source}}},"surfaceOp":{op}}}"#,
            serde_json::to_string(text).unwrap()
        )
    }

    #[test]
    fn title_is_the_last_session_title_else_the_first_human_prompt() {
        let f = fold_lines(&[
            H0.into(),
            um(
                0,
                "Current runtime context. x y z",
                r#"{"kind":"plugin","plugin":"p"}"#,
                r#""append""#,
            ),
            um(1, "   ", r#"{"kind":"user"}"#, r#""append""#),
            um(
                2,
                "Fix the parser crash on empty input please",
                r#"{"kind":"user"}"#,
                r#""append""#,
            ),
            um(3, "second prompt", r#"{"kind":"user"}"#, r#""append""#),
        ]);
        assert_eq!(f.title, None);
        assert_eq!(f.display_title(), Some("Fix the parser crash on"));
        let f = fold_lines(&[
            H0.into(),
            um(0, "hello there", r#"{"kind":"user"}"#, r#""append""#),
            r#"{"type":"session/title","seq":1,"time":1,"data":{"title":"First","messageSeqs":[0],"source":{"kind":"fallback"}}}"#.into(),
            r#"{"type":"session/title","seq":2,"time":1,"data":{"title":"Second","messageSeqs":[0],"source":{"kind":"user"}}}"#.into(),
        ]);
        assert_eq!(f.display_title(), Some("Second"));
    }

    #[test]
    fn surface_replace_uses_positions_in_the_current_surface() {
        let f = fold_lines(&[
            H0.into(),
            um(0, "a", r#"{"kind":"user"}"#, r#""append""#),
            um(1, "b", r#"{"kind":"user"}"#, r#""append""#),
            um(2, "c", r#"{"kind":"user"}"#, r#""append""#),
            um(3, "d", r#"{"kind":"user"}"#, r#""append""#),
            // rc.8 shape
            um(
                4,
                "summary",
                r#"{"kind":"plugin","plugin":"compact","compactionId":"c1"}"#,
                r#"{"op":"replace","start":0,"end":1}"#,
            ),
            // V4 shape, range spans the previous checkpoint
            um(
                5,
                "summary2",
                r#"{"kind":"compact-checkpoint"}"#,
                r#"{"op":"replace","startSeq":4,"endSeq":2}"#,
            ),
        ]);
        let seqs: Vec<u64> = f.surface.iter().map(|n| n.seq).collect();
        assert_eq!(seqs, vec![5, 3]);
        assert!(f.surface[0].replaced && !f.surface[1].replaced);
        assert_eq!(f.surface[0].class, Class::Conversation);
        assert_eq!(&*f.surface[0].label, "compact-checkpoint");
        assert!(f.notes.is_empty(), "{:?}", f.notes);
    }

    #[test]
    fn a_replace_outside_the_surface_is_noted_and_appended() {
        let f = fold_lines(&[
            H0.into(),
            um(0, "a", r#"{"kind":"user"}"#, r#""append""#),
            um(
                1,
                "x",
                r#"{"kind":"user"}"#,
                r#"{"op":"replace","start":7,"end":9}"#,
            ),
        ]);
        assert_eq!(f.surface.len(), 2);
        assert!(f.notes.summary().contains("not on the surface"));
    }

    #[test]
    fn classification_of_user_messages() {
        let cases = [
            (r#"{"kind":"user"}"#, "hi", Class::Conversation, "user"),
            (
                r#"{"kind":"user"}"#,
                "<system-reminder>be nice",
                Class::Injected,
                "user",
            ),
            (
                r#"{"kind":"user"}"#,
                "[MNEMON] memory",
                Class::Injected,
                "user",
            ),
            (
                r#"{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt","form":"snapshot"}"#,
                "x",
                Class::Injected,
                "plugin:@deepseek-ai/dsh-system-prompt/snapshot",
            ),
            (
                r#"{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"s"}"#,
                "x",
                Class::System,
                "plugin:plan-mode/notice",
            ),
            (
                r#"{"kind":"plugin","plugin":"compact","compactionId":"c"}"#,
                "x",
                Class::Conversation,
                "plugin:compact",
            ),
            (
                r#"{"kind":"runtime-context","form":"snapshot"}"#,
                "x",
                Class::Injected,
                "runtime-context",
            ),
            (
                r#"{"kind":"agent-instructions"}"#,
                "x",
                Class::Injected,
                "agent-instructions",
            ),
            (
                r#"{"kind":"agent-message","form":"relay","senderSessionId":"p"}"#,
                "x",
                Class::Conversation,
                "agent-message",
            ),
            (
                r#"{"kind":"repeat-tool-reminder"}"#,
                "x",
                Class::System,
                "repeat-tool-reminder",
            ),
        ];
        for (src, text, class, label) in cases {
            let f = fold_lines(&[H0.into(), um(0, text, src, r#""append""#)]);
            assert_eq!(
                (f.surface[0].class, &*f.surface[0].label),
                (class, label),
                "{src} {text}"
            );
        }
    }

    #[test]
    fn assistant_tool_system_developer_projection() {
        let f = fold_lines(&[
            H0.into(),
            r#"{"type":"system/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"id":"s","role":"system","source":{"kind":"system-prompt"},"content":[]}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"developer/message","seq":1,"time":1,"data":{"turn":1,"step":1,"message":{"id":"d","role":"developer","source":{"kind":"tools"},"content":[{"type":"text","text":"t"}]}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"assistant/message","seq":3,"time":1,"data":{"turn":1,"step":1,"message":{"id":"b","role":"assistant","content":[{"type":"text","text":"ok"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"tool/result","seq":4,"time":1,"data":{"turn":1,"step":1,"message":{"id":"t","role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"r"}],"isError":true}]}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"tool/result","seq":5,"time":1,"data":{"turn":1,"step":1,"message":{"id":"u","role":"tool","source":{"kind":"tool","callId":"c2"},"toolCallId":"c2","content":[{"type":"text","text":"r"}]}},"surfaceOp":"append"}"#.into(),
            r#"{"type":"tool/call","seq":6,"time":1,"data":{"turn":1,"step":1,"callId":"c2","name":"n","arguments":"{}"}}"#.into(),
            r#"{"type":"brand/new-thing","seq":7,"time":1,"data":{"x":1},"ignorable":true}"#.into(),
        ]);
        let got: Vec<(u64, Class, String, bool)> = f
            .surface
            .iter()
            .map(|n| (n.seq, n.class, n.label.to_string(), n.is_error))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, Class::Empty, "system-prompt".into(), false),
                (1, Class::System, "tools".into(), false),
                (2, Class::Empty, "model:p/m".into(), false),
                (3, Class::Conversation, "model:p/m".into(), false),
                (4, Class::Conversation, "tool:c1".into(), true),
                (5, Class::Conversation, "tool:c2".into(), false),
            ]
        );
        assert_eq!(f.last_seq, Some(7));
        assert!(f.notes.is_empty(), "{:?}", f.notes);
    }

    #[test]
    fn requests_queue_land_and_cancel() {
        let ins = |seq: u64, target: &str, rpc: &str| {
            format!(
                r#"{{"type":"agent/inbox/spliced","seq":{seq},"time":1,"data":{{"target":"{target}","start":0,"inserted":[{{"id":"i","role":"user","content":[],"source":{{"kind":"user","rpcId":"{rpc}"}}}}]}}}}"#
            )
        };
        let f = fold_lines(&[
            H0.into(),
            ins(0, "next-turn", "dsh-session-mail:a"),
            ins(1, "next-turn", "dsh-session-mail:b"),
            ins(2, "next-step", "dsh-session-mail:c"),
            r#"{"type":"turn/start","seq":3,"time":1,"data":{"turn":7}}"#.into(),
            // claim next-step (c), then one next-turn item (the first: b was inserted at 0, so b)
            r#"{"type":"agent/inbox/spliced","seq":4,"time":1,"data":{"target":"next-step","start":0,"removedCount":1,"inserted":[]}}"#.into(),
            r#"{"type":"agent/inbox/spliced","seq":5,"time":1,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}"#.into(),
            um(6, "c", r#"{"kind":"user","rpcId":"dsh-session-mail:c"}"#, r#""append""#),
            um(7, "b", r#"{"kind":"user","rpcId":"dsh-session-mail:b"}"#, r#""append""#),
            // cancel the remaining next-turn item (a)
            r#"{"type":"agent/inbox/spliced","seq":8,"time":1,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[],"outcome":"canceled"}}"#.into(),
        ]);
        let r = |k: &str| f.requests.get(k).cloned().unwrap();
        assert_eq!(r("dsh-session-mail:b").landed, Some((7, Some(7))));
        assert_eq!(
            r("dsh-session-mail:c").queued,
            Some((2, "next-step".into()))
        );
        assert_eq!(r("dsh-session-mail:c").landed, Some((6, Some(7))));
        let a = r("dsh-session-mail:a");
        assert!(a.canceled && a.landed.is_none());
        assert_eq!(
            &*f.surface[0].request.clone().unwrap(),
            "dsh-session-mail:c"
        );
    }

    #[test]
    fn inherited_requests_of_a_fork_are_not_the_childs() {
        // a fork's log: its header, a request it inherited (seq 0), the line that ends what it inherited
        // (seq 1), then a request of its own (seq 2)
        let fork = |header: &str, end_of_inherited: &str| {
            fold_lines(&[
                header.into(),
                um(
                    0,
                    "x",
                    r#"{"kind":"user","rpcId":"dsh-session-mail:old"}"#,
                    r#""append""#,
                ),
                end_of_inherited.into(),
                um(
                    2,
                    "y",
                    r#"{"kind":"user","rpcId":"dsh-session-mail:new"}"#,
                    r#""append""#,
                ),
            ])
        };
        let v0 = r#"{"type":"session","version":0,"id":"f","createdAt":1,"parentSession":"p","seedLength":2,"delegationDepth":0}"#;
        let f = fork(
            v0,
            r#"{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"forked"}}}"#,
        );
        assert!(!f.requests.contains_key("dsh-session-mail:old"));
        assert!(f.requests.contains_key("dsh-session-mail:new"));
        let v4 = r#"{"type":"session","version":4,"id":"f","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}"#;
        let f = fork(
            v4,
            r#"{"type":"session/end-seed","seq":1,"time":1,"data":{"inherited":true}}"#,
        );
        assert!(!f.requests.contains_key("dsh-session-mail:old"));
        assert!(f.requests.contains_key("dsh-session-mail:new"));
        assert_eq!(f.inherited_cut, Some(1));
        // The inherited messages are still on the child's surface (its model sees them).
        assert_eq!(f.surface.len(), 2);
    }

    #[test]
    fn bad_lines_are_noted_and_skipped() {
        let mut f = Fold::default();
        let mut text = Vec::new();
        text.extend_from_slice(H0.as_bytes());
        text.extend_from_slice(b"\n{oops\n");
        text.extend_from_slice(b"{\"type\":\"user/message\",\"seq\":0,\"data\":{\"content\":[{\"type\":\"text\",\"text\":\"\xff\"}]}}\n");
        text.extend_from_slice(b"{\"type\":\"x\"}\n");
        text.extend_from_slice(um(0, "fine", r#"{"kind":"user"}"#, r#""append""#).as_bytes());
        text.push(b'\n');
        f.feed(&text, Loc::default());
        let s = f.notes.summary();
        assert!(s.contains("line 2: invalid JSON"), "{s}");
        assert!(s.contains("line 3: invalid UTF-8"), "{s}");
        assert!(s.contains("has no seq"), "{s}");
        assert_eq!(f.surface.len(), 1);
        assert_eq!(f.display_title(), Some("fine"));
    }

    #[test]
    fn a_broken_header_stops_the_fold_with_a_reason() {
        let f = fold_lines(&[
            "{\"type\":\"session\"".into(),
            um(0, "x", r#"{"kind":"user"}"#, r#""append""#),
        ]);
        no_header_because(&f, "not valid JSON");
        assert!(f.surface.is_empty());
    }

    #[test]
    fn packed_chunk_rows_advance_the_seq() {
        let f = fold_lines(&[
            H0.into(),
            r#"{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0,1],"texts":["a","b","c"]}}"#.into(),
            r#"{"type":"assistant/chunk","seq":3,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"finish"}}}"#.into(),
        ]);
        assert_eq!(f.last_seq, Some(3));
        assert!(f.notes.is_empty(), "{:?}", f.notes);
    }
}
