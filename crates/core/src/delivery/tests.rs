//! Delivery against a scripted loopback server.

use std::time::{Duration, Instant};

use super::cookie::{b64url, cookie_name, hmac_sha256};
use super::testserver::{ok_accepted, rpc_error, serve, Act, Log, Recorded};
use super::*;

const SECRET_B64: &str = "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc"; // 32 × 0x07

struct Fixture {
    home: tempfile::TempDir,
    base: String,
    request_id: String,
}

impl Fixture {
    fn new(base: String) -> Fixture {
        // a port may be reused by a later test: never inherit a cached generation
        dialect::forget(&base);
        Fixture {
            home: tempfile::tempdir().unwrap(),
            base,
            request_id: crate::mail::new_request_id(),
        }
    }
    fn delivery<'a>(&'a self, host_api: &'a str, secret: Option<&'a str>) -> Delivery<'a> {
        Delivery {
            base_url: &self.base,
            dsh_home: self.home.path(),
            host_secret: secret,
            host_version: None,
            host_api,
            timeouts: Timeouts::from_ms(500, 400),
            session_id: "session-target",
            mode: Mode::Queue,
            text: "From session-me \u{FF1A}\nhello",
            request_id: &self.request_id,
        }
    }
}

/// The connection broke after the request was written (the test server's reset or close).
fn is_reset(u: &Unclear) -> bool {
    matches!(u, Unclear::Net(NetError::Request(_) | NetError::Body(_)))
}

fn accepted_plain(o: &Outcome) -> bool {
    matches!(o, Outcome::Accepted { recovery: None, .. })
}

/// Accepted after an ambiguous first attempt, confirmed `how`.
fn accepted_after(o: &Outcome, how: Recovery) -> bool {
    matches!(o, Outcome::Accepted { recovery: Some(r), .. } if *r == how)
}

/// The path of every request the server saw, in order.
fn paths(log: &Log) -> Vec<String> {
    log.lock().unwrap().iter().map(|r| r.path.clone()).collect()
}

/// session.history's answer with no events.
const EMPTY_HISTORY: &str = r#"{"type":"server-response","rpcId":"h","result":{"ok":true,"value":{"events":[],"hasMore":false}}}"#;

/// A server that answers each request to `path` with `on_path()` and any other (the n-th of all) with `other(n)`.
async fn serve_route<O>(path: &'static str, on_path: fn() -> Act, other: O) -> (String, Log)
where
    O: Fn(usize) -> Act + Send + Sync + 'static,
{
    serve(
        move |n, r: &Recorded| {
            if r.path == path {
                on_path()
            } else {
                other(n)
            }
        },
    )
    .await
}

/// A host whose prompt route remembers the POST's rpcId and answers `prompt`, and whose session.history
/// answers `value(request, that rpcId)` as an ok server-response: what the lookup after an ambiguous POST reads.
async fn with_history<H>(prompt: fn() -> Act, value: H) -> (String, Log)
where
    H: Fn(&Recorded, &str) -> serde_json::Value + Send + Sync + 'static,
{
    let rpc_id: std::sync::Arc<std::sync::Mutex<String>> = Default::default();
    serve(move |_, r: &Recorded| {
        if r.path == "/api/session.history" {
            let id = rpc_id.lock().unwrap().clone();
            let body = serde_json::json!({"type":"server-response","rpcId":"h","result":{"ok":true,"value":value(r, &id)}});
            Act::Reply(200, body.to_string())
        } else {
            *rpc_id.lock().unwrap() = r.json()["rpcId"].as_str().unwrap_or("").to_string();
            prompt()
        }
    })
    .await
}

#[tokio::test]
async fn rc8_ok_posts_the_rc8_envelope_without_cookie() {
    let (base, log) =
        serve(|_, r: &Recorded| ok_accepted(r.json()["rpcId"].as_str().unwrap_or(""))).await;
    let f = Fixture::new(base.clone());
    let out = deliver(&f.delivery("rc8", None)).await;
    assert!(accepted_plain(&out), "{out:?}");
    let reqs = log.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/api/session.prompt");
    assert_eq!(r.header("cookie"), None);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("host"), Some(base.trim_start_matches("http://")));
    assert_eq!(
        r.body,
        envelope::rc8_prompt(
            &f.request_id,
            "session-target",
            Mode::Queue,
            "From session-me \u{FF1A}\nhello"
        )
    );
}

#[tokio::test]
async fn v2_ok_posts_the_v2_envelope_with_a_valid_cookie() {
    let (base, log) = serve(|_, _| ok_accepted("x")).await;
    let f = Fixture::new(base.clone());
    let out = deliver(&f.delivery("v2", Some(SECRET_B64))).await;
    assert!(accepted_plain(&out), "{out:?}");
    let reqs = log.lock().unwrap().clone();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.path, "/api/session/prompt");
    let j = r.json();
    assert_eq!(j["type"], "client-request");
    assert_eq!(j["method"], "session/prompt");
    let env_id = j["rpcId"].as_str().unwrap();
    assert!(
        uuid::Uuid::parse_str(env_id).is_ok(),
        "envelope rpcId is a plain UUID: {env_id}"
    );
    assert_eq!(
        j["payload"]["args"]["request"]["requestId"],
        f.request_id.as_str()
    );
    assert_eq!(
        j["payload"]["args"]["request"]["sessionId"],
        "session-target"
    );
    assert_eq!(j["payload"]["args"]["request"]["mode"], "queue");
    // cookie: right name, and a signature the host would accept
    let authority = base.trim_start_matches("http://");
    let cookie = r.header("cookie").unwrap();
    let (name, value) = cookie.split_once('=').unwrap();
    assert_eq!(name, cookie_name(authority));
    let parts: Vec<&str> = value.split('.').collect();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0], "v1");
    assert_eq!(
        parts[2],
        b64url(&hmac_sha256(&[7u8; 32], parts[1].as_bytes()))
    );
    use base64::Engine;
    let payload: serde_json::Value = serde_json::from_slice(
        &base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(parts[1])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(payload["authority"], authority);
    assert!(payload["issuedAt"].as_i64().unwrap() <= cookie::now_ms());
    // the secret itself never goes on the wire
    assert!(!r.body.contains(SECRET_B64) && !cookie.contains(SECRET_B64));
}

#[tokio::test]
async fn v2_secret_from_the_credentials_file() {
    let (base, log) = serve(|_, _| ok_accepted("x")).await;
    let f = Fixture::new(base);
    std::fs::write(
        f.home.path().join(".credentials.yaml"),
        format!("version: 1\nrefs: {{}}\nrecords:\n  client-connection/browser-session:\n    kind: grant\n    payload:\n      version: 1\n      secret: {SECRET_B64}\n"),
    )
    .unwrap();
    let out = deliver(&f.delivery("v2", None)).await;
    assert!(accepted_plain(&out), "{out:?}");
    assert!(log.lock().unwrap()[0].header("cookie").is_some());
}

#[tokio::test]
async fn v2_without_secret_sends_nothing() {
    let (base, log) = serve(|_, _| ok_accepted("x")).await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("v2", None)).await;
    assert!(
        matches!(out, Outcome::Failed(Failure::NoSecret(_))),
        "{out:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 0);
}

#[tokio::test]
async fn ok_false_is_rejected_with_the_hosts_message() {
    let (base, _log) = serve(|_, _| {
        rpc_error(
            "session/agent-busy",
            "use subagent delivery for this child session",
        )
    })
    .await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("v2", Some(SECRET_B64))).await;
    assert_eq!(
        out,
        Outcome::Rejected {
            code: "session/agent-busy".into(),
            message: "use subagent delivery for this child session".into(),
            after_ambiguous: false
        }
    );
}

#[tokio::test]
async fn http_401_403_500() {
    let (base, log) = serve(|_, _| Act::Reply(401, "unauthorized".into())).await;
    let f = Fixture::new(base);
    assert_eq!(
        deliver(&f.delivery("v2", Some(SECRET_B64))).await,
        Outcome::Failed(Failure::Unauthorized)
    );
    assert_eq!(log.lock().unwrap().len(), 1, "a 401 is not retried");

    let (base, _) = serve(|_, _| Act::Reply(403, "forbidden".into())).await;
    let f = Fixture::new(base);
    assert_eq!(
        deliver(&f.delivery("rc8", None)).await,
        Outcome::Failed(Failure::Forbidden("forbidden".into()))
    );

    let (base, log) = serve(|_, _| Act::Reply(500, "handler failure: boom".into())).await;
    let f = Fixture::new(base);
    assert_eq!(
        deliver(&f.delivery("rc8", None)).await,
        Outcome::Failed(Failure::HostError {
            status: 500,
            body: "handler failure: boom".into()
        })
    );
    assert_eq!(log.lock().unwrap().len(), 1, "a 500 is not retried");
}

#[tokio::test]
async fn connection_refused_is_host_down() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    drop(l);
    let f = Fixture::new(format!("http://127.0.0.1:{port}"));
    let out = deliver(&f.delivery("rc8", None)).await;
    let Outcome::Failed(Failure::HostDown(NetError::Connect(cause))) = &out else {
        panic!("{out:?}")
    };
    assert_eq!(cause.kind, Some(std::io::ErrorKind::ConnectionRefused));
}

#[tokio::test]
async fn non_loopback_base_is_refused_before_any_io() {
    let f = Fixture::new("http://10.1.2.3:3080".into());
    let out = deliver(&f.delivery("rc8", None)).await;
    assert!(
        matches!(out, Outcome::Failed(Failure::BadBaseUrl(_))),
        "{out:?}"
    );
}

#[tokio::test]
async fn rc8_slow_host_times_out_in_bounded_time_and_may_have_landed() {
    let (base, log) = serve_route(
        "/api/session.history",
        || Act::Reply(200, EMPTY_HISTORY.into()),
        |_| Act::Stall(Duration::from_secs(5)),
    )
    .await;
    let f = Fixture::new(base);
    let t0 = Instant::now();
    let out = deliver(&f.delivery("rc8", None)).await;
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(
        out,
        Outcome::Failed(Failure::MayHaveLanded(Box::new(Unsettled {
            first: Unclear::Net(NetError::Timeout),
            then: Then::ResendUnclear(Unclear::Net(NetError::Timeout)),
        })))
    );
    assert_eq!(
        paths(&log),
        [
            "/api/session.prompt",
            "/api/session.history",
            "/api/session.prompt"
        ]
    );
    // the resend carries the same id
    let bodies: Vec<String> = log.lock().unwrap().iter().map(|r| r.body.clone()).collect();
    assert_eq!(bodies[0], bodies[2]);
}

#[tokio::test]
async fn rc8_reset_then_history_finds_the_id_no_second_post() {
    let (base, log) = with_history(
        || Act::Reset,
        |_, id| {
            serde_json::json!({
                "events":[
                    {"event":{"type":"turn/start","seq":7,"time":1,"data":{"turn":2}}},
                    {"event":{"type":"agent/inbox/spliced","seq":8,"time":1,"data":{"target":"next-turn","start":0,
                        "inserted":[{"id":"m1","role":"user","content":[{"type":"text","text":"x"}],"source":{"kind":"user","rpcId":id}}]}}}
                ],"hasMore":false})
        },
    )
    .await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("rc8", None)).await;
    assert!(accepted_after(&out, Recovery::FoundInHistory), "{out:?}");
    assert_eq!(
        paths(&log),
        ["/api/session.prompt", "/api/session.history"],
        "no second POST"
    );
    assert_eq!(
        log.lock().unwrap()[1].json()["payload"]["sessionId"],
        "session-target"
    );
}

#[tokio::test]
async fn rc8_history_pages_back_and_finds_a_landed_user_message() {
    let (base, log) = with_history(
        || Act::Reply(200, "{\"type\":\"server-resp".into()), // garbled: ambiguous
        |r, id| match r.json()["payload"]["beforeSeq"].as_u64() {
            None => serde_json::json!({"events":[{"event":{"type":"assistant/message","seq":50,"data":{}}}],"hasMore":true}),
            Some(50) => serde_json::json!({"events":[{"event":{"type":"user/message","seq":40,
                "data":{"id":"m","role":"user","content":[],"source":{"kind":"user","rpcId":id}}}}],"hasMore":false}),
            Some(_) => serde_json::json!({"events":[],"hasMore":false}),
        },
    )
    .await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("rc8", None)).await;
    assert_eq!(
        out,
        Outcome::Accepted {
            dialect: Dialect::Rc8,
            recovery: Some(Recovery::FoundInHistory),
            ambiguity: Some(Unclear::NotAResponse {
                body: "{\"type\":\"server-resp".into()
            }),
        }
    );
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn rc8_lookup_not_found_resends_once_and_is_accepted() {
    let (base, log) = serve_route(
        "/api/session.history",
        || Act::Reply(200, EMPTY_HISTORY.into()),
        |n| if n == 0 { Act::Close } else { ok_accepted("x") },
    )
    .await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("rc8", None)).await;
    assert!(accepted_after(&out, Recovery::Resent), "{out:?}");
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[tokio::test]
async fn rc8_lookup_failure_means_no_resend() {
    let (base, log) = serve_route(
        "/api/session.history",
        || Act::Reply(500, "handler failure".into()),
        |_| Act::Reset,
    )
    .await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("rc8", None)).await;
    let Outcome::Failed(Failure::MayHaveLanded(u)) = &out else {
        panic!("{out:?}")
    };
    assert!(is_reset(&u.first), "{u:?}");
    assert_eq!(u.then, Then::LookupFailed(LookupError::Status(500)));
    assert_eq!(
        log.lock().unwrap().len(),
        2,
        "prompt + history, never a blind resend"
    );
}

#[tokio::test]
async fn v2_reset_after_read_resends_with_the_same_request_id() {
    let (base, log) = serve(|n, _| if n == 0 { Act::Reset } else { ok_accepted("x") }).await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("v2", Some(SECRET_B64))).await;
    assert!(accepted_after(&out, Recovery::Resent), "{out:?}");
    let reqs = log.lock().unwrap().clone();
    assert_eq!(reqs.len(), 2);
    assert!(reqs.iter().all(|r| r.path == "/api/session/prompt"));
    let ids: Vec<serde_json::Value> = reqs
        .iter()
        .map(|r| r.json()["payload"]["args"]["request"]["requestId"].clone())
        .collect();
    assert_eq!(ids[0], ids[1], "dedup relies on the same requestId");
    assert_eq!(ids[0], f.request_id.as_str());
}

#[tokio::test]
async fn v2_still_ambiguous_after_resend_may_have_landed() {
    let (base, log) = serve(|_, _| Act::Reset).await;
    let f = Fixture::new(base);
    let out = deliver(&f.delivery("v2", Some(SECRET_B64))).await;
    let Outcome::Failed(Failure::MayHaveLanded(u)) = &out else {
        panic!("{out:?}")
    };
    assert!(is_reset(&u.first), "{u:?}");
    assert!(
        matches!(&u.then, Then::ResendUnclear(w) if is_reset(w)),
        "{u:?}"
    );
    assert_eq!(log.lock().unwrap().len(), 2, "exactly one resend");
}

#[tokio::test]
async fn auto_probes_host_describe_200_means_rc8() {
    let (base, log) = serve_route(
        "/api/host.describe",
        || Act::Reply(200, r#"{"type":"server-response","rpcId":"d","result":{"ok":true,"value":{"version":"0.0.1"}}}"#.into()),
        |_| ok_accepted("x"),
    )
    .await;
    let f = Fixture::new(base);
    assert!(accepted_plain(&deliver(&f.delivery("auto", None)).await));
    assert!(accepted_plain(&deliver(&f.delivery("auto", None)).await));
    assert_eq!(
        paths(&log),
        [
            "/api/host.describe",
            "/api/session.prompt",
            "/api/session.prompt"
        ],
        "probe cached"
    );
    let probe = log.lock().unwrap()[0].clone();
    assert_eq!(probe.header("cookie"), None);
    assert_eq!(probe.json()["method"], "host.describe");
}

#[tokio::test]
async fn auto_probe_401_means_v2() {
    let (base, log) = serve_route(
        "/api/host.describe",
        || Act::Reply(401, "unauthorized".into()),
        |_| ok_accepted("x"),
    )
    .await;
    let f = Fixture::new(base);
    assert!(accepted_plain(
        &deliver(&f.delivery("auto", Some(SECRET_B64))).await
    ));
    assert_eq!(paths(&log), ["/api/host.describe", "/api/session/prompt"]);
}

#[tokio::test]
async fn auto_with_version_skips_the_probe_and_switches_once_on_401() {
    // version says rc.8 but the host wants a cookie: one switch to v2, nothing delivered twice
    let (base, log) = serve_route(
        "/api/session/prompt",
        || ok_accepted("x"),
        |_| Act::Reply(401, "unauthorized".into()),
    )
    .await;
    let f = Fixture::new(base);
    let mut d = f.delivery("auto", Some(SECRET_B64));
    d.host_version = Some("0.1.0-rc.8");
    assert!(accepted_plain(&deliver(&d).await));
    assert_eq!(paths(&log), ["/api/session.prompt", "/api/session/prompt"]);
}

#[test]
fn event_matching() {
    let id = "dsh-session-mail:1";
    let ev = |v: serde_json::Value| v;
    assert!(event_carries(
        &ev(serde_json::json!({"type":"user/message","data":{"source":{"rpcId":id}}})),
        id
    ));
    assert!(event_carries(
        &ev(serde_json::json!({"type":"user/message","data":{"message":{"source":{"rpcId":id}}}})),
        id
    ));
    assert!(event_carries(
        &ev(
            serde_json::json!({"type":"agent/inbox/spliced","data":{"inserted":[{"source":{"rpcId":"other"}},{"source":{"rpcId":id}}]}})
        ),
        id
    ));
    assert!(!event_carries(
        &ev(serde_json::json!({"type":"assistant/message","data":{"source":{"rpcId":id}}})),
        id
    ));
    assert!(!event_carries(
        &ev(
            serde_json::json!({"type":"user/message","data":{"source":{"rpcId":"dsh-session-mail:2"}}})
        ),
        id
    ));
}
