//! What a log says became of one request id: the one request-state model ("request fate") of the
//! store, the ledger's `verify` and the CLI's `verify`.

use crate::fold::RequestTrace;

/// What the store says about one request id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Fate {
    /// Landed as a `user/message` at this seq (turn if known).
    Landed { seq: u64, turn: Option<u64> },
    /// Inserted into the inbox (`next-turn` or `next-step`) at this seq, not landed yet.
    Queued { seq: u64, target: String },
    /// Inserted, then removed with `outcome: canceled` before landing.
    Canceled { seq: u64, target: String },
    #[default]
    Unknown,
}

/// The fate a request's trace in one log says.
pub fn fate_of(t: &RequestTrace) -> Fate {
    if let Some((seq, turn)) = t.landed {
        return Fate::Landed { seq, turn };
    }
    match (&t.queued, t.canceled) {
        (Some((seq, target)), true) => Fate::Canceled {
            seq: *seq,
            target: target.clone(),
        },
        (Some((seq, target)), false) => Fate::Queued {
            seq: *seq,
            target: target.clone(),
        },
        (None, _) => Fate::Unknown,
    }
}

/// How settled a fate is (landed > queued > canceled > unknown): the best of several logs wins.
pub fn rank(f: &Fate) -> u8 {
    match f {
        Fate::Landed { .. } => 3,
        Fate::Queued { .. } => 2,
        Fate::Canceled { .. } => 1,
        Fate::Unknown => 0,
    }
}
