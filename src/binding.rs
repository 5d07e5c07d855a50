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

fn mode_of(mode: &str) -> Result<crate::delivery::Mode> {
    match mode {
        "queue" => Ok(crate::delivery::Mode::Queue),
        "steer" => Ok(crate::delivery::Mode::Steer),
        other => Err(to_napi(CoreError::new(ErrorCode::BadRequest, format!("mode must be queue or steer, got {other:?}")))),
    }
}

/// The browser-session cookie (`name=value`) for `authority` (`host:port`), issued at `nowMs`,
/// from the base64url secret. Used by the CLI and the tests; the tools mint their own.
#[napi(catch_unwind)]
pub fn mint_cookie(secret: String, authority: String, now_ms: f64) -> Result<String> {
    let secret = crate::delivery::credentials::Secret::from_b64url(&secret)
        .map_err(|why| to_napi(CoreError::new(ErrorCode::BadKey, why)))?;
    let authority = crate::delivery::cookie::normalize_authority(&authority)
        .ok_or_else(|| to_napi(CoreError::new(ErrorCode::BadRequest, "authority must be host[:port]")))?;
    Ok(crate::delivery::cookie::cookie_header(&secret, &authority, now_ms as i64))
}

/// The delivered body of `send_session_message`: the From header line and the message.
#[napi(catch_unwind)]
pub fn compose_message(sender_id: String, message: String) -> String {
    crate::mail::with_from_header(&sender_id, &message)
}

/// The `sessions_send` frame around `body`.
#[napi(catch_unwind)]
pub fn frame_message(sender_id: String, sender_title: Option<String>, mode: String, body: String) -> String {
    crate::mail::frame(&sender_id, sender_title.as_deref(), &mode, &body)
}

/// `null` when the body may be sent; otherwise why it is refused (a forged From header or frame line).
#[napi(catch_unwind)]
pub fn check_body(body: String) -> Option<String> {
    crate::mail::guard::check_body(&body).err().map(|f| format!("{f:?}"))
}

/// A fresh request id `dsh-session-mail:<uuid>`.
#[napi(catch_unwind)]
pub fn new_request_id() -> String {
    crate::mail::new_request_id()
}

/// The exact JSON body POSTed to the host route for `dialect` (`rc8` or `v2`).
/// For v2 `envelopeRpcId` is the plain envelope id; for rc8 the request id is the envelope id.
#[napi(catch_unwind)]
pub fn prompt_envelope(
    dialect: String,
    request_id: String,
    session_id: String,
    mode: String,
    text: String,
    envelope_rpc_id: Option<String>,
) -> Result<String> {
    let mode = mode_of(&mode)?;
    match dialect.as_str() {
        "rc8" => Ok(crate::delivery::envelope::rc8_prompt(&request_id, &session_id, mode, &text)),
        "v2" => {
            let env = envelope_rpc_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            Ok(crate::delivery::envelope::v2_prompt(&env, &request_id, &session_id, mode, &text))
        }
        other => Err(to_napi(CoreError::new(ErrorCode::BadRequest, format!("dialect must be rc8 or v2, got {other:?}")))),
    }
}
