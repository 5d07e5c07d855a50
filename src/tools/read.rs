//! `read` tool (stub, to be written).
use crate::request::ToolRequest;

pub async fn run(_req: &ToolRequest) -> String {
    "refused: not implemented yet".to_string()
}
