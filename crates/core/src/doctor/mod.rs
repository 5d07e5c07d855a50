//! What `dsh-session-mail doctor` asks the core: the cordis patch layers' verdict on the plugin's
//! row ([`patch`]) and whether the host accepts a cookie minted from its secret ([`auth_probe`]).

pub mod auth_probe;
pub mod patch;

use crate::delivery::dialect::{self, HostAnswer};
use crate::delivery::http::{loopback_base, Timeouts, TransportError};

/// The doctor's host check: the send path's own probe ([`dialect::probe`]) at `base_url`.
/// `Err` says why nothing usable answered (a bad address, a connection that failed).
pub async fn probe_host(base_url: &str, t: Timeouts) -> Result<HostAnswer, String> {
    let base = loopback_base(base_url)?;
    dialect::probe(&base, t).await.map_err(|e| match e {
        TransportError::NotSent(why) | TransportError::Ambiguous(why) => why,
        TransportError::ConnectTimeout => "connect timeout".into(),
    })
}

/// `{ledger, credentials}`: why the audit ledger cannot be used as it is (a link, not a regular
/// file, foreign-owned, over the read cap) and whether `.credentials.yaml` is readable by others;
/// `null` when fine (issue 11 #4, #13).
pub fn home_files(home: &std::path::Path) -> serde_json::Value {
    serde_json::json!({
        "ledger": crate::ledger::health(home),
        "credentials": crate::delivery::credentials::exposure_warning(home),
    })
}
