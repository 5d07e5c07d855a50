//! The `note:` line of a send receipt that asked for an idle notice (`mail::notice`).

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
}
