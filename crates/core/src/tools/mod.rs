//! The four tools, as plain async Rust: request in, typed result out ([`ToolResult`]), rendered once
//! into the text the model sees. A tool never fails at the model: a refusal is a result too.

pub mod args;
pub mod list;
pub mod read;
pub mod send;

use crate::outcome::{Refusal, SendResult};
use crate::request::ToolRequest;

/// The tools this plugin provides (names are stable: the model calls them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Tool {
    SessionsList,
    SessionsRead,
    SessionsSend,
    SendSessionMessage,
}

impl Tool {
    pub const ALL: [Tool; 4] = [
        Tool::SessionsList,
        Tool::SessionsRead,
        Tool::SessionsSend,
        Tool::SendSessionMessage,
    ];

    pub fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Tool::SessionsList => "sessions_list",
            Tool::SessionsRead => "sessions_read",
            Tool::SessionsSend => "sessions_send",
            Tool::SendSessionMessage => "send_session_message",
        }
    }
}

/// What one tool call ended in, before rendering.
#[derive(Debug, Clone)]
pub enum ToolResult {
    List(list::Selection),
    Read(read::ReadResult),
    Send(SendResult),
    Refused(Refusal),
}

impl ToolResult {
    /// The text the model sees.
    pub fn render(&self) -> String {
        match self {
            ToolResult::List(s) => s.render(),
            ToolResult::Read(r) => r.render(),
            ToolResult::Send(s) => s.render(),
            ToolResult::Refused(r) => r.render(),
        }
    }

    /// The refusal code, when the call was refused (a send that may have landed: `unreachable`).
    pub fn code(&self) -> Option<&'static str> {
        match self {
            ToolResult::Send(s) => s.code(),
            ToolResult::Refused(r) => Some(r.code()),
            _ => None,
        }
    }
}

/// Run one tool call and return its result as data.
pub async fn run_result(req: ToolRequest) -> ToolResult {
    match Tool::parse(&req.tool) {
        Some(Tool::SessionsList) => list::run_result(&req)
            .await
            .map_or_else(ToolResult::Refused, ToolResult::List),
        Some(Tool::SessionsRead) => read::run_result(&req)
            .await
            .map_or_else(ToolResult::Refused, ToolResult::Read),
        Some(Tool::SessionsSend | Tool::SendSessionMessage) => {
            ToolResult::Send(send::run_result(&req).await)
        }
        None => ToolResult::Refused(Refusal::UnknownTool { name: req.tool }),
    }
}

/// Run one tool call and return the text the model sees.
pub async fn run(req: ToolRequest) -> String {
    run_result(req).await.render()
}

/// Run blocking store work off the async executor; a panic there becomes `refused (internal)`.
pub async fn blocking<T, F>(f: F) -> Result<T, Refusal>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let failed = || Refusal::Internal {
        what: "internal error while reading the session store".into(),
    };
    match tokio::runtime::Handle::try_current() {
        Ok(h) => h.spawn_blocking(f).await.map_err(|_| failed()),
        Err(_) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| failed()),
    }
}
