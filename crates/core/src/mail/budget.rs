//! The send budget: a sliding window per (sender, target) pair and per sender, across both send tools and
//! across host restarts. It keeps no state of its own: the sends in the window are counted from the audit
//! ledger (`crate::ledger`), so a restarted host, a second tool or a second process sharing the DSH home
//! all see the same count. This is the answer to triangle storms (OpenClaw #37842: 398 sends in 10 h)
//! without counting hops: any chain of agents has to pass through some pair's budget.
//!
//! Rules (`Config`: `budgetWindowSecs` 600, `budgetPerPair` 6, `budgetPerSender` 20, `urgentReserve` 2):
//! - counted: ledger lines of this sender with outcome `accepted` or `may-have-landed` (it may be in the
//!   target's inbox) whose time lies in the last `budgetWindowSecs`; refusals and sends that reached no
//!   host decision are free. A line dated in the future (the clock went back) counts as sent now.
//! - sends of this process that are still in flight count too (a process-wide registry), so parallel tool
//!   calls of one host cannot overrun a budget; between processes two sends racing the same last slot can
//!   both pass (the ledger is read, not locked, across processes).
//! - a queue send needs `pair < budgetPerPair` and `sender < budgetPerSender`; an urgent/steer send may use
//!   `urgentReserve` more on each, so a correction can still interrupt after an ordinary exchange used the
//!   budget up.
//! - a limit of 0 (or a window of 0) turns that budget off.
//! - a budget that cannot be checked fails closed: when the ledger cannot be read, or a send could not be
//!   recorded in it (so it would not count), the send is refused (`Refusal::Unchecked`), never let
//!   through unlimited.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::config::Config;
use crate::ledger::{self, Entry, Filter};

/// The limits in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub window_secs: u64,
    /// 0: off.
    pub per_pair: u32,
    /// 0: off.
    pub per_sender: u32,
    pub urgent_reserve: u32,
}

impl Limits {
    pub fn from_config(cfg: &Config) -> Limits {
        Limits {
            window_secs: u64::from(cfg.budget_window_secs),
            per_pair: cfg.budget_per_pair,
            per_sender: cfg.budget_per_sender,
            urgent_reserve: cfg.urgent_reserve,
        }
    }
    pub fn window_ms(&self) -> i64 {
        i64::try_from(self.window_secs.saturating_mul(1000)).unwrap_or(i64::MAX)
    }
    /// Is any budget in force?
    pub fn active(&self) -> bool {
        self.window_secs > 0 && (self.per_pair > 0 || self.per_sender > 0)
    }
}

/// Which budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// (sender, target): `budgetPerPair`.
    Pair,
    /// sender, all targets: `budgetPerSender`.
    Sender,
}

/// What is left of one budget after the accepted send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Left {
    /// Sends in the window including this one.
    pub used: u32,
    pub limit: u32,
    pub reserve: u32,
}

impl Left {
    /// Ordinary sends left.
    pub fn left(&self) -> u32 {
        self.limit.saturating_sub(self.used)
    }
    /// Urgent sends left beyond the limit.
    pub fn reserve_left(&self) -> u32 {
        (self.limit + self.reserve).saturating_sub(self.used.max(self.limit))
    }
    /// This send used the urgent reserve.
    pub fn in_reserve(&self) -> bool {
        self.used > self.limit
    }
}

/// An admitted send's view of the budgets (`None` for a budget that is off).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allowance {
    pub window_secs: u64,
    pub pair: Option<Left>,
    pub sender: Option<Left>,
}

/// A refused send: the budget that stops it (the one that frees up last), and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exceeded {
    pub which: Which,
    /// Sends counted in the window for that budget.
    pub sent: u32,
    pub limit: u32,
    pub urgent_reserve: u32,
    /// The refused send was urgent (so the reserve was already included in the limit).
    pub urgent: bool,
    pub window_secs: u64,
    /// When one more send of this kind becomes possible (ms since the epoch).
    pub next_at_ms: i64,
    pub now_ms: i64,
    /// The other budget was exceeded as well.
    pub also: Option<Which>,
    /// A queue send was refused but an urgent one would pass now (urgent sends left in reserve).
    pub urgent_left: u32,
}

impl Exceeded {
    /// Whole seconds until one more send is possible (rounded up, at least 1).
    pub fn wait_secs(&self) -> u64 {
        let ms = (self.next_at_ms - self.now_ms).max(1);
        u64::try_from((ms + 999) / 1000).unwrap_or(u64::MAX)
    }
}

/// Times (ms) of counted sends, oldest first, clamped to `now` (a future line counts as sent now).
fn times_in_window(times: impl Iterator<Item = i64>, now_ms: i64, window_ms: i64) -> Vec<i64> {
    let start = now_ms.saturating_sub(window_ms);
    let mut v: Vec<i64> = times
        .map(|t| t.min(now_ms))
        .filter(|t| *t > start)
        .collect();
    v.sort_unstable();
    v
}

/// One budget: `Ok(Left)` or `Err((sent, effective limit, next_at))`.
fn one(
    times: &[i64],
    limit: u32,
    reserve: u32,
    urgent: bool,
    window_ms: i64,
) -> Result<Left, (u32, u32, i64)> {
    let sent = u32::try_from(times.len()).unwrap_or(u32::MAX);
    let effective = if urgent {
        limit.saturating_add(reserve)
    } else {
        limit
    };
    if sent < effective {
        return Ok(Left {
            used: sent + 1,
            limit,
            reserve,
        });
    }
    // One more send fits when (sent - effective + 1) of the oldest have left the window.
    let idx = (sent - effective) as usize;
    let next = times
        .get(idx)
        .copied()
        .unwrap_or(0)
        .saturating_add(window_ms);
    Err((sent, effective, next))
}

/// The pure decision. `pair_times` / `sender_times`: times (ms) of this sender's counted sends to the
/// target / to anyone (including sends in flight, at `now_ms`).
pub fn decide(
    pair_times: &[i64],
    sender_times: &[i64],
    urgent: bool,
    now_ms: i64,
    limits: &Limits,
) -> Result<Option<Allowance>, Exceeded> {
    if !limits.active() {
        return Ok(None);
    }
    let w = limits.window_ms();
    let pair = times_in_window(pair_times.iter().copied(), now_ms, w);
    let sender = times_in_window(sender_times.iter().copied(), now_ms, w);
    let r = limits.urgent_reserve;
    let p = (limits.per_pair > 0).then(|| one(&pair, limits.per_pair, r, urgent, w));
    let s = (limits.per_sender > 0).then(|| one(&sender, limits.per_sender, r, urgent, w));
    let failed: Vec<(Which, (u32, u32, i64))> = [(Which::Pair, &p), (Which::Sender, &s)]
        .into_iter()
        .filter_map(|(which, res)| match res {
            Some(Err(e)) => Some((which, *e)),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        return Ok(Some(Allowance {
            window_secs: limits.window_secs,
            pair: p.and_then(Result::ok),
            sender: s.and_then(Result::ok),
        }));
    }
    // Report the budget that frees up last (the pair one on a tie): its time is when a send is possible.
    let (which, (sent, _, next)) = *failed
        .iter()
        .max_by_key(|(w, (_, _, next))| (*next, *w == Which::Pair))
        .unwrap_or(&failed[0]);
    let also = failed.iter().map(|(w, _)| *w).find(|w| *w != which);
    let urgent_left = if urgent || r == 0 {
        0
    } else {
        let left = |times: &[i64], limit: u32| {
            if limit == 0 {
                u32::MAX
            } else {
                (limit + r).saturating_sub(u32::try_from(times.len()).unwrap_or(u32::MAX))
            }
        };
        left(&pair, limits.per_pair)
            .min(left(&sender, limits.per_sender))
            .min(r)
    };
    Err(Exceeded {
        which,
        sent,
        limit: match which {
            Which::Pair => limits.per_pair,
            Which::Sender => limits.per_sender,
        },
        urgent_reserve: r,
        urgent,
        window_secs: limits.window_secs,
        next_at_ms: next,
        now_ms,
        also,
        urgent_left,
    })
}

/// A send of this process that passed the budget and has not been written to the ledger yet.
#[derive(Debug, Clone)]
struct Slot {
    id: u64,
    home: PathBuf,
    sender: String,
    target: String,
}

static IN_FLIGHT: Mutex<Vec<Slot>> = Mutex::new(Vec::new());
static NEXT_SLOT: AtomicU64 = AtomicU64::new(1);

/// Holds a budget slot until dropped: drop it only after the send's ledger line was written.
#[derive(Debug)]
pub struct Reservation {
    id: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut v = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|s| s.id != self.id);
    }
}

/// An admitted send.
#[derive(Debug)]
pub struct Admitted {
    pub allowance: Option<Allowance>,
    pub reservation: Option<Reservation>,
}

/// Why a send does not pass the budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// A budget is used up.
    Exceeded(Exceeded),
    /// The budget cannot be checked or enforced: the ledger cannot be read, or cannot take this
    /// send's line (the error names the file and the problem).
    Unchecked(Unchecked),
}

/// Why a budget could not be checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    /// The ledger could not be read.
    Unreadable(ledger::LedgerError),
    /// The ledger cannot take this send's line.
    CannotRecord(ledger::LedgerError),
}

impl std::fmt::Display for Unchecked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unchecked::Unreadable(e) => write!(f, "the audit ledger could not be read ({e})"),
            Unchecked::CannotRecord(e) => write!(f, "the audit ledger cannot record sends ({e})"),
        }
    }
}

/// The lines that count against a budget: sends that went out (or may have), except a mailbox hand-off
/// whose request id has a later refused line (`tools::send::record`): its owner's host refused it
/// (`refused:rejected`), or the post failed after the hand-off's `accepted` line (`refused:held-elsewhere`).
pub fn counted(entries: &[Entry]) -> Vec<&Entry> {
    let refused: std::collections::HashSet<&str> = entries
        .iter()
        .filter(|e| cancels(e))
        .filter_map(|e| e.request_id.as_deref())
        .collect();
    entries
        .iter()
        .filter(|e| e.counts_as_sent())
        .filter(|e| e.request_id.as_deref().is_none_or(|r| !refused.contains(r)))
        .collect()
}

/// A line that takes its request id's earlier `accepted` hand-off out of the count ([`counted`]).
fn cancels(e: &Entry) -> bool {
    use crate::code::RefusalCode;
    matches!(
        e.outcome,
        ledger::LedgerOutcome::Refused(RefusalCode::Rejected | RefusalCode::HeldElsewhere)
    )
}

/// Check the budgets for one send from the ledger under `home` and reserve a slot for it.
pub fn check(
    home: &Path,
    sender: &str,
    target: &str,
    urgent: bool,
    now_ms: i64,
    cfg: &Config,
) -> Result<Admitted, Refusal> {
    let limits = Limits::from_config(cfg);
    if !limits.active() {
        return Ok(Admitted {
            allowance: None,
            reservation: None,
        });
    }
    // The registry lock is held across the ledger read, so two sends of this process never both see the
    // last free slot. The reservation is dropped after the ledger line is written, so a concurrent check
    // sees the send in one place or the other (briefly both: counting one too many, never one too few).
    let mut flight = IN_FLIGHT.lock().unwrap_or_else(|p| p.into_inner());
    let filter = Filter {
        sender: Some(sender.to_string()),
        since_ms: Some(now_ms.saturating_sub(limits.window_ms())),
        ..Filter::default()
    };
    // [`counted`] in one pass over the sender's lines, copying out only what the rule needs (a line's
    // request id, whether it went to `target`, its time — parsed once per process, with the line), not
    // the lines.
    let mut sent: Vec<(Option<String>, bool, Option<i64>)> = Vec::new();
    let mut cancelled: std::collections::HashSet<String> = std::collections::HashSet::new();
    let scanned = ledger::scan_timed(home, &filter, |e, time_ms| {
        if cancels(e) {
            cancelled.extend(e.request_id.clone());
        } else if e.counts_as_sent() {
            let pair = e.target.as_deref() == Some(target);
            sent.push((e.request_id.clone(), pair, time_ms));
        }
    });
    if let Err(why) = scanned {
        return Err(Refusal::Unchecked(Unchecked::Unreadable(why)));
    }
    // A send that cannot be written to the ledger would not count: the budget would not hold.
    if let Err(why) = ledger::check_writable(home) {
        return Err(Refusal::Unchecked(Unchecked::CannotRecord(why)));
    }
    let counted: Vec<(bool, Option<i64>)> = sent
        .into_iter()
        .filter(|(rid, ..)| rid.as_ref().is_none_or(|r| !cancelled.contains(r)))
        .map(|(_, pair, t)| (pair, t))
        .collect();
    let mine: Vec<&Slot> = flight
        .iter()
        .filter(|s| s.home == home && s.sender == sender)
        .collect();
    let pair_times: Vec<i64> = counted
        .iter()
        .filter(|(pair, _)| *pair)
        .filter_map(|(_, t)| *t)
        .chain(mine.iter().filter(|s| s.target == target).map(|_| now_ms))
        .collect();
    let sender_times: Vec<i64> = counted
        .iter()
        .filter_map(|(_, t)| *t)
        .chain(mine.iter().map(|_| now_ms))
        .collect();
    let allowance =
        decide(&pair_times, &sender_times, urgent, now_ms, &limits).map_err(Refusal::Exceeded)?;
    let id = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
    flight.push(Slot {
        id,
        home: home.to_path_buf(),
        sender: sender.to_string(),
        target: target.to_string(),
    });
    Ok(Admitted {
        allowance,
        reservation: Some(Reservation { id }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;
    const NOW: i64 = 1_761_741_296_789;

    fn limits() -> Limits {
        Limits {
            window_secs: 600,
            per_pair: 6,
            per_sender: 20,
            urgent_reserve: 2,
        }
    }

    fn cfg() -> Config {
        Config::default()
    }

    fn entry(at: i64, sender: &str, target: &str, outcome: &str) -> Entry {
        Entry::new(
            at,
            Some(sender),
            Some(target),
            "send_session_message",
            Some("queue"),
            Some("dsh-session-mail:x"),
            outcome.into(),
            Some("hi"),
        )
    }

    #[test]
    fn defaults_let_a_conversation_through_and_stop_a_storm() {
        assert_eq!(Limits::from_config(&cfg()), limits());
        let mut times = Vec::new();
        for i in 0..6 {
            let now = NOW + i * MIN;
            let a = decide(&times, &times, false, now, &limits())
                .unwrap()
                .unwrap();
            assert_eq!(a.pair.unwrap().left(), 5 - i as u32);
            times.push(now);
        }
        let e = decide(&times, &times, false, NOW + 6 * MIN, &limits()).unwrap_err();
        assert_eq!(e.which, Which::Pair);
        assert_eq!(e.sent, 6);
        assert_eq!(e.limit, 6);
        // the oldest (at NOW) leaves the window at NOW + 10 min
        assert_eq!(e.next_at_ms, NOW + 10 * MIN);
        assert_eq!(e.wait_secs(), 240);
        assert_eq!(e.urgent_left, 2);
    }

    #[test]
    fn window_slides() {
        let times: Vec<i64> = (0..6).map(|i| NOW + i * MIN).collect();
        // exactly at the boundary the oldest is out (the window is (now-W, now])
        assert!(decide(&times, &times, false, NOW + 10 * MIN, &limits()).is_ok());
        assert!(decide(&times, &times, false, NOW + 10 * MIN - 1, &limits()).is_err());
        // all gone
        let a = decide(&times, &times, false, NOW + 16 * MIN, &limits())
            .unwrap()
            .unwrap();
        assert_eq!(
            a.pair.unwrap(),
            Left {
                used: 1,
                limit: 6,
                reserve: 2
            }
        );
    }

    #[test]
    fn urgent_reserve_lets_a_correction_through_then_stops() {
        let mut times: Vec<i64> = (0..6).map(|i| NOW + i * 1000).collect();
        let now = NOW + 10_000;
        assert!(decide(&times, &times, false, now, &limits()).is_err());
        let a = decide(&times, &times, true, now, &limits())
            .unwrap()
            .unwrap();
        let p = a.pair.unwrap();
        assert!(p.in_reserve());
        assert_eq!((p.left(), p.reserve_left()), (0, 1));
        times.push(now);
        let a = decide(&times, &times, true, now, &limits())
            .unwrap()
            .unwrap();
        assert_eq!(a.pair.unwrap().reserve_left(), 0);
        times.push(now);
        let e = decide(&times, &times, true, now, &limits()).unwrap_err();
        assert!(e.urgent);
        assert_eq!(e.sent, 8);
        assert_eq!(e.urgent_left, 0);
        // 8 sent, 8 allowed for urgent: the first one must leave the window
        assert_eq!(e.next_at_ms, NOW + 10 * MIN);
        // and a queue send now waits for three to leave
        let e = decide(&times, &times, false, now, &limits()).unwrap_err();
        assert_eq!(e.next_at_ms, NOW + 2000 + 10 * MIN);
        assert_eq!(e.urgent_left, 0);
    }

    #[test]
    fn sender_total_across_targets() {
        let sender: Vec<i64> = (0..20).map(|i| NOW + i * 1000).collect();
        let pair: Vec<i64> = vec![NOW];
        let e = decide(&pair, &sender, false, NOW + 30_000, &limits()).unwrap_err();
        assert_eq!(e.which, Which::Sender);
        assert_eq!(e.also, None);
        assert_eq!(e.sent, 20);
        assert_eq!(e.next_at_ms, NOW + 10 * MIN);
        // both exceeded: the later reset wins, the other is named
        let pair: Vec<i64> = (14..20).map(|i| NOW + i * 1000).collect();
        let e = decide(&pair, &sender, false, NOW + 30_000, &limits()).unwrap_err();
        assert_eq!(e.which, Which::Pair);
        assert_eq!(e.also, Some(Which::Sender));
        assert_eq!(e.next_at_ms, NOW + 14_000 + 10 * MIN);
    }

    #[test]
    fn zero_turns_a_budget_off() {
        let many: Vec<i64> = (0..100).map(|i| NOW + i).collect();
        let l = Limits {
            per_pair: 0,
            ..limits()
        };
        let e = decide(&many, &many, false, NOW + 200, &l).unwrap_err();
        assert_eq!(e.which, Which::Sender);
        let l = Limits {
            per_pair: 0,
            per_sender: 0,
            ..limits()
        };
        assert_eq!(decide(&many, &many, false, NOW + 200, &l), Ok(None));
        let l = Limits {
            window_secs: 0,
            ..limits()
        };
        assert_eq!(decide(&many, &many, false, NOW + 200, &l), Ok(None));
    }

    #[test]
    fn future_lines_count_as_now() {
        let times = vec![NOW + 24 * 60 * MIN; 6];
        let e = decide(&times, &times, false, NOW, &limits()).unwrap_err();
        assert_eq!(
            e.next_at_ms,
            NOW + 10 * MIN,
            "a clock that went back does not block for a day"
        );
    }

    #[test]
    fn counts_from_the_ledger_across_restarts_and_both_tools() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for i in 0..5 {
            let mut e = entry(NOW + i * 1000, "session-a", "session-b", "accepted");
            if i % 2 == 0 {
                e.tool = "sessions_send".into();
            }
            ledger::append(h, &e).unwrap();
        }
        // not counted: refusals, unreachable, other senders, other targets (pair), old sends
        ledger::append(h, &entry(NOW, "session-a", "session-b", "refused:budget")).unwrap();
        ledger::append(h, &entry(NOW, "session-a", "session-b", "unreachable")).unwrap();
        ledger::append(h, &entry(NOW, "session-x", "session-b", "accepted")).unwrap();
        ledger::append(h, &entry(NOW, "session-a", "session-c", "accepted")).unwrap();
        ledger::append(
            h,
            &entry(NOW - 11 * MIN, "session-a", "session-b", "accepted"),
        )
        .unwrap();
        // counted: may-have-landed
        ledger::append(
            h,
            &entry(NOW + 5000, "session-a", "session-b", "may-have-landed"),
        )
        .unwrap();

        // "a restart": nothing in memory, only the file
        let now = NOW + 6000;
        let Refusal::Exceeded(e) =
            check(h, "session-a", "session-b", false, now, &cfg()).unwrap_err()
        else {
            panic!("expected Exceeded")
        };
        assert_eq!((e.which, e.sent), (Which::Pair, 6));
        let ok = check(h, "session-a", "session-c", false, now, &cfg()).unwrap();
        let a = ok.allowance.unwrap();
        assert_eq!(a.pair.unwrap().used, 2);
        assert_eq!(a.sender.unwrap().used, 8);
    }

    #[test]
    fn in_flight_sends_count_until_released() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let c = Config {
            budget_per_pair: 2,
            urgent_reserve: 0,
            ..cfg()
        };
        let a = check(h, "session-a", "session-b", false, NOW, &c).unwrap();
        let b = check(h, "session-a", "session-b", false, NOW, &c).unwrap();
        assert!(check(h, "session-a", "session-b", false, NOW, &c).is_err());
        // another home is another ledger
        let other = tempfile::tempdir().unwrap();
        assert!(check(other.path(), "session-a", "session-b", false, NOW, &c).is_ok());
        drop(a); // released without a ledger line (e.g. the send was unreachable)
        assert!(check(h, "session-a", "session-b", false, NOW, &c).is_ok());
        drop(b);
    }

    fn unchecked(home: &std::path::Path) -> String {
        match check(home, "session-a", "session-b", false, NOW, &cfg()) {
            Err(Refusal::Unchecked(why)) => why.to_string(),
            other => panic!("expected Unchecked, got {other:?}"),
        }
    }

    #[test]
    fn an_unreadable_ledger_fails_closed() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ledger::path(home.path())).unwrap(); // a directory where the file should be
        let why = unchecked(home.path());
        assert!(
            why.starts_with("the audit ledger could not be read ("),
            "{why}"
        );
        assert!(why.contains("a directory"), "{why}");
        // Budgets off: nothing to check, the send is not held up.
        let off = Config {
            budget_window_secs: 0,
            ..cfg()
        };
        assert!(check(home.path(), "session-a", "session-b", false, NOW, &off).is_ok());
    }

    #[cfg(unix)]
    #[test]
    fn a_ledger_that_cannot_take_a_line_fails_closed() {
        use std::os::unix::fs::PermissionsExt;
        if base::fsafe::my_uid() == Some(0) {
            return; // root writes through any mode
        }
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        ledger::append(h, &entry(NOW - MIN, "session-a", "session-b", "accepted")).unwrap();
        std::fs::set_permissions(ledger::path(h), std::fs::Permissions::from_mode(0o400)).unwrap();
        let why = unchecked(h);
        assert!(
            why.starts_with("the audit ledger cannot record sends ("),
            "{why}"
        );
        // A read-only folder without a ledger file: no line could be created.
        let home2 = tempfile::tempdir().unwrap();
        let d = ledger::dir(home2.path());
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o500)).unwrap();
        let why = unchecked(home2.path());
        assert!(why.contains("not writable"), "{why}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_ledger_fifo_or_huge_line_never_hangs_or_balloons() {
        let home = tempfile::tempdir().unwrap();
        let d = ledger::dir(home.path());
        std::fs::create_dir_all(&d).unwrap();
        let c = std::ffi::CString::new(ledger::path(home.path()).to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let why = unchecked(home.path());
        assert!(why.contains("FIFO"), "{why}");
        // One line longer than the line cap (under the file cap): skipped as unreadable, not buffered.
        std::fs::remove_file(ledger::path(home.path())).unwrap();
        let mut big = vec![b'x'; 3 * ledger::LINE_CAP];
        big.push(b'\n');
        std::fs::write(ledger::path(home.path()), &big).unwrap();
        let r = ledger::read_ledger(home.path(), &Default::default()).unwrap();
        assert_eq!((r.entries.len(), r.unreadable), (0, 1));
        assert!(check(home.path(), "session-a", "session-b", false, NOW, &cfg()).is_ok());
    }
}
