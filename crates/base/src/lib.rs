//! dsh-session-mail base: the leaf every other crate of the plugin stands on. It knows no session
//! log, no mail rule and no tool: safe file IO under DSH_HOME ([`fsafe`]), the plugin's names and
//! paths ([`names`], [`home`]), the private key files and their seals ([`seal`]), the clock
//! ([`clock`]), the blocking-pool helper ([`offload`]) and text helpers ([`text`], [`utf16`], [`scrub`]).

pub mod clock;
pub mod fsafe;
pub mod home;
pub mod names;
pub mod offload;
pub mod scrub;
pub mod seal;
pub mod text;
pub mod utf16;
