//! What the drain asks of an envelope before it delivers it, and what it keeps of one it refuses
//! (issue 16 #2).
//!
//! The drain ([`super::drain_with`]) hands each claimed envelope to an [`Admit`] and delivers only the
//! text it answers with: the check itself is mail policy's (`crate::mail::admit::Checks`: sender, message,
//! the sender's ledger line, loop guard, budget), handed down to this layer, which names no policy. A
//! refused envelope is moved aside to `<uuid>.refused` (why, and the envelope) with a rejected receipt, so
//! a waiting sender hears it and `verify` says it.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{write_atomic, Envelope, Receipt, ReceiptState};

/// Most bytes of an envelope's text kept in its refused record.
pub const MAX_REFUSED_TEXT: usize = 64 * 1024;

/// The check the drain asks of each envelope (already checked to belong to its shard, addressed to the
/// drainer or orphaned, not in the target's log), `age_ms` after its file was written.
pub trait Admit {
    /// Why an envelope is refused.
    type Why: Reason;
    fn check(&self, home: &Path, env: &Envelope, age_ms: u64) -> Verdict<Self::Why>;
    /// Take a claimed envelope the check answered [`Verdict::Divert`] for out of the mailbox into the
    /// checker's own keeping (the human's held mail); `Err`: it is refused with that reason instead.
    fn divert(&self, _home: &Path, _env: &Envelope) -> Result<(), Self::Why> {
        Ok(())
    }
}

/// A refusal as the drain records it: its short code (the receipt's `mailbox/<code>`, the record's
/// `code`) and its words (`Display`: the record's `why`, the receipt's message).
pub trait Reason: std::fmt::Display {
    fn code(&self) -> &'static str;
}

/// What the drain does with one envelope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict<W> {
    /// Deliver this text (rebuilt from the verified sender and message).
    Deliver(String),
    /// Not yet: its sender's ledger line may still be on its way.
    Wait,
    /// Never: moved aside with the reason.
    Refuse(W),
    /// Not delivered from here: claimed, handed to [`Admit::divert`], then gone from the mailbox with no
    /// receipt (the human's policy holds it now: the held store answers for it).
    Divert,
}

/// A refused envelope as kept in its shard (`<uuid>.refused`), for `verify` and the human.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefusedRecord {
    pub request_id: String,
    pub session_id: String,
    pub sender: Option<String>,
    pub mode: String,
    pub code: String,
    pub why: String,
    pub at: i64,
    /// The envelope's text (cut at [`MAX_REFUSED_TEXT`] bytes).
    pub text: String,
    pub truncated: bool,
}

/// Move a claimed envelope aside: its refused record, then a rejected receipt (a waiting sender hears
/// it), then the claim goes.
pub fn refuse(
    home: &Path,
    shard: &Path,
    key: &str,
    env: &Envelope,
    why: &impl Reason,
    pid: u32,
    now_ms: i64,
) {
    let mut cut = env.text.len().min(MAX_REFUSED_TEXT);
    while !env.text.is_char_boundary(cut) {
        cut -= 1;
    }
    let rec = RefusedRecord {
        request_id: env.request_id.clone(),
        session_id: env.session_id.clone(),
        sender: env.sender.as_ref().map(|s| s.chars().take(512).collect()),
        mode: env.mode.clone(),
        code: why.code().to_string(),
        why: why.to_string(),
        at: now_ms,
        text: env.text[..cut].to_string(),
        truncated: cut < env.text.len(),
    };
    if let Ok(bytes) = serde_json::to_vec(&rec) {
        let _ = write_atomic(shard, &shard.join(format!("{key}.refused")), &bytes);
    }
    let receipt = Receipt {
        request_id: env.request_id.clone(),
        session_id: env.session_id.clone(),
        state: ReceiptState::Rejected,
        code: Some(format!("mailbox/{}", why.code())),
        message: Some(format!("the receiving process refused the envelope: {why}")),
        route: None,
        pid,
    };
    if super::settle(home, pid, &receipt).is_err() {
        let _ = fs::remove_file(shard.join(format!("{key}.claimed-{pid}")));
    }
}

/// The refused record of `request_id` in `session`'s shard, if the drain refused it.
pub fn refused(home: &Path, session: &str, request_id: &str) -> Option<RefusedRecord> {
    let key = super::key_of(request_id)?;
    let d = super::shard(home, session)?;
    base::fsafe::check_private_dir(&d).ok()?;
    let (bytes, _) = base::fsafe::read_capped(
        &d.join(format!("{key}.refused")),
        base::fsafe::Follow::No,
        (MAX_REFUSED_TEXT as u64) * 2 + 8192,
    )
    .ok()?;
    let r: RefusedRecord = serde_json::from_slice(&bytes).ok()?;
    (r.request_id == request_id && r.session_id == session).then_some(r)
}

/// The session whose drain refused `request_id` (`session` when given, else every shard looked at, at
/// most [`super::MAX_NAMES`] × 8 of them) and its record: `verify` of an id the ledger never saw.
pub fn find_refused(home: &Path, request_id: &str, session: Option<&str>) -> Option<RefusedRecord> {
    if let Some(s) = session {
        return refused(home, s, request_id);
    }
    base::fsafe::check_private_dir(&super::root(home)).ok()?;
    fs::read_dir(super::root(home))
        .ok()?
        .flatten()
        .take(super::MAX_NAMES * 8)
        .filter_map(|e| e.file_name().into_string().ok())
        .find_map(|s| refused(home, &s, request_id))
}
