//! dsh-session-mail: the Rust core of a DeepSeek Harness plugin that lets one session
//! list, read and message the other sessions of the same host.
//!
//! No napi types live here: every module is plain Rust, tested by `cargo test -p dsh-session-mail-core`.
//! The addon crate at the repository root (`src/lib.rs`) is the one thin binding over it.

pub mod cli;
pub mod config;
pub mod delivery;
pub mod doctor;
pub mod error;
pub mod fate;
pub mod fsafe;
pub mod ledger;
pub mod mail;
pub mod mailbox;
pub mod offload;
pub mod outcome;
pub mod presence;
pub mod render;
pub mod repo;
pub mod request;
pub mod scrub;
pub mod store;
pub mod tools;
pub mod utf16;
