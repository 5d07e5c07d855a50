//! Idle notices (`notify_when_idle` on the send tools): whether one may be set. The shim
//! (lib/notice.js) holds the watches and sees the host; it passes what it knows ([`NoticeFacts`]) and
//! this decides ([`NoticeDecision`]), with the same rule the loop guard uses for "what opened this
//! turn" ([`chain::trigger`]) — so the two can never disagree about a turn a notice opened.
//! The text of each decision is `render::notice`.

use serde::Deserialize;

use crate::mail::chain::{self, Trigger, TurnMessage};

/// What the shim knows when a send asks for a notice.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
pub struct NoticeFacts {
    /// The caller has a session to notify.
    pub has_watcher: bool,
    /// The caller's current turn (newest last), as for the loop guard; None when unseen.
    pub turn: Option<Vec<TurnMessage>>,
    /// The target is live in this process (its turn end can be seen).
    pub target_live: bool,
    /// A notice for this (caller, target) pair is already pending.
    pub already_pending: bool,
    /// Notices pending in this process (after expired ones were dropped).
    pub pending: u32,
    /// Most notices pending in this process.
    pub max_watches: u32,
    /// How long a set notice waits for the turn end, in milliseconds (for its note).
    pub ttl_ms: u64,
}

/// Why no notice is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeRefusal {
    /// The call has no caller session.
    NoCaller,
    /// The caller's turn was opened by an idle notice: no notice loops.
    OpenedByNotice,
    /// The target is not live in this process.
    NotLiveHere,
    /// `max` notices are already pending in this process.
    TooMany { max: u32 },
}

/// The answer to a notice request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoticeDecision {
    /// Set a new watch.
    Set,
    /// One is pending for the pair already; it still applies.
    AlreadyPending,
    /// None is set.
    Refused(NoticeRefusal),
}

/// What a notice request decided, as the shim keys on it (the binding's `ToolOutcome.notice`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum IdleNoticeDecision {
    Set,
    AlreadyPending,
    NoCaller,
    OpenedByNotice,
    NotLiveHere,
    TooMany,
}

impl NoticeDecision {
    /// The decision without its data.
    pub fn kind(&self) -> IdleNoticeDecision {
        match self {
            NoticeDecision::Set => IdleNoticeDecision::Set,
            NoticeDecision::AlreadyPending => IdleNoticeDecision::AlreadyPending,
            NoticeDecision::Refused(NoticeRefusal::NoCaller) => IdleNoticeDecision::NoCaller,
            NoticeDecision::Refused(NoticeRefusal::OpenedByNotice) => {
                IdleNoticeDecision::OpenedByNotice
            }
            NoticeDecision::Refused(NoticeRefusal::NotLiveHere) => IdleNoticeDecision::NotLiveHere,
            NoticeDecision::Refused(NoticeRefusal::TooMany { .. }) => IdleNoticeDecision::TooMany,
        }
    }
}

/// The `source` of the message an idle notice delivers: what [`chain::trigger`] recognizes as ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoticeSource {
    /// `source.plugin`.
    pub plugin: &'static str,
    /// `source.form`.
    pub form: &'static str,
    /// `source.rpcId`: [`chain::NOTICE_PREFIX`] + the request id of the watched send.
    pub rpc_id: String,
    /// `source.summary`.
    pub summary: String,
}

/// The `form` of every plugin notice's message source (idle and overlap notices; sessions_read hides them).
pub const FORM: &str = "notice";

/// The source of the notice for the send `request_id` to `target`.
pub fn source(target: &str, request_id: &str) -> NoticeSource {
    NoticeSource {
        plugin: base::names::DIR_NAME,
        form: FORM,
        rpc_id: format!("{}{request_id}", chain::NOTICE_PREFIX),
        summary: format!("{} is idle", target.chars().take(40).collect::<String>()),
    }
}

/// Was the turn opened (most recently fed) by one of our idle notices? [`chain::trigger`]'s answer.
pub fn opened_by_notice(turn: Option<&[TurnMessage]>) -> bool {
    matches!(chain::trigger(turn), Trigger::Notice(_))
}

/// The decision, checks in this order: a caller, not a notice's turn, a live target, one per pair, the cap.
pub fn decide(f: &NoticeFacts) -> NoticeDecision {
    use NoticeRefusal::*;
    let refused = NoticeDecision::Refused;
    if !f.has_watcher {
        refused(NoCaller)
    } else if opened_by_notice(f.turn.as_deref()) {
        refused(OpenedByNotice)
    } else if !f.target_live {
        refused(NotLiveHere)
    } else if f.already_pending {
        NoticeDecision::AlreadyPending
    } else if f.pending >= f.max_watches {
        refused(TooMany { max: f.max_watches })
    } else {
        NoticeDecision::Set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mail::chain::NOTICE_PREFIX;

    fn notice() -> TurnMessage {
        TurnMessage {
            kind: Some("plugin".into()),
            plugin: Some("dsh-session-mail".into()),
            rpc_id: Some(format!("{NOTICE_PREFIX}dsh-session-mail:r0")),
            ..TurnMessage::default()
        }
    }

    fn user(text: &str) -> TurnMessage {
        TurnMessage {
            kind: Some("user".into()),
            text: Some(text.into()),
            ..TurnMessage::default()
        }
    }

    fn ok() -> NoticeFacts {
        NoticeFacts {
            has_watcher: true,
            turn: Some(vec![user("do it")]),
            target_live: true,
            already_pending: false,
            pending: 0,
            max_watches: 2,
            ttl_ms: 60_000,
        }
    }

    #[test]
    fn each_check_in_order_and_the_loop_guards_rule_for_a_notice_turn() {
        assert_eq!(decide(&ok()), NoticeDecision::Set);
        let no_caller = NoticeFacts {
            has_watcher: false,
            target_live: false,
            ..ok()
        };
        assert_eq!(
            decide(&no_caller),
            NoticeDecision::Refused(NoticeRefusal::NoCaller)
        );
        // harness-injected context after the notice does not hide it (classify's prefixes)
        let turn = vec![notice(), user("  <system-reminder> x"), user("[MNEMON] y")];
        let from_notice = NoticeFacts {
            turn: Some(turn),
            target_live: false,
            ..ok()
        };
        assert_eq!(
            decide(&from_notice),
            NoticeDecision::Refused(NoticeRefusal::OpenedByNotice)
        );
        // a human message after the notice opens the decision again
        let human_after = NoticeFacts {
            turn: Some(vec![notice(), user("go on")]),
            ..ok()
        };
        assert_eq!(decide(&human_after), NoticeDecision::Set);
        // the notice this module sources is the one the loop guard recognizes
        let src = source("peer", "dsh-session-mail:r9");
        let delivered = TurnMessage {
            kind: Some("plugin".into()),
            plugin: Some(src.plugin.into()),
            form: Some(src.form.into()),
            rpc_id: Some(src.rpc_id),
            ..TurnMessage::default()
        };
        assert_eq!(
            chain::trigger(Some(&[delivered])),
            Trigger::Notice("dsh-session-mail:r9".into())
        );
        // another plugin's message with our notice prefix is not ours
        let mut forged = notice();
        forged.plugin = Some("other".into());
        assert!(!opened_by_notice(Some(&[forged])));
        assert!(!opened_by_notice(None));
        let dead = NoticeFacts {
            target_live: false,
            already_pending: true,
            ..ok()
        };
        assert_eq!(
            decide(&dead),
            NoticeDecision::Refused(NoticeRefusal::NotLiveHere)
        );
        let pending = NoticeFacts {
            already_pending: true,
            pending: 2,
            ..ok()
        };
        assert_eq!(decide(&pending), NoticeDecision::AlreadyPending);
        let full = NoticeFacts { pending: 2, ..ok() };
        assert_eq!(
            decide(&full),
            NoticeDecision::Refused(NoticeRefusal::TooMany { max: 2 })
        );
    }
}
