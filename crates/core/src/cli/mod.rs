//! What the `dsh-session-mail` command line needs from the core beyond the tools: the default sender
//! ([`sender`]) and the store's listing and window, the send outcome and the ledger as data ([`data`]).
//! The CLI has no live registry: every session it sees comes from the store, so rows are `cold`
//! unless a caller passes `live`.

pub mod data;
pub mod sender;
