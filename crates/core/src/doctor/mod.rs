//! What `dsh-session-mail doctor` asks the core: the cordis patch layers' verdict on the plugin's
//! row ([`patch`]) and whether the host accepts a cookie minted from its secret ([`auth_probe`]).

pub mod auth_probe;
pub mod patch;

use crate::delivery::dialect::{self, HostAnswer};
use crate::delivery::http::{loopback_base, BaseUrlError, NetError, Timeouts};

/// Why nothing usable answered the doctor's host check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unreachable {
    BadUrl(BaseUrlError),
    Transport(NetError),
}

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreachable::BadUrl(e) => e.fmt(f),
            Unreachable::Transport(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for Unreachable {}

/// The doctor's host check: the send path's own probe ([`dialect::probe`]) at `base_url`.
/// `Err` says why nothing usable answered (a bad address, a connection that failed).
pub async fn probe_host(base_url: &str, t: Timeouts) -> Result<HostAnswer, Unreachable> {
    let base = loopback_base(base_url).map_err(Unreachable::BadUrl)?;
    dialect::probe(&base, t)
        .await
        .map_err(Unreachable::Transport)
}

/// What the host at an address is, as the send path's probe saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "lowercase"))]
pub enum HostState {
    /// rc.8: `POST /api/session.prompt`, no auth.
    Rc8,
    /// 0.1.2+: `/api/session/prompt` behind the browser-session cookie.
    V2,
    /// 403: the Host/Origin fence.
    Forbidden,
    /// Something answered, not like DSH.
    Other,
    /// Nothing usable answered (a bad address, a connection that failed).
    Unreachable,
}

/// The doctor's host check (`probeHost`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct HostProbe {
    pub state: HostState,
    pub status: Option<u16>,
    /// Why nothing answered, or the start of an unexpected body.
    pub detail: Option<String>,
}

impl HostProbe {
    /// The probe's answer as data.
    pub fn of(answer: Result<HostAnswer, Unreachable>) -> HostProbe {
        let (state, status, detail) = match answer {
            Ok(HostAnswer::Rc8) => (HostState::Rc8, Some(200), None),
            Ok(HostAnswer::V2 { status }) => (HostState::V2, Some(status), None),
            Ok(HostAnswer::Forbidden) => (HostState::Forbidden, Some(403), None),
            Ok(HostAnswer::Other { status, body }) => (HostState::Other, Some(status), Some(body)),
            Err(why) => (HostState::Unreachable, None, Some(why.to_string())),
        };
        HostProbe {
            state,
            status,
            detail,
        }
    }
}

/// [`probe_host`] as data.
pub async fn host_probe(base_url: &str, t: Timeouts) -> HostProbe {
    HostProbe::of(probe_host(base_url, t).await)
}

/// `{ledger, credentials}`: why the audit ledger cannot be used as it is (a link, not a regular
/// file, foreign-owned, over the read cap) and whether `.credentials.yaml` is readable by others;
/// `null` when fine (issue 11 #4, #13).
pub fn home_files(home: &std::path::Path) -> serde_json::Value {
    serde_json::json!({
        "ledger": crate::ledger::health(home),
        "credentials": crate::delivery::credentials::exposure(home).map(|e| e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_answer_is_a_typed_state_with_its_status() {
        let v = |a| serde_json::to_value(HostProbe::of(a)).unwrap();
        assert_eq!(
            v(Ok(HostAnswer::Rc8)),
            serde_json::json!({"state": "rc8", "status": 200, "detail": null})
        );
        assert_eq!(v(Ok(HostAnswer::V2 { status: 401 }))["state"], "v2");
        assert_eq!(v(Ok(HostAnswer::Forbidden))["status"], 403);
        let other = HostProbe::of(Ok(HostAnswer::Other {
            status: 418,
            body: "teapot".into(),
        }));
        assert_eq!(
            (other.state, other.status, other.detail.as_deref()),
            (HostState::Other, Some(418), Some("teapot"))
        );
        let refused = v(Err(Unreachable::Transport(NetError::Connect(
            crate::delivery::http::Cause {
                kind: None,
                text: "refused".into(),
            },
        ))));
        assert_eq!(
            (refused["state"].as_str(), refused["detail"].as_str()),
            (Some("unreachable"), Some("refused"))
        );
        assert_eq!(
            v(Err(Unreachable::Transport(NetError::ConnectTimeout)))["detail"],
            "connect timeout"
        );
    }

    #[tokio::test]
    async fn a_port_nothing_listens_on_is_unreachable_and_a_remote_address_is_refused() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let t = Timeouts::from_ms(500, 500);
        let p = host_probe(&format!("http://127.0.0.1:{port}"), t).await;
        assert_eq!((p.state, p.status), (HostState::Unreachable, None));
        let p = host_probe("http://example.com:80", t).await;
        assert_eq!(p.state, HostState::Unreachable);
        assert!(p.detail.is_some());
    }
}
