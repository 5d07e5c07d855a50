//! The only file with napi types: argument conversion and error mapping, no logic.
//! Sync exports use `catch_unwind` so a panic can never abort the host process; a panic in an
//! async export already becomes a rejected Promise.

use napi::bindgen_prelude::*;
use napi_derive::napi;

use dsh_session_mail_core as mail_core;
use mail_core::error::{CoreError, ErrorCode};

fn to_napi(e: CoreError) -> napi::Error {
    napi::Error::new(Status::GenericFailure, format!("{}: {}", e.code, e.message))
}

/// Run one tool call. `request` is the JSON of `request::ToolRequest`; the result is the text
/// the model sees (a receipt, a listing, a window, or a readable refusal).
#[napi]
pub async fn run_tool(request: String) -> Result<String> {
    let req: mail_core::request::ToolRequest = serde_json::from_str(&request).map_err(|e| {
        to_napi(CoreError::new(
            ErrorCode::BadRequest,
            format!("tool request is not valid JSON: {e}"),
        ))
    })?;
    Ok(mail_core::tools::run(req).await)
}

/// The crate version (the shim checks that the binary matches its package).
#[napi(catch_unwind)]
pub fn core_version() -> String {
    env!("CARGO_PKG_VERSION").to_string()
}

fn mode_of(mode: &str) -> Result<mail_core::delivery::Mode> {
    match mode {
        "queue" => Ok(mail_core::delivery::Mode::Queue),
        "steer" => Ok(mail_core::delivery::Mode::Steer),
        other => Err(to_napi(CoreError::new(
            ErrorCode::BadRequest,
            format!("mode must be queue or steer, got {other:?}"),
        ))),
    }
}

/// The browser-session cookie (`name=value`) for `authority` (`host:port`), issued at `nowMs`,
/// from the base64url secret. Used by the CLI and the tests; the tools mint their own.
#[napi(catch_unwind)]
pub fn mint_cookie(secret: String, authority: String, now_ms: f64) -> Result<String> {
    let secret = mail_core::delivery::credentials::Secret::from_b64url(&secret)
        .map_err(|why| to_napi(CoreError::new(ErrorCode::BadKey, why)))?;
    let authority =
        mail_core::delivery::cookie::normalize_authority(&authority).ok_or_else(|| {
            to_napi(CoreError::new(
                ErrorCode::BadRequest,
                "authority must be host[:port]",
            ))
        })?;
    Ok(mail_core::delivery::cookie::cookie_header(
        &secret,
        &authority,
        now_ms as i64,
    ))
}

/// The delivered body of `send_session_message`: the From header line and the message.
#[napi(catch_unwind)]
pub fn compose_message(sender_id: String, message: String) -> String {
    mail_core::mail::with_from_header(&sender_id, &message)
}

/// The `sessions_send` frame around `body`.
#[napi(catch_unwind)]
pub fn frame_message(
    sender_id: String,
    sender_title: Option<String>,
    mode: String,
    body: String,
) -> String {
    mail_core::mail::frame(&sender_id, sender_title.as_deref(), &mode, &body)
}

/// `null` when the body may be sent; otherwise why it is refused (a forged From header or frame line).
#[napi(catch_unwind)]
pub fn check_body(body: String) -> Option<String> {
    mail_core::mail::guard::check_body(&body)
        .err()
        .map(|f| format!("{f:?}"))
}

/// A fresh request id `dsh-session-mail:<uuid>`.
#[napi(catch_unwind)]
pub fn new_request_id() -> String {
    mail_core::mail::new_request_id()
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
        "rc8" => Ok(mail_core::delivery::envelope::rc8_prompt(
            &request_id,
            &session_id,
            mode,
            &text,
        )),
        "v2" => {
            let env = envelope_rpc_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
            Ok(mail_core::delivery::envelope::v2_prompt(
                &env,
                &request_id,
                &session_id,
                mode,
                &text,
            ))
        }
        other => Err(to_napi(CoreError::new(
            ErrorCode::BadRequest,
            format!("dialect must be rc8 or v2, got {other:?}"),
        ))),
    }
}

// ---- the command line (bin/dsh-session-mail.mjs); logic in `cli_support` ----

fn parse<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| {
        to_napi(CoreError::new(
            ErrorCode::BadRequest,
            format!("{what} is not valid JSON: {e}"),
        ))
    })
}

/// Run blocking store work off the executor; a panic there becomes the refusal as JSON.
async fn blocking<F>(f: F) -> String
where
    F: FnOnce() -> String + Send + 'static,
{
    mail_core::tools::blocking(f)
        .await
        .unwrap_or_else(|r| mail_core::cli::data::refusal_value(&r).to_string())
}

fn home_of(explicit: Option<&str>) -> std::path::PathBuf {
    mail_core::store::resolve_dsh_home(explicit)
}

/// DSH_HOME as the host resolves it: `explicit` → `$DSH_HOME` → `~/.dsh`.
#[napi(catch_unwind)]
pub fn resolve_dsh_home(explicit: Option<String>) -> String {
    home_of(explicit.as_deref()).display().to_string()
}

/// The host's session directory key for a project path (`null` for an empty path).
#[napi(catch_unwind)]
pub fn project_key(cwd: String) -> Option<String> {
    mail_core::cli::sender::project_key(&cwd)
}

/// `{ok:true, id, logPath, modifiedMs, project}` — the newest top-level session of `cwd`'s project —
/// or `{ok:false, error, project}`.
#[napi(catch_unwind)]
pub fn default_sender_json(dsh_home: Option<String>, cwd: String) -> String {
    let home = home_of(dsh_home.as_deref());
    let project = mail_core::cli::sender::project_key(&cwd);
    let v = match mail_core::cli::sender::default_sender(&home, &cwd) {
        Ok(s) => {
            serde_json::json!({"ok": true, "id": s.id, "logPath": s.log_path.display().to_string(), "modifiedMs": s.modified_ms, "project": project})
        }
        Err(e) => serde_json::json!({"ok": false, "error": e, "project": project}),
    };
    v.to_string()
}

/// `sessions_list` as JSON data; `request` is a ToolRequest (tool `sessions_list`).
#[napi]
pub async fn list_sessions_json(request: String) -> Result<String> {
    let req: mail_core::request::ToolRequest = parse(&request, "list request")?;
    let home = home_of(req.host.dsh_home.as_deref());
    Ok(blocking(move || mail_core::cli::data::list_value(&home, &req).to_string()).await)
}

/// `sessions_read` of a stored session as JSON data; `request` is a ToolRequest (tool `sessions_read`).
#[napi]
pub async fn read_session_json(request: String) -> Result<String> {
    let req: mail_core::request::ToolRequest = parse(&request, "read request")?;
    let home = home_of(req.host.dsh_home.as_deref());
    Ok(blocking(move || mail_core::cli::data::read_value(&home, &req).to_string()).await)
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct VerifyRequest {
    dsh_home: Option<String>,
    request_id: String,
    session_id: Option<String>,
}

/// Where a request id is: `{state: landed|queued|canceled|unknown, sessionId, seq, turn|target, searched}`.
/// `request` is `{dshHome?, requestId, sessionId?}`.
#[napi]
pub async fn verify_request_json(request: String) -> Result<String> {
    let r: VerifyRequest = parse(&request, "verify request")?;
    let home = home_of(r.dsh_home.as_deref());
    Ok(blocking(move || {
        let v = mail_core::fate::verify(&home, &r.request_id, r.session_id.as_deref());
        mail_core::fate::verification_value(&v, &r.request_id).to_string()
    })
    .await)
}

/// Run a send tool and describe the outcome: `{accepted, code, mayHaveLanded, requestId, text}`.
#[napi]
pub async fn send_json(request: String) -> Result<String> {
    let req: mail_core::request::ToolRequest = parse(&request, "send request")?;
    Ok(mail_core::cli::data::send_value(req).await.to_string())
}

#[derive(serde::Deserialize)]
struct LayerJson {
    label: String,
    text: Option<String>,
}

/// The cordis patch layers' verdict on one row: `{inserted, disabled, disabledBy, configEnabled, errors, notes}`.
/// `layers` is `[{label, text|null}]` in the host's order (bundle patches, profile, home).
#[napi(catch_unwind)]
pub fn patch_row_state_json(layers: String, row_id: String, module: String) -> Result<String> {
    let layers: Vec<LayerJson> = parse(&layers, "patch layers")?;
    let layers: Vec<mail_core::doctor::patch::Layer> = layers
        .into_iter()
        .map(|l| mail_core::doctor::patch::Layer {
            label: l.label,
            text: l.text,
        })
        .collect();
    Ok(mail_core::doctor::patch::row_state(&layers, &row_id, &module).to_string())
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthProbeRequest {
    base_url: String,
    dsh_home: Option<String>,
    connect_timeout_ms: Option<u64>,
    request_timeout_ms: Option<u64>,
}

/// Is a cookie minted from `$DSH_HOME/.credentials.yaml` accepted by the host at `baseUrl`?
/// `{state: ok|rejected|forbidden|no-secret|unreachable|bad-url, status?, detail?}`; never the secret.
#[napi]
pub async fn auth_probe_json(request: String) -> Result<String> {
    let r: AuthProbeRequest = parse(&request, "auth probe request")?;
    let home = home_of(r.dsh_home.as_deref());
    let t = mail_core::delivery::http::Timeouts::from_ms(
        r.connect_timeout_ms.unwrap_or(2000),
        r.request_timeout_ms.unwrap_or(5000),
    );
    Ok(
        mail_core::doctor::auth_probe::auth_probe(&r.base_url, &home, None, t)
            .await
            .to_string(),
    )
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct LedgerRequest {
    dsh_home: Option<String>,
    session: Option<String>,
    since_ms: Option<f64>,
    limit: Option<usize>,
}

/// The audit ledger as JSON; `request` is `{dshHome?, session?, sinceMs?, limit?}`.
#[napi]
pub async fn read_ledger_json(request: String) -> Result<String> {
    let r: LedgerRequest = parse(&request, "ledger request")?;
    let home = home_of(r.dsh_home.as_deref());
    let filter = mail_core::ledger::Filter {
        session: r.session,
        since_ms: r.since_ms.map(|v| v as i64),
        limit: r.limit,
        ..Default::default()
    };
    Ok(blocking(move || mail_core::cli::data::ledger_value(&home, &filter).to_string()).await)
}
