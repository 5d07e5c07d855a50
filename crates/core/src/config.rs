//! Plugin configuration as the shim hands it over. The defaults are declared here, once; the binding
//! exports them (`configDefaults()`), index.js's Schemastery Config takes its defaults and the keys it
//! passes on from them, and index.d.ts's `Config` extends the generated `ConfigDefaults`.

use serde::{Deserialize, Deserializer, Serialize};

/// The configuration the core reads. Declared once for the binding too: `configDefaults()` returns
/// it as the napi object `ConfigDefaults` (its numbers are `u32`: a JS number carries them exactly). The
/// limits and timeouts that were `u64`/`usize` still take any whole number, a larger one as `u32::MAX`
/// (`saturating`: in effect no limit, as it was), so no configuration that parsed before fails now.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", default)]
#[cfg_attr(
    feature = "napi",
    napi_derive::napi(object, js_name = "ConfigDefaults")
)]
pub struct Config {
    /// Prefix `sessions_send` bodies with the cross-session frame (seed 000).
    pub frame_messages: bool,
    /// Longest body `sessions_send` / `send_session_message` accept, in characters.
    #[serde(deserialize_with = "saturating")]
    pub max_send_chars: u32,
    /// `queue` or `steer`: the `sessions_send` mode when the call names none.
    pub default_send_mode: String,
    /// May a send wake (resume) a cold session?
    pub allow_resume: bool,
    /// Cap on `sessions_list` rows.
    #[serde(deserialize_with = "saturating")]
    pub max_list_results: u32,
    /// Cap on `sessions_read` messages.
    #[serde(deserialize_with = "saturating")]
    pub max_read_messages: u32,
    /// Longer messages are cut with `…[truncated N chars]`.
    #[serde(deserialize_with = "saturating")]
    pub max_message_chars: u32,
    /// `sessions_read` default for `include_injected`.
    pub include_injected_by_default: bool,
    /// `auto`, `rc8` (POST /api/session.prompt) or `v2` (POST /api/session/prompt + cookie).
    pub host_api: String,
    /// Connect timeout for the host route.
    #[serde(deserialize_with = "saturating")]
    pub connect_timeout_ms: u32,
    /// Timeout for one whole exchange with the host route.
    #[serde(deserialize_with = "saturating")]
    pub request_timeout_ms: u32,
    /// Length of the sliding send-budget window, in seconds (0 turns both budgets off).
    #[serde(deserialize_with = "saturating")]
    pub budget_window_secs: u32,
    /// Sends one sender may make to one target within the window (0: no pair budget).
    pub budget_per_pair: u32,
    /// Sends one sender may make to all targets together within the window (0: no sender budget).
    pub budget_per_sender: u32,
    /// Extra urgent / steer sends allowed beyond each budget, so a correction can still interrupt.
    pub urgent_reserve: u32,
    /// Queued (next-turn) messages from one sender a target may hold unclaimed before more queueing is
    /// refused (0: no stacking guard). Urgent / steer sends are never refused by it.
    pub max_stacked_per_sender: u32,
    /// Agent-to-agent deliveries one conversation chain may make until a human speaks in it (the causal
    /// loop guard, `mail::chain`; 0: off).
    pub max_relay_hops: u32,
    /// Sends all sessions of one linked machine may make into this home within the budget window, on
    /// top of the per-pair and per-sender budgets (0: no machine budget).
    pub budget_per_machine: u32,
    /// How long a message for an unreachable linked machine waits in the outbox before it expires.
    #[serde(deserialize_with = "saturating")]
    pub outbox_ttl_ms: u32,
}

/// A whole number of any size, over `u32::MAX` taken as `u32::MAX`.
fn saturating<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    Ok(u32::try_from(u64::deserialize(d)?).unwrap_or(u32::MAX))
}

impl Default for Config {
    fn default() -> Self {
        Config {
            frame_messages: true,
            max_send_chars: 8000,
            default_send_mode: "queue".into(),
            allow_resume: true,
            max_list_results: 50,
            max_read_messages: 50,
            max_message_chars: 4000,
            include_injected_by_default: false,
            host_api: "auto".into(),
            connect_timeout_ms: 2000,
            request_timeout_ms: 10000,
            budget_window_secs: 600,
            budget_per_pair: 6,
            budget_per_sender: 20,
            urgent_reserve: 2,
            max_stacked_per_sender: 2,
            max_relay_hops: 4,
            budget_per_machine: 30,
            outbox_ttl_ms: 24 * 3600 * 1000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A limit or timeout past `u32` still parses (as it did when these were `u64`/`usize`), as the most.
    #[test]
    fn a_number_past_u32_saturates_and_a_negative_one_is_refused() {
        let c: Config = serde_json::from_str(
            r#"{"maxSendChars": 5000000000, "requestTimeoutMs": 18446744073709551615}"#,
        )
        .unwrap();
        assert_eq!(
            (c.max_send_chars, c.request_timeout_ms),
            (u32::MAX, u32::MAX)
        );
        assert_eq!(c.max_list_results, Config::default().max_list_results);
        assert!(serde_json::from_str::<Config>(r#"{"maxSendChars": -1}"#).is_err());
    }
}
