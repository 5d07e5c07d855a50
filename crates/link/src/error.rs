//! The link crate's one error type: why an operation (an invite, a link, an unlink, a rename, a call, the
//! endpoint itself) did not do what was asked, as data. It crosses the holder's socket and the binding as
//! it is (`{kind, ...}` in JSON), so the command line and the web half key on its kind and print its
//! `Display`, never a sentence parsed back. The words are here, once.

use serde::{Deserialize, Serialize};

/// Why a call to a linked machine did not get its answer. Never a false success: only [`Node::call`]'s
/// `Ok` is an answer from the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "kebab-case")]
pub enum CallError {
    /// This home has no such link (or the human unlinked it).
    NotLinked,
    /// The machine refused the connection: it does not (or no longer) have this home linked. The local link
    /// was removed.
    UnlinkedByPeer,
    /// It could not be reached in time.
    Unreachable(String),
    /// It was reached but did not answer within the deadline.
    Timeout,
    /// The request is over the frame bound.
    TooLarge(usize),
    /// It answered something that is not the protocol.
    Protocol(String),
    /// It refused the request (its handler's error, as data).
    Remote(WireError),
    /// No process of this home can hold the endpoint now (the holder is unreachable).
    NoHolder(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotLinked => f.write_str("that machine is not linked with this one"),
            CallError::UnlinkedByPeer => {
                f.write_str("that machine has unlinked this one (the link is removed here too)")
            }
            CallError::Unreachable(e) => write!(f, "that machine cannot be reached: {e}"),
            CallError::Timeout => f.write_str("that machine did not answer in time"),
            CallError::TooLarge(n) => write!(
                f,
                "the request is {n} bytes, over the bound of {}",
                crate::MAX_FRAME
            ),
            CallError::Protocol(e) => write!(f, "that machine answered outside the protocol: {e}"),
            CallError::Remote(e) => write!(f, "that machine refused: {} ({})", e.message, e.code),
            CallError::NoHolder(e) => write!(
                f,
                "no process of this home holds the machine's endpoint: {e}"
            ),
        }
    }
}

/// A refusal from the far side, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    pub code: String,
    pub message: String,
}

/// Why an operation of this crate did not do what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum LinkError {
    /// This home has no machine identity yet (nothing was ever linked or invited).
    NoIdentity,
    /// The machine key or its folder could not be read or made.
    Identity { detail: String },
    /// `links.json` could not be locked or written.
    Store { detail: String },
    /// The machine lease could not be taken or written.
    Lease { detail: String },
    /// The endpoint could not be bound.
    Bind { detail: String },
    /// The holder's socket could not be served.
    Socket { detail: String },
    /// Not an invite of ours, or a damaged one (`what` names the part).
    BadInvite { what: String },
    /// The invite's time is up.
    InviteExpired,
    /// The invite is this machine's own.
    OwnInvite,
    /// The inviting machine has no such invite waiting: used already, expired there, or never made.
    InviteUnknown,
    /// The inviting machine had no invite waiting at all (it closed the link handshake).
    NoInviteWaiting,
    /// So many invites are waiting already.
    TooManyInvites { max: usize },
    /// This machine has so many links already.
    TooManyLinks { max: usize },
    /// Not a machine name (`[a-z0-9][a-z0-9-]{0,31}`).
    BadName { name: String },
    /// Another linked machine has this name.
    NameTaken { name: String },
    /// No linked machine has this name.
    NoSuchLink { name: String },
    /// Neither `none`, `public` nor an http(s) URL of an iroh-relay.
    BadRelay { relay: String, detail: String },
    /// Iroh's public relays were chosen, and this process forbids the public network (`var` is `1`: tests,
    /// benchmarks, the demo). Nothing was bound, dialed or looked up.
    PublicNetworkRefused { var: String },
    /// The other machine refused the link handshake, in words of its own (an older peer).
    PeerRefused { message: String },
    /// Reaching the other machine, or this home's lease holder, failed.
    Call { error: CallError },
    /// The lease holder answered outside its protocol.
    Holder { detail: String },
}

impl LinkError {
    /// A refusal of what was asked (bad input, a rule, the other side's no), as against a failure to carry
    /// it out (the machine, the holder or a file did not answer): the command line's exit code 3 vs 1.
    pub fn is_refusal(&self) -> bool {
        use LinkError as E;
        match self {
            E::NoIdentity
            | E::BadInvite { .. }
            | E::InviteExpired
            | E::OwnInvite
            | E::InviteUnknown
            | E::NoInviteWaiting
            | E::TooManyInvites { .. }
            | E::TooManyLinks { .. }
            | E::BadName { .. }
            | E::NameTaken { .. }
            | E::NoSuchLink { .. }
            | E::BadRelay { .. }
            | E::PublicNetworkRefused { .. }
            | E::PeerRefused { .. } => true,
            E::Call { error } => matches!(
                error,
                CallError::NotLinked | CallError::UnlinkedByPeer | CallError::Remote(_)
            ),
            E::Identity { .. }
            | E::Store { .. }
            | E::Lease { .. }
            | E::Bind { .. }
            | E::Socket { .. }
            | E::Holder { .. } => false,
        }
    }

    /// The error as the binding hands it on: `{kind, ...fields, message, refused}`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(self).unwrap_or_else(|_| serde_json::json!({}));
        if let Some(o) = v.as_object_mut() {
            o.insert("message".into(), self.to_string().into());
            o.insert("refused".into(), self.is_refusal().into());
        }
        v
    }
}

impl From<CallError> for LinkError {
    fn from(error: CallError) -> Self {
        LinkError::Call { error }
    }
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use LinkError as E;
        match self {
            E::NoIdentity => {
                f.write_str("this home has no machine identity yet (make an invite or use one)")
            }
            E::Identity { detail } => write!(f, "the machine identity: {detail}"),
            E::Store { detail } => write!(f, "links.json: {detail}"),
            E::Lease { detail } => write!(f, "the machine lease: {detail}"),
            E::Bind { detail } => write!(f, "binding the endpoint: {detail}"),
            E::Socket { detail } => write!(f, "the holder's socket: {detail}"),
            E::BadInvite { what } => write!(f, "not a usable invite: {what}"),
            E::InviteExpired => {
                f.write_str("the invite has expired: make a new one on the other machine")
            }
            E::OwnInvite => f.write_str("the invite is this machine's own"),
            E::InviteUnknown => f.write_str("the invite is unknown, used already, or expired"),
            E::NoInviteWaiting => {
                f.write_str("the other machine has no invite waiting (used or expired)")
            }
            E::TooManyInvites { max } => write!(f, "{max} invites are waiting already"),
            E::TooManyLinks { max } => write!(f, "this machine has {max} links already"),
            E::BadName { name } => {
                write!(
                    f,
                    "'{name}' is not a machine name ([a-z0-9][a-z0-9-]{{0,31}})"
                )
            }
            E::NameTaken { name } => {
                write!(f, "the name '{name}' is taken by another linked machine")
            }
            E::NoSuchLink { name } => write!(f, "no machine named '{name}' is linked"),
            E::BadRelay { relay, detail } => write!(f, "relay '{relay}': {detail}"),
            E::PublicNetworkRefused { var } => write!(
                f,
                "Iroh's public relays are refused here: {var}=1 forbids the public network in this process (tests, benchmarks, the demo); nothing was bound or dialed"
            ),
            E::PeerRefused { message } => write!(f, "the other machine refused: {message}"),
            E::Call { error } => write!(f, "{error}"),
            E::Holder { detail } => write!(f, "the lease holder: {detail}"),
        }
    }
}

impl std::error::Error for LinkError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_crosses_as_data_and_reads_back_the_same() {
        for e in [
            LinkError::NameTaken { name: "b".into() },
            LinkError::InviteUnknown,
            LinkError::Call {
                error: CallError::Timeout,
            },
            LinkError::Call {
                error: CallError::Unreachable("no route".into()),
            },
        ] {
            let j = serde_json::to_string(&e).unwrap();
            assert_eq!(serde_json::from_str::<LinkError>(&j).unwrap(), e, "{j}");
        }
        let v = LinkError::NameTaken { name: "b".into() }.to_json();
        assert_eq!(v["kind"], "name-taken");
        assert_eq!(v["name"], "b");
        assert_eq!(v["refused"], true);
        assert_eq!(
            v["message"],
            "the name 'b' is taken by another linked machine"
        );
        let v = LinkError::from(CallError::Timeout).to_json();
        assert_eq!(v["kind"], "call");
        assert_eq!(v["error"]["kind"], "timeout");
        assert_eq!(v["refused"], false);
    }
}
