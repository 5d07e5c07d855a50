//! The only file with napi types: argument conversion and error mapping, no logic.
//! Sync exports use `catch_unwind` so a panic can never abort the host process; a panic in an
//! async export already becomes a rejected Promise.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::error::{CoreError, ErrorCode};

fn to_napi(e: CoreError) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{}: {}", e.code, e.message))
}

/// Run one tool call. `request` is the JSON of `request::ToolRequest`; the result is the text
/// the model sees (a receipt, a listing, a window, or a readable refusal).
#[napi]
pub async fn run_tool(request: String) -> Result<String> {
    let req: crate::request::ToolRequest = serde_json::from_str(&request).map_err(|e| {
        to_napi(CoreError::new(ErrorCode::BadRequest, format!("tool request is not valid JSON: {e}")))
    })?;
    Ok(crate::tools::run(req).await)
}

/// The crate version (the shim checks that the binary matches its package).
#[napi(catch_unwind)]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}
