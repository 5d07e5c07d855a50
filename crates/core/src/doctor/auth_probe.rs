//! Is a cookie minted from `$DSH_HOME/.credentials.yaml` accepted by the host?

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::json;

use crate::delivery::http::{loopback_base, post_json, Timeouts};
use crate::delivery::{cookie, credentials};

// doctor: is our cookie accepted?

/// What the cookie probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(feature = "napi", napi_derive::napi(string_enum = "kebab-case"))]
pub enum AuthState {
    /// 2xx, or 404 after the cookie check.
    Ok,
    /// 401: the cookie was refused.
    Rejected,
    /// 403.
    Forbidden,
    /// 5xx: proves nothing.
    HostError,
    /// Another status.
    Unexpected,
    NoSecret,
    Unreachable,
    BadUrl,
}

/// The probe's answer (`authProbe`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "napi", napi_derive::napi(object, use_nullable = true))]
pub struct AuthProbe {
    pub state: AuthState,
    pub status: Option<u16>,
    pub detail: Option<String>,
}

fn probe(state: AuthState, status: Option<u16>, detail: Option<String>) -> AuthProbe {
    AuthProbe {
        state,
        status,
        detail,
    }
}

/// A harmless authenticated call: POST `/api/host/describe` with the browser-session cookie minted
/// from the host's secret. The host checks the cookie before it looks the endpoint up [Z17
/// `rpc-host.ts` `requestRejection`], so any answer but 401 means the cookie passed (a 404 only says
/// the endpoint is unknown). `state`: `ok`, `rejected` (401), `forbidden` (403), `no-secret`,
/// `unreachable`, `bad-url`. The secret is never part of the answer.
pub async fn auth_probe(
    base_url: &str,
    home: &Path,
    secret: Option<&str>,
    t: Timeouts,
) -> AuthProbe {
    let base = match loopback_base(base_url) {
        Ok(b) => b,
        Err(why) => return probe(AuthState::BadUrl, None, Some(why.to_string())),
    };
    let s = match credentials::load(secret, home) {
        Ok(s) => s,
        Err(why) => return probe(AuthState::NoSecret, None, Some(why.to_string())),
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    let c = cookie::cookie_header(&s, &base.authority, now);
    let body = json!({
        "type": "client-request",
        "rpcId": uuid::Uuid::new_v4().to_string(),
        "method": "host/describe",
        "payload": { "args": {} },
    })
    .to_string();
    match post_json(&base, "/api/host/describe", body, Some(&c), t, 256 * 1024).await {
        Ok(r) if r.status == 401 => probe(AuthState::Rejected, Some(401), None),
        Ok(r) if r.status == 403 => probe(
            AuthState::Forbidden,
            Some(403),
            Some(base::scrub::scrub(
                &r.body.chars().take(200).collect::<String>(),
            )),
        ),
        // Only an answer the host gives after the cookie check passed says "accepted": a 2xx, or a
        // 404 (the endpoint is looked up after the cookie). A 5xx or any other status proves nothing
        // (issue 11 #5), and whatever answered may echo our cookie: the detail is scrubbed.
        Ok(r) if (200..300).contains(&r.status) || r.status == 404 => {
            probe(AuthState::Ok, Some(r.status), None)
        }
        Ok(r) => probe(
            if r.status >= 500 {
                AuthState::HostError
            } else {
                AuthState::Unexpected
            },
            Some(r.status),
            Some(format!(
                "HTTP {}: {}",
                r.status,
                base::scrub::scrub(&r.body.chars().take(200).collect::<String>())
            )),
        ),
        Err(e) => probe(
            AuthState::Unreachable,
            None,
            Some(base::scrub::scrub(&e.to_string())),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// The probe as the binding's JS sees it.
    async fn auth_probe(base_url: &str, home: &Path, secret: Option<&str>, t: Timeouts) -> Value {
        serde_json::to_value(super::auth_probe(base_url, home, secret, t).await).unwrap()
    }

    #[tokio::test]
    async fn auth_probe_states() {
        use crate::delivery::testserver::{serve, Act, Recorded};
        let home = tempfile::tempdir().unwrap();
        let t = Timeouts::from_ms(500, 1000);
        let secret = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc";
        let (base, log) = serve(|_, r: &Recorded| {
            let has_cookie = r
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("cookie"));
            if has_cookie {
                Act::Reply(404, "not found".into())
            } else {
                Act::Reply(401, "unauthorized".into())
            }
        })
        .await;
        let v = auth_probe(&base, home.path(), Some(secret), t).await;
        assert_eq!(v["state"], "ok", "{v}");
        assert_eq!(v["status"], 404);
        assert!(!v.to_string().contains(secret));
        assert_eq!(log.lock().unwrap()[0].path, "/api/host/describe");
        let v = auth_probe(&base, home.path(), None, t).await;
        assert_eq!(v["state"], "no-secret", "{v}");
        let (base401, _) = serve(|_, _: &Recorded| Act::Reply(401, "unauthorized".into())).await;
        assert_eq!(
            auth_probe(&base401, home.path(), Some(secret), t).await["state"],
            "rejected"
        );
        assert_eq!(
            auth_probe("http://example.com:1", home.path(), Some(secret), t).await["state"],
            "bad-url"
        );
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead = format!("http://127.0.0.1:{}", l.local_addr().unwrap().port());
        drop(l);
        assert_eq!(
            auth_probe(&dead, home.path(), Some(secret), t).await["state"],
            "unreachable"
        );
        // Issue 11 #5: a 500 (or a 403) that echoes the cookie is never "accepted", and the cookie
        // never reaches the detail.
        for status in [500u16, 403, 418] {
            let (b, _) = serve(move |_, r: &Recorded| {
                let c = r.header("cookie").unwrap_or("").to_string();
                Act::Reply(status, format!("handler failed; Cookie: {c}"))
            })
            .await;
            let v = auth_probe(&b, home.path(), Some(secret), t).await;
            assert_ne!(v["state"], "ok", "{status}: {v}");
            let text = v.to_string();
            assert!(!text.contains("dsh-auth-"), "{text}");
            assert!(!text.contains("v1."), "{text}");
        }
    }
}
