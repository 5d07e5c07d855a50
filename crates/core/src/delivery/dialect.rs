//! Which host generation serves the prompt route (`hostApi: auto`).
//!
//! - `host.version` given: core version below 0.1.2 → rc.8, else v2. The pre-release tag is ignored on
//!   purpose: 0.1.2-rc.1 already serves `session/prompt` [session-contract §0 Z12 and §3.1: Z12 =
//!   0.1.2-rc.1 has `SessionController` `@Remote('prompt')`], although semver orders it before 0.1.2.
//! - no version: probe `POST /api/host.describe` with an rc.8 envelope and no cookie. rc.8 answers 200
//!   [R8 `packages/host/apiproxy/src/fetch/handler.ts` `UNARY_ROUTES['host.describe']`, no auth];
//!   v2 answers 401 (the cookie check runs before any route) or 404
//!   [Z17 `packages/client/connection/src/rpc-host.ts` `requestRejection`, `endpointFromPath`] → v2.
//! - the result is cached per base URL for the life of the process.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::envelope::{rc8_describe, RC8_DESCRIBE_PATH};
use super::http::{post_json, Base, NetError, Timeouts};
use super::Dialect;

/// What `Config::host_api` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    Forced(Dialect),
    Auto,
}

/// `rc8` / `v2` force a dialect; anything else (`auto`) detects.
pub fn choice(host_api: &str) -> Choice {
    match host_api.trim().to_ascii_lowercase().as_str() {
        "rc8" | "rc.8" => Choice::Forced(Dialect::Rc8),
        "v2" => Choice::Forced(Dialect::V2),
        _ => Choice::Auto,
    }
}

/// The dialect a version string implies; `None` when the version does not parse.
pub fn from_version(version: &str) -> Option<Dialect> {
    let v = version.trim().trim_start_matches(['v', 'V']);
    let core = v.split(['-', '+']).next()?;
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    let major = parts.next()??;
    let minor = parts.next()??;
    let patch = parts.next().unwrap_or(Some(0))?;
    Some(if (major, minor, patch) < (0, 1, 2) {
        Dialect::Rc8
    } else {
        Dialect::V2
    })
}

fn cache() -> &'static Mutex<HashMap<String, Dialect>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Dialect>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

pub fn cached(origin: &str) -> Option<Dialect> {
    cache().lock().ok()?.get(origin).copied()
}

pub fn remember(origin: &str, d: Dialect) {
    if let Ok(mut m) = cache().lock() {
        m.insert(origin.to_string(), d);
    }
}

/// Drop a cached answer (the next `auto` delivery to that origin probes again).
pub fn forget(origin: &str) {
    if let Ok(mut m) = cache().lock() {
        m.remove(origin);
    }
}

/// What the host answered to `POST /api/host.describe` without a cookie: the one probe of the host
/// generation, used by the send path (`auto`) and by the CLI's doctor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostAnswer {
    /// HTTP 200 with an rc.8 `server-response`: the rc.8 route, no auth.
    Rc8,
    /// HTTP 401 or 404: 0.1.2+ (the route needs a cookie, or `host.describe` is not a route).
    V2 { status: u16 },
    /// HTTP 403: the Host/Origin fence refused the address.
    Forbidden,
    /// Anything else (not like DSH), with the start of its body.
    Other { status: u16, body: String },
}

impl HostAnswer {
    /// The generation a send assumes: only an rc.8 answer is rc.8 (any 200 counts, as before).
    pub fn dialect(&self) -> Dialect {
        match self {
            HostAnswer::Rc8 | HostAnswer::Other { status: 200, .. } => Dialect::Rc8,
            _ => Dialect::V2,
        }
    }
}

/// Ask the host once (no cache, no cookie).
pub async fn probe(base: &Base, t: Timeouts) -> Result<HostAnswer, NetError> {
    let body = rc8_describe(&uuid::Uuid::new_v4().to_string());
    let reply = post_json(base, RC8_DESCRIBE_PATH, body, None, t, 256 * 1024).await?;
    let server_response = serde_json::from_str::<serde_json::Value>(&reply.body)
        .ok()
        .is_some_and(|v| v.get("type").and_then(|t| t.as_str()) == Some("server-response"));
    Ok(match reply.status {
        200 if server_response => HostAnswer::Rc8,
        401 | 404 => HostAnswer::V2 {
            status: reply.status,
        },
        403 => HostAnswer::Forbidden,
        status => HostAnswer::Other {
            status,
            body: reply.body.chars().take(120).collect(),
        },
    })
}

/// Detect for `auto`: version, then cache, then the probe.
pub async fn detect(base: &Base, version: Option<&str>, t: Timeouts) -> Result<Dialect, NetError> {
    if let Some(d) = version.and_then(from_version) {
        return Ok(d);
    }
    if let Some(d) = cached(&base.origin) {
        return Ok(d);
    }
    let d = probe(base, t).await?.dialect();
    remember(&base.origin, d);
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions() {
        assert_eq!(from_version("0.1.0-rc.8"), Some(Dialect::Rc8));
        assert_eq!(from_version("0.1.1"), Some(Dialect::Rc8));
        assert_eq!(from_version("0.0.1"), Some(Dialect::Rc8));
        assert_eq!(from_version("0.1.2-rc.1"), Some(Dialect::V2));
        assert_eq!(from_version("0.1.2"), Some(Dialect::V2));
        assert_eq!(from_version("0.1.7-rc.2"), Some(Dialect::V2));
        assert_eq!(from_version("v0.2.0-rc.2"), Some(Dialect::V2));
        assert_eq!(from_version("1.0"), Some(Dialect::V2));
        assert_eq!(from_version(""), None);
        assert_eq!(from_version("latest"), None);
    }

    #[test]
    fn choices() {
        assert_eq!(choice("rc8"), Choice::Forced(Dialect::Rc8));
        assert_eq!(choice("V2"), Choice::Forced(Dialect::V2));
        assert_eq!(choice("auto"), Choice::Auto);
        assert_eq!(choice("whatever"), Choice::Auto);
    }
}
