//! dsh-session-mail: the Rust core of a DeepSeek Harness plugin that lets one session
//! list, read and message the other sessions of the same host.
//!
//! Every module except `binding` is plain Rust (no napi types) and is tested by `cargo test`.
//! `binding` is the one thin file that exposes the core to Node.

pub mod cli_support;
pub mod config;
pub mod delivery;
pub mod error;
pub mod ledger;
pub mod mail;
pub mod render;
pub mod request;
pub mod store;
pub mod tools;

mod binding;
