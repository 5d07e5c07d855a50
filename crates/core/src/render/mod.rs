//! The exact text of every result and refusal: the only place outcomes become text. Printers over
//! the typed results of the layers below (`tools`, `outcome`, `fate`, `mail::notice`); nothing below
//! names a printer.

pub mod fate;
pub mod ledger;
pub mod list;
pub mod notice;
pub mod read;
pub mod refusal;
pub mod remote;
pub mod send;

use crate::request::ToolRequest;
use crate::tools::{self, ToolResult};

impl ToolResult {
    /// The text the model sees.
    pub fn render(&self) -> String {
        match self {
            ToolResult::List(s) => s.render(),
            ToolResult::Read(r) => r.render(),
            // Host text is scrubbed where it is quoted; this pass is the last line of defence.
            ToolResult::Send(s) => base::scrub::scrub(&s.render()),
            ToolResult::Refused(r) => r.render(),
        }
    }
}

/// Run one tool call and return the text the model sees.
pub async fn run(req: ToolRequest) -> String {
    tools::run_result(req).await.render()
}

/// [`tools::parse_request`] and [`run`]: the text of one call from the shim's JSON.
pub async fn run_json(request: &str) -> Result<String, tools::NotARequest> {
    Ok(match tools::parse_request(request)? {
        Ok(req) => run(req).await,
        Err(refusal) => refusal.render(),
    })
}
