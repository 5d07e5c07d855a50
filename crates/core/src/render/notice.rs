//! The notices' words: the `note:` line of a send receipt that asked for an idle notice (`mail::notice`),
//! the idle notice itself, and the opt-in overlap notice (lib/overlap.js passes the facts).

use crate::mail::notice::{NoticeDecision, NoticeRefusal};

/// The note for `d`; `ttl_ms` is how long a set notice waits (shown in whole minutes).
pub fn note(d: NoticeDecision, ttl_ms: u64) -> String {
    match d {
        NoticeDecision::Set => {
            let mins = (ttl_ms as f64 / 60_000.0).round() as u64;
            format!("idle notice set: one message arrives here when that session's running turn ends (expires in {mins} min if it never does).")
        }
        NoticeDecision::AlreadyPending => {
            "idle notice already pending for that session (one per pair); it still applies.".into()
        }
        NoticeDecision::Refused(r) => format!("no idle notice: {}", refusal(r)),
    }
}

/// The text of the notice delivered into the caller when `target`'s turn ended: what it asked for, and
/// the read that shows what happened (`since_seq`: the seq before the watched send landed).
pub fn message(target: &str, request_id: &str, since_seq: Option<u64>) -> String {
    // the id as a JSON string, so the suggested call is valid whatever the id holds
    let id = serde_json::to_string(target).unwrap_or_default();
    let since = since_seq.map_or(String::new(), |s| format!(", \"since_seq\": {s}"));
    format!(
        "Idle notice (dsh-session-mail): session {target} finished its turn and is idle; you asked to be told (request {request_id}).\n\
         See what it did: sessions_read {{\"session_id\": {id}{since}}}. This notice is not a message from that session and asks nothing of you."
    )
}

/// The message an idle notice delivers into its caller (lib/notice.js): its text and `source` (the
/// binding's `IdleNoticeMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct IdleNoticeMessage {
    pub text: String,
    pub plugin: String,
    pub form: String,
    pub rpc_id: String,
    pub summary: String,
}

/// The notice for the send `request_id` to `target`: [`message`], with the source the loop guard
/// recognizes (`mail::notice::source`).
pub fn idle_message(target: &str, request_id: &str, since_seq: Option<u64>) -> IdleNoticeMessage {
    let src = crate::mail::notice::source(target, request_id);
    IdleNoticeMessage {
        text: message(target, request_id, since_seq),
        plugin: src.plugin.into(),
        form: src.form.into(),
        rpc_id: src.rpc_id,
        summary: src.summary,
    }
}

/// The receipt `receipt` (a send tool's text) with the idle-notice note for `d` in it, before its
/// `request:` line like every other note (`render::send::with_note`).
pub fn receipt_with_note(receipt: String, d: NoticeDecision, ttl_ms: u64) -> String {
    crate::render::send::with_note(receipt, &note(d, ttl_ms))
}

/// Paths named in an overlap notice; the rest are counted.
const OVERLAP_NAMED: usize = 4;

/// The `summary` of an overlap notice's message source.
pub const OVERLAP_SUMMARY: &str = "file overlap with a peer";

/// One path a live peer of the caller's repository also changed, not told yet (lib/overlap.js; the
/// binding's `OverlapFact`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct OverlapFact {
    pub path: String,
    /// The peer's session id.
    pub peer: String,
}

/// The overlap notice's message: its text and `source` fields (the binding's `OverlapNoticeMessage`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "napi", napi_derive::napi(object))]
pub struct OverlapNoticeMessage {
    pub text: String,
    pub plugin: String,
    pub form: String,
    pub summary: String,
}

/// The overlap notice (Config `overlapNotice`): `fresh` is each path and peer not told yet, in the
/// order found; the first four are named, the rest counted. None when there is nothing to tell.
pub fn overlap(fresh: &[OverlapFact]) -> Option<String> {
    if fresh.is_empty() {
        return None;
    }
    let named: Vec<String> = fresh
        .iter()
        .take(OVERLAP_NAMED)
        .map(|f| format!("{} (also changed by {})", f.path, f.peer))
        .collect();
    let more = match fresh.len().saturating_sub(OVERLAP_NAMED) {
        0 => String::new(),
        n => format!("; and {n} more"),
    };
    Some(format!(
        "Overlap notice (dsh-session-mail): another live session of this repository changed the same file recently: {}{more}. Coordinate (sessions_read / sessions_send) before editing it further.",
        named.join("; ")
    ))
}

/// [`overlap`] as the message the shim injects: its text and the source of every plugin notice.
pub fn overlap_message(fresh: &[OverlapFact]) -> Option<OverlapNoticeMessage> {
    overlap(fresh).map(|text| OverlapNoticeMessage {
        text,
        plugin: base::names::DIR_NAME.into(),
        form: crate::mail::notice::FORM.into(),
        summary: OVERLAP_SUMMARY.into(),
    })
}

fn refusal(r: NoticeRefusal) -> String {
    match r {
        NoticeRefusal::NoCaller => "this call has no caller session to notify.".into(),
        NoticeRefusal::OpenedByNotice => {
            "this turn was opened by an idle notice, and a notice cannot ask for another one.".into()
        }
        NoticeRefusal::NotLiveHere => "that session is not live in this process, so its turn end cannot be seen from here; read it later with sessions_read.".into(),
        NoticeRefusal::TooMany { max } => {
            format!("{max} notices are already pending in this process.")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_says_no_idle_notice_and_the_set_note_names_its_expiry() {
        use NoticeRefusal::*;
        for r in [NoCaller, OpenedByNotice, NotLiveHere, TooMany { max: 64 }] {
            assert!(note(NoticeDecision::Refused(r), 0).starts_with("no idle notice: "));
        }
        assert!(note(NoticeDecision::Refused(TooMany { max: 64 }), 0).contains("64 notices"));
        assert!(note(NoticeDecision::Set, 30 * 60_000).contains("(expires in 30 min "));
        assert!(note(NoticeDecision::Set, 90_000).contains("(expires in 2 min "));
        assert!(note(NoticeDecision::AlreadyPending, 0).starts_with("idle notice already pending"));
        let m = message("session-b", "dsh-session-mail:r1", Some(39));
        assert_eq!(m.lines().count(), 2);
        assert!(m.contains("(request dsh-session-mail:r1)"));
        assert!(m.contains(r#"sessions_read {"session_id": "session-b", "since_seq": 39}."#));
        assert!(message("a\"b", "r", None).contains(r#"sessions_read {"session_id": "a\"b"}."#));
    }

    #[test]
    fn the_idle_note_goes_before_the_request_line_of_the_receipt() {
        let r = receipt_with_note(
            "accepted for b | mode=queue\nrequest: dsh-session-mail:r1".into(),
            NoticeDecision::AlreadyPending,
            0,
        );
        assert_eq!(
            r,
            "accepted for b | mode=queue\nnote: idle notice already pending for that session (one per pair); it still applies.\nrequest: dsh-session-mail:r1"
        );
        // no request line: the note goes last
        assert_eq!(
            receipt_with_note(
                "x".into(),
                NoticeDecision::Refused(NoticeRefusal::NoCaller),
                0
            ),
            "x\nnote: no idle notice: this call has no caller session to notify."
        );
    }

    #[test]
    fn overlap_names_four_paths_and_counts_the_rest() {
        assert_eq!(overlap(&[]), None);
        let fact = |path: &str, peer: &str| OverlapFact {
            path: path.into(),
            peer: peer.into(),
        };
        let one = [fact("src/a.rs", "peer")];
        assert_eq!(
            overlap(&one).unwrap(),
            "Overlap notice (dsh-session-mail): another live session of this repository changed the same file recently: src/a.rs (also changed by peer). Coordinate (sessions_read / sessions_send) before editing it further."
        );
        let six: Vec<OverlapFact> = (0..6).map(|i| fact(&format!("f{i}"), "p")).collect();
        let t = overlap(&six).unwrap();
        assert!(t.contains(": f0 (also changed by p); f1 (also changed by p); f2 (also changed by p); f3 (also changed by p); and 2 more. Coordinate"), "{t}");
        assert!(!t.contains("f4"));
        // the message the shim injects: that text, sourced as every plugin notice
        assert_eq!(overlap_message(&[]), None);
        let m = overlap_message(&one).unwrap();
        assert_eq!(m.text, overlap(&one).unwrap());
        assert_eq!(
            (m.plugin.as_str(), m.form.as_str(), m.summary.as_str()),
            ("dsh-session-mail", "notice", "file overlap with a peer")
        );
        let n = idle_message("session-b", "dsh-session-mail:r1", Some(39));
        assert_eq!(
            n.text,
            message("session-b", "dsh-session-mail:r1", Some(39))
        );
        assert_eq!(
            (
                n.plugin.as_str(),
                n.form.as_str(),
                n.rpc_id.as_str(),
                n.summary.as_str()
            ),
            (
                "dsh-session-mail",
                "notice",
                "dsh-session-mail:notice:dsh-session-mail:r1",
                "session-b is idle"
            )
        );
    }
}
