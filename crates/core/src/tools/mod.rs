//! The four tools, as plain async Rust: request in, text out. A tool never fails at the
//! model: every outcome (including a refusal) is the returned text.

pub mod list;
pub mod read;
pub mod send;

use crate::request::ToolRequest;

/// Run one tool call and return the text the model sees.
pub async fn run(req: ToolRequest) -> String {
    match req.tool.as_str() {
        "sessions_list" => list::run(&req).await,
        "sessions_read" => read::run(&req).await,
        "sessions_send" | "send_session_message" => send::run(&req).await,
        other => format!(
            "refused: unknown tool {other:?}. This plugin provides sessions_list, sessions_read, sessions_send and send_session_message."
        ),
    }
}
