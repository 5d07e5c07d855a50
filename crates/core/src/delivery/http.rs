//! One JSON POST to the host's loopback web server (reqwest on tokio), with the failure classes the
//! delivery needs: "nothing was sent" (connect refused / connect timeout) versus "sent, but no clear
//! answer" (timeout after connecting, reset, truncated reply) — the second is never blindly resent.
//!
//! Rules [shared napi-style.md]: only loopback targets (127.0.0.0/8, ::1, localhost), a connect timeout and
//! a whole-exchange timeout; no proxy (a proxy would see the cookie), no redirects.

use std::net::IpAddr;
use std::time::Duration;

use reqwest::Url;

use super::cookie::normalize_authority;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    pub total: Duration,
}

impl Timeouts {
    pub fn from_ms(connect_ms: u64, total_ms: u64) -> Timeouts {
        let total = Duration::from_millis(total_ms.max(1));
        let connect = Duration::from_millis(connect_ms.max(1)).min(total);
        Timeouts { connect, total }
    }
}

/// An HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub status: u16,
    pub body: String,
}

/// The root error of a failed exchange as the system or the HTTP library gave it: its words (never
/// ours, never a header value; an OS error's code is in them) and, when it is an `io::Error`, its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// `io::Error`'s kind (a refused connect, a reset by the peer, …).
    pub kind: Option<std::io::ErrorKind>,
    /// The error's own text, e.g. `Connection refused (os error 111)`.
    pub text: Box<str>,
}

impl Cause {
    /// The innermost source of `e` (the system's or hyper's error under reqwest's wrappers).
    fn root(e: &(dyn std::error::Error + 'static)) -> Cause {
        let mut last = e;
        while let Some(s) = last.source() {
            last = s;
        }
        Cause::of(last)
    }

    /// `e` itself.
    fn of(e: &(dyn std::error::Error + 'static)) -> Cause {
        Cause {
            kind: e.downcast_ref::<std::io::Error>().map(std::io::Error::kind),
            text: e.to_string().into(),
        }
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why a POST produced no usable HTTP answer: reqwest's error kinds as data, the system's cause kept.
/// Whether the body may have gone out is [`NetError::nothing_sent`]; a carrier status (401, 5xx, …) is an
/// answer, not a `NetError`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetError {
    /// The HTTP client could not be set up (nothing was sent).
    Setup(Cause),
    /// The connection was not made: refused, unreachable (nothing was sent).
    Connect(Cause),
    /// Connecting took longer than the connect timeout (nothing was sent).
    ConnectTimeout,
    /// The request timeout passed after connecting, before a whole answer came.
    Timeout,
    /// The outer bound (the request timeout + 250 ms) passed with no whole answer.
    NoAnswerWithin { ms: u64 },
    /// The answer was larger than `max` bytes (cut off: unread).
    TooLarge { max: usize },
    /// After connecting, writing the request or reading the answer's head failed: a reset or a close
    /// after the request was written, an answer that is not HTTP.
    Request(Cause),
    /// Reading the answer's body failed (a reset or a close halfway).
    Body(Cause),
}

impl NetError {
    /// No connection was made, so the body never went out: never ambiguous, never looked up.
    pub fn nothing_sent(&self) -> bool {
        matches!(
            self,
            NetError::Setup(_) | NetError::Connect(_) | NetError::ConnectTimeout
        )
    }
}

impl std::fmt::Display for NetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NetError::Setup(c) => write!(f, "HTTP client setup failed: {c}"),
            NetError::Connect(c) | NetError::Request(c) | NetError::Body(c) => c.fmt(f),
            NetError::ConnectTimeout => f.write_str("connect timeout"),
            NetError::Timeout => f.write_str("no answer within the request timeout"),
            NetError::NoAnswerWithin { ms } => write!(f, "no answer within {ms} ms"),
            NetError::TooLarge { max } => write!(f, "the answer was larger than {max} bytes"),
        }
    }
}

impl std::error::Error for NetError {}

/// A validated loopback base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Base {
    /// `http://<authority>` (no path).
    pub origin: String,
    /// The canonical authority (the `Host` header and the cookie audience).
    pub authority: String,
}

/// Why a base URL is not one this plugin talks to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BaseUrlProblem {
    NotUrl(url::ParseError),
    NotHttp,
    Credentials,
    NotLoopback,
    NoAuthority,
}

/// A refused base URL: the URL as given and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseUrlError {
    pub url: String,
    pub problem: BaseUrlProblem,
}

impl std::fmt::Display for BaseUrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let u = &self.url;
        match &self.problem {
            BaseUrlProblem::NotUrl(e) => write!(f, "{u:?} is not a URL ({e})"),
            BaseUrlProblem::NotHttp => write!(
                f,
                "{u:?} is not an http:// URL (the host's web server is plain HTTP on loopback)"
            ),
            BaseUrlProblem::Credentials => write!(f, "{u:?} carries credentials"),
            BaseUrlProblem::NotLoopback => write!(f, "{u:?} is not a loopback address; this plugin only talks to the host on 127.0.0.0/8, ::1 or localhost"),
            BaseUrlProblem::NoAuthority => write!(f, "{u:?} has no usable authority"),
        }
    }
}

impl std::error::Error for BaseUrlError {}

/// Accept only `http://` URLs whose host is loopback: 127.0.0.0/8, ::1 (or its IPv4-mapped form) or `localhost`.
pub fn loopback_base(base_url: &str) -> Result<Base, BaseUrlError> {
    let no = |problem| BaseUrlError {
        url: base_url.to_string(),
        problem,
    };
    let url = Url::parse(base_url.trim()).map_err(|e| no(BaseUrlProblem::NotUrl(e)))?;
    if url.scheme() != "http" {
        return Err(no(BaseUrlProblem::NotHttp));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(no(BaseUrlProblem::Credentials));
    }
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = match bare.parse::<IpAddr>() {
        Ok(ip) => is_loopback_ip(ip),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    };
    if !loopback {
        return Err(no(BaseUrlProblem::NotLoopback));
    }
    let hostport = match url.port() {
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let authority =
        normalize_authority(&hostport).ok_or_else(|| no(BaseUrlProblem::NoAuthority))?;
    Ok(Base {
        origin: format!("http://{authority}"),
        authority,
    })
}

/// Is this IP loopback? (exposed for tests and callers that hold an address)
pub fn is_loopback_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6
                    .to_ipv4_mapped()
                    .map(|v4| v4.is_loopback())
                    .unwrap_or(false)
        }
    }
}

/// How long an idle loopback connection is kept for the next send: well below the host's keep-alive
/// timeout (rc.8 `packages/host/webserver/src/index.ts` uses node:http `createServer` with its default
/// `keepAliveTimeout`, 5 s), so the host never closes a connection this side is about to reuse (a
/// request on a connection closed under it would be an ambiguous failure, never resent).
const IDLE: Duration = Duration::from_secs(2);

thread_local! {
    /// One client per thread of the runtime and connect timeout: a send reuses the loopback
    /// connection of the last one (no connect, and no new socket for the host's event loop to
    /// accept), as `fetch` does. Per thread, because a connection lives on the runtime that opened it
    /// (a test's runtime ends with the test; its thread, and this, with it).
    static CLIENTS: std::cell::RefCell<Vec<(Duration, reqwest::Client)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn client(connect: Duration) -> Result<reqwest::Client, reqwest::Error> {
    CLIENTS.with(|c| {
        let mut c = c.borrow_mut();
        if let Some((_, cl)) = c.iter().find(|(d, _)| *d == connect) {
            return Ok(cl.clone());
        }
        let cl = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(connect)
            .pool_idle_timeout(IDLE)
            .pool_max_idle_per_host(4)
            .build()?;
        if c.len() >= 4 {
            c.remove(0);
        }
        c.push((connect, cl.clone()));
        Ok(cl)
    })
}

/// POST `body` (JSON) to `base.origin + path`, with an optional `Cookie` header.
/// The answer body is read up to `max_body` bytes (more is an ambiguous, truncated answer).
pub async fn post_json(
    base: &Base,
    path: &str,
    body: String,
    cookie: Option<&str>,
    t: Timeouts,
    max_body: usize,
) -> Result<Reply, NetError> {
    let client = client(t.connect).map_err(|e| NetError::Setup(Cause::of(&e)))?;
    let url = format!("{}{}", base.origin, path);
    let mut rb = client
        .post(url)
        .timeout(t.total)
        .header(reqwest::header::HOST, base.authority.as_str())
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body);
    if let Some(c) = cookie {
        rb = rb.header(reqwest::header::COOKIE, c);
    }
    let exchange = async {
        let mut resp = rb
            .send()
            .await
            .map_err(|e| classify(e, NetError::Request))?;
        let status = resp.status().as_u16();
        let mut buf: Vec<u8> = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    if buf.len() + chunk.len() > max_body {
                        return Err(NetError::TooLarge { max: max_body });
                    }
                    buf.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => return Err(classify(e, NetError::Body)),
            }
        }
        Ok(Reply {
            status,
            body: String::from_utf8_lossy(&buf).into_owned(),
        })
    };
    // reqwest enforces `total` itself; this outer bound is a belt-and-braces guard.
    match tokio::time::timeout(t.total + Duration::from_millis(250), exchange).await {
        Ok(r) => r,
        Err(_) => Err(NetError::NoAnswerWithin {
            ms: t.total.as_millis() as u64,
        }),
    }
}

/// Map a reqwest error to its kind; `after` is the kind of a failure after connecting (the request's, or
/// the body's), with the root cause.
fn classify(e: reqwest::Error, after: fn(Cause) -> NetError) -> NetError {
    let cause = Cause::root(&e);
    if e.is_connect() {
        // typed, never the error's words: reqwest's own timeout, an `io::Error` of kind TimedOut anywhere in
        // the chain (hyper-util's connect timeout, the system's ETIMEDOUT), or the root cause's kind
        if e.is_timeout() || cause.kind == Some(std::io::ErrorKind::TimedOut) {
            return NetError::ConnectTimeout;
        }
        return NetError::Connect(cause);
    }
    if e.is_timeout() {
        return NetError::Timeout;
    }
    after(cause)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_base_url_says_why_in_the_words_of_the_receipt() {
        let e = loopback_base("http://10.0.0.1:3080").unwrap_err();
        assert_eq!(e.to_string(), "\"http://10.0.0.1:3080\" is not a loopback address; this plugin only talks to the host on 127.0.0.0/8, ::1 or localhost");
        let e = loopback_base("127.0.0.1:3080").unwrap_err();
        assert!(
            matches!(e.problem, BaseUrlProblem::NotUrl(_)) || e.problem == BaseUrlProblem::NotHttp,
            "{e:?}"
        );
        assert_eq!(
            loopback_base("http://u@127.0.0.1:1")
                .unwrap_err()
                .to_string(),
            "\"http://u@127.0.0.1:1\" carries credentials"
        );
    }

    #[test]
    fn loopback_validation() {
        let b = loopback_base("http://127.0.0.1:3080").unwrap();
        assert_eq!(b.origin, "http://127.0.0.1:3080");
        assert_eq!(b.authority, "127.0.0.1:3080");
        assert_eq!(
            loopback_base("http://127.9.8.7:1/").unwrap().authority,
            "127.9.8.7:1"
        );
        assert_eq!(
            loopback_base("http://[::1]:8081").unwrap().authority,
            "[::1]:8081"
        );
        assert_eq!(
            loopback_base("http://LocalHost:80/").unwrap().authority,
            "localhost"
        );
        assert_eq!(
            loopback_base("http://[::ffff:127.0.0.1]:9")
                .unwrap()
                .authority,
            "[::ffff:7f00:1]:9"
        );
        for bad in [
            "http://192.168.1.2:3080",
            "http://0.0.0.0:3080",
            "http://example.com",
            "http://localhost.evil.com:3080",
            "https://127.0.0.1:3080",
            "http://user:pw@127.0.0.1:3080",
            "ftp://127.0.0.1",
            "127.0.0.1:3080",
            "http://[::2]:1",
        ] {
            assert!(loopback_base(bad).is_err(), "{bad} must be refused");
        }
        for (bad, problem) in [
            ("http://192.168.1.2:3080", BaseUrlProblem::NotLoopback),
            ("https://127.0.0.1:3080", BaseUrlProblem::NotHttp),
            ("http://user:pw@127.0.0.1:3080", BaseUrlProblem::Credentials),
        ] {
            assert_eq!(loopback_base(bad).unwrap_err().problem, problem, "{bad}");
        }
        assert!(is_loopback_ip("127.0.0.2".parse().unwrap()));
        assert!(!is_loopback_ip("10.0.0.1".parse().unwrap()));
    }

    #[tokio::test]
    async fn refused_port_is_not_sent() {
        // bind then drop to find a free port that refuses
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        drop(l);
        let base = loopback_base(&format!("http://127.0.0.1:{port}")).unwrap();
        let r = post_json(
            &base,
            "/api/x",
            "{}".into(),
            None,
            Timeouts::from_ms(500, 1000),
            1024,
        )
        .await;
        let Err(NetError::Connect(cause)) = r else {
            panic!("{r:?}")
        };
        assert_eq!(cause.kind, Some(std::io::ErrorKind::ConnectionRefused));
    }
}
