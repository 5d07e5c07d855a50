//! dsh-session-mail: the Rust core of a DeepSeek Harness plugin that lets one session
//! list, read and message the other sessions of the same host.
//!
//! No napi types live here: every module is plain Rust, tested by `cargo test -p dsh-session-mail-core`.
//! The addon crate at the repository root (`src/lib.rs`) is the one thin binding over it.
//!
//! Below this crate: `base` (safe file IO, names, paths, clock, text helpers) and `store` (the
//! read-only session logs). Its modules, bottom to top (each uses only those before it):
//! `config`, `error`, `code`, `tool`, `repo`, `machine`; `ledger`, `presence`, `request`, `mailbox`;
//! `mail`, `policy`, `crossing`; `delivery`, `fate`; `outcome`; `tools`, `doctor`; `render` (the
//! printers); `cli`, `human`, `remote` (a linked machine's requests served, and the tools across
//! machines).

/// To JS as a string: the `napi` conversions of a type the binding returns as its string form
/// (`MachineId`, `LedgerOutcome`); `$str` turns the value into its `String`.
#[cfg(feature = "napi")]
macro_rules! napi_as_string {
    ($t:ty, |$v:ident| $str:expr) => {
        impl napi::bindgen_prelude::TypeName for $t {
            fn type_name() -> &'static str {
                "String"
            }
            fn value_type() -> napi::ValueType {
                napi::ValueType::String
            }
        }

        impl napi::bindgen_prelude::ToNapiValue for $t {
            unsafe fn to_napi_value(
                env: napi::sys::napi_env,
                $v: Self,
            ) -> napi::Result<napi::sys::napi_value> {
                // SAFETY: forwarded as is to String's conversion, with the env napi handed us.
                unsafe { String::to_napi_value(env, $str) }
            }
        }
    };
}

pub mod cli;
pub mod code;
pub mod config;
pub mod crossing;
pub mod delivery;
pub mod doctor;
pub mod error;
pub mod fate;
pub mod human;
pub mod ledger;
pub mod machine;
pub mod mail;
pub mod mailbox;
pub mod mailindex;
pub mod mailview;
pub mod outcome;
pub mod policy;
pub mod presence;
pub mod remote;
pub mod render;
pub mod repo;
pub mod request;
pub mod tool;
pub mod tools;
