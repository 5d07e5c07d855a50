//! The four tools, as plain async Rust: request in, typed result out ([`ToolResult`]); `render`
//! makes the text the model sees. A tool never fails at the model: a refusal is a result too.

pub mod args;
pub mod list;
pub mod read;
pub mod send;

use crate::outcome::{Refusal, SendResult};
use crate::request::ToolRequest;

pub use crate::tool::Tool;

/// What one tool call ended in, before rendering.
#[derive(Debug, Clone)]
pub enum ToolResult {
    List(list::Selection),
    Read(read::ReadResult),
    Send(SendResult),
    Refused(Refusal),
}

impl ToolResult {
    /// The refusal code, when the call was refused (a send that may have landed: `unreachable`).
    pub fn code(&self) -> Option<crate::outcome::RefusalCode> {
        match self {
            ToolResult::Send(s) => s.code(),
            ToolResult::Refused(r) => Some(r.code()),
            _ => None,
        }
    }
}

/// Run one tool call and return its result as data.
pub async fn run_result(req: ToolRequest) -> ToolResult {
    begin(req).result().await
}

/// A tool call begun ([`begin`]): a send's checks are on the blocking pool already.
pub enum Begun {
    Send(Box<send::Begun>),
    List(Box<ToolRequest>),
    Read(Box<ToolRequest>),
    Unknown(String),
}

/// Begin one tool call. A send starts its checks on the blocking pool now (`send::begin`); called
/// inside a tokio runtime's context (the binding enters napi's), else they run inline. Every other
/// tool starts when [`Begun::result`] is awaited.
pub fn begin(req: ToolRequest) -> Begun {
    match Tool::parse(&req.tool) {
        Some(Tool::SessionsSend | Tool::SendSessionMessage) => {
            let ctx = send::Context::of(&req);
            Begun::Send(Box::new(send::begin(std::sync::Arc::new(req), ctx)))
        }
        Some(Tool::SessionsList) => Begun::List(Box::new(req)),
        Some(Tool::SessionsRead) => Begun::Read(Box::new(req)),
        None => Begun::Unknown(req.tool),
    }
}

impl Begun {
    /// The call's result as data.
    pub async fn result(self) -> ToolResult {
        match self {
            Begun::Send(s) => ToolResult::Send(s.finish().await),
            Begun::List(req) => list::run_result(&req)
                .await
                .map_or_else(ToolResult::Refused, ToolResult::List),
            Begun::Read(req) => read::run_result(&req)
                .await
                .map_or_else(ToolResult::Refused, ToolResult::Read),
            Begun::Unknown(name) => ToolResult::Refused(Refusal::UnknownTool { name }),
        }
    }
}

/// Run blocking store work off the async executor; a panic there becomes `refused (internal)`.
pub async fn blocking<T, F>(f: F) -> Result<T, Refusal>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // With a deadline (issue 11 #3): a stuck file system under DSH_HOME answers this call with a
    // readable failure instead of holding it forever; other calls are never held up (blocking pool).
    base::offload::run(STORE_DEADLINE, f)
        .await
        .map_err(|e| Refusal::Internal {
            what: crate::outcome::Internal::Store(e),
        })
}

/// How long a listing or a read may take on the blocking pool (the bounds keep a hostile log well
/// under it; a hung network file system is what it catches).
pub const STORE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Read the JSON the shim sends. A lone UTF-16 surrogate (which JSON.stringify writes as an escape
/// serde_json refuses) never fails the call: in an argument it is a readable `bad-argument`
/// (`Ok(Err(refusal))`); anywhere else (a live agent's header, live events, the caller's title) it
/// is shown as U+FFFD. `Err`: the text is not a tool request at all (a binding misuse).
pub fn parse_request(request: &str) -> Result<Result<ToolRequest, Refusal>, NotARequest> {
    let Some(repaired) = base::utf16::repair_json(request) else {
        return serde_json::from_str(request).map(Ok).map_err(NotARequest);
    };
    let mut v: serde_json::Value = serde_json::from_str(&repaired).map_err(NotARequest)?;
    if let Some(path) = v.get("args").and_then(|a| base::utf16::find_lone(a, "")) {
        let name = if path.is_empty() {
            "the arguments".to_string()
        } else {
            path
        };
        return Ok(Err(Refusal::BadArgument {
            problems: vec![crate::outcome::ArgProblem::invalid(
                name,
                crate::outcome::Expected::ValidUnicode,
                crate::outcome::Got::LoneSurrogate,
                Some(crate::outcome::Hint::ReplaceSurrogate),
            )],
            usage: None,
        }));
    }
    base::utf16::replace_lone(&mut v);
    serde_json::from_value(v).map(Ok).map_err(NotARequest)
}

/// The shim's text is not a tool request (a binding misuse, `E_BAD_REQUEST`): serde_json's reason.
#[derive(Debug)]
pub struct NotARequest(pub serde_json::Error);

impl std::fmt::Display for NotARequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tool request is not valid JSON: {}", self.0)
    }
}

impl std::error::Error for NotARequest {}

#[cfg(test)]
mod tests {
    use crate::render::run_json;
    use store::testgen::{write_tree, LogBuilder};

    fn req(tool: &str, args: &str, home: &std::path::Path, extra: &str) -> String {
        format!(
            r#"{{"tool":"{tool}","args":{args},"caller":{{"sessionId":"session-me"}},"host":{{"dshHome":{home:?},"baseUrl":"http://127.0.0.1:9"}}{extra}}}"#,
            home = home.to_str().unwrap()
        )
    }

    #[tokio::test]
    async fn a_lone_surrogate_is_a_readable_bad_argument_or_a_replacement_character() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        // In an argument of every tool: bad-argument naming it, never "not valid JSON".
        for (tool, args, name) in [
            (
                "sessions_send",
                r#"{"session_id":"session-x","message":"hi \ud83d"}"#,
                "message",
            ),
            (
                "send_session_message",
                r#"{"toSessionId":"session-\udc00x","message":"hi"}"#,
                "toSessionId",
            ),
            ("sessions_read", r#"{"session_id":"s\ud800"}"#, "session_id"),
            ("sessions_list", r#"{"query":"\udfff"}"#, "query"),
        ] {
            let out = run_json(&req(tool, args, h, "")).await.unwrap();
            assert!(
                out.starts_with(&format!(
                    "refused (bad-argument): {name} must be valid Unicode text"
                )),
                "{tool}: {out}"
            );
        }
        // In a live agent's header: the call works, the character shows as U+FFFD.
        let live = r#","live":[{"id":"session-live","status":"idle","header":{"cwd":"/w\ud800x","agentPreset":"standard"}}]"#;
        let out = run_json(&req("sessions_list", r#"{}"#, h, live))
            .await
            .unwrap();
        assert!(out.contains("cwd=/w\u{FFFD}x"), "{out}");
        // In a log: the message is shown with U+FFFD, not as "the log changed while it was read".
        let mut b = LogBuilder::v0("session-sur", Some("/w"), 5);
        b.prompt("placeholder", "dsh-session-mail:1");
        b.flush();
        let text = b.text().replace("placeholder", "bad \\ud800 half");
        write_tree(
            h,
            &[(
                "sessions/--w--/session-sur/session.jsonl".into(),
                text.into_bytes(),
            )],
        );
        let out = run_json(&req(
            "sessions_read",
            r#"{"session_id":"session-sur"}"#,
            h,
            "",
        ))
        .await
        .unwrap();
        assert!(out.contains("bad \u{FFFD} half"), "{out}");
        assert!(!out.contains("text unavailable"), "{out}");
    }
}
