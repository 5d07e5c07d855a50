//! What `dsh-session-mail doctor` asks the core: the cordis patch layers' verdict on the plugin's
//! row ([`patch`]) and whether the host accepts a cookie minted from its secret ([`auth_probe`]).

pub mod auth_probe;
pub mod patch;
