//! Request bodies for both host generations, and the response reader.
//!
//! rc.8 [R8 `packages/host/apiproxy/src/fetch/handler.ts` `toFetchHandler` (path == method, envelope
//! `clientRequestSchema`), `api/sessions.schema.ts` `sessionPromptRequestSchema`, `sessionHistoryRequestSchema`;
//! `api-proxy.ts` `prompt` copies the ENVELOPE rpcId into `source.rpcId`]:
//!   `POST /api/session.prompt`
//!   `{"type":"client-request","rpcId":<marker>,"method":"session.prompt","payload":{"sessionId","mode","content":[{"type":"text","text"}]}}`
//!
//! v2 (0.1.2+) [Z17 `packages/client/connection/src/rpc-host.ts` `rpcFetchHandler`, `endpointFromPath`;
//! Z17 `packages/api/gateway/src/index.ts` `assertExactArguments` (args = `{request}`);
//! Z15 `packages/api/session-controller/src/types.ts` `SessionPromptRequest`; Z17 `commands.ts` `prompt` copies
//! `request.requestId` into `source.rpcId`]:
//!   `POST /api/session/prompt`
//!   `{"type":"client-request","rpcId":<uuid>,"method":"session/prompt","payload":{"args":{"request":{"requestId":<marker>,"sessionId","mode","content":[…]}}}}`
//!
//! Response (both): HTTP 200 `{"type":"server-response","rpcId","result":{"ok":true,"value"}|{"ok":false,"error":{"code","message","details"}}}`.

use serde::Serialize;
use serde_json::Value;

use super::Mode;

pub const RC8_PROMPT_PATH: &str = "/api/session.prompt";
pub const RC8_HISTORY_PATH: &str = "/api/session.history";
pub const RC8_DESCRIBE_PATH: &str = "/api/host.describe";
pub const V2_PROMPT_PATH: &str = "/api/session/prompt";

#[derive(Serialize)]
struct TextPart<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

#[derive(Serialize)]
struct Envelope<'a, P: Serialize> {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(rename = "rpcId")]
    rpc_id: &'a str,
    method: &'static str,
    payload: P,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rc8Prompt<'a> {
    session_id: &'a str,
    mode: &'static str,
    content: [TextPart<'a>; 1],
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct V2Request<'a> {
    request_id: &'a str,
    session_id: &'a str,
    mode: &'static str,
    content: [TextPart<'a>; 1],
}

#[derive(Serialize)]
struct V2Args<'a> {
    request: V2Request<'a>,
}

#[derive(Serialize)]
struct V2Payload<'a> {
    args: V2Args<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Rc8History<'a> {
    session_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    before_seq: Option<u64>,
    max_messages: u32,
}

#[derive(Serialize)]
struct Empty {}

fn to_json<T: Serialize>(v: &T) -> String {
    // Plain structs of strings and integers: serialization cannot fail.
    serde_json::to_string(v).unwrap_or_default()
}

/// rc.8 `session.prompt`; the marker rides on the envelope rpcId.
pub fn rc8_prompt(request_id: &str, session_id: &str, mode: Mode, text: &str) -> String {
    to_json(&Envelope {
        kind: "client-request",
        rpc_id: request_id,
        method: "session.prompt",
        payload: Rc8Prompt {
            session_id,
            mode: mode.as_str(),
            content: [TextPart { kind: "text", text }],
        },
    })
}

/// v2 `session/prompt`; the marker rides on `request.requestId`, the envelope rpcId is a plain UUID.
pub fn v2_prompt(
    envelope_rpc_id: &str,
    request_id: &str,
    session_id: &str,
    mode: Mode,
    text: &str,
) -> String {
    to_json(&Envelope {
        kind: "client-request",
        rpc_id: envelope_rpc_id,
        method: "session/prompt",
        payload: V2Payload {
            args: V2Args {
                request: V2Request {
                    request_id,
                    session_id,
                    mode: mode.as_str(),
                    content: [TextPart { kind: "text", text }],
                },
            },
        },
    })
}

/// rc.8 `session.history` (one page, newest first from `beforeSeq`).
pub fn rc8_history(
    rpc_id: &str,
    session_id: &str,
    before_seq: Option<u64>,
    max_messages: u32,
) -> String {
    to_json(&Envelope {
        kind: "client-request",
        rpc_id,
        method: "session.history",
        payload: Rc8History {
            session_id,
            before_seq,
            max_messages,
        },
    })
}

/// rc.8 `host.describe` with its empty payload (the generation probe).
pub fn rc8_describe(rpc_id: &str) -> String {
    to_json(&Envelope {
        kind: "client-request",
        rpc_id,
        method: "host.describe",
        payload: Empty {},
    })
}

/// A parsed `server-response`.
#[derive(Debug, Clone, PartialEq)]
pub enum RpcResult {
    Ok(Value),
    Err { code: String, message: String },
}

/// Read a `server-response` body; `None` when it is not one (a garbled answer).
pub fn parse_response(body: &str) -> Option<RpcResult> {
    let v: Value = serde_json::from_str(body).ok()?;
    let result = v.get("result")?;
    match result.get("ok")?.as_bool()? {
        true => Some(RpcResult::Ok(
            result.get("value").cloned().unwrap_or(Value::Null),
        )),
        false => {
            let err = result.get("error")?;
            let code = err
                .get("code")
                .and_then(Value::as_str)
                .unwrap_or("unknown")
                .to_string();
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some(RpcResult::Err { code, message })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rc8_prompt_exact_json() {
        let body = rc8_prompt(
            "dsh-session-mail:0b6c",
            "session-t",
            Mode::Queue,
            "From a \u{FF1A}\nhi \"x\"",
        );
        assert_eq!(
            body,
            r#"{"type":"client-request","rpcId":"dsh-session-mail:0b6c","method":"session.prompt","payload":{"sessionId":"session-t","mode":"queue","content":[{"type":"text","text":"From a ：\nhi \"x\""}]}}"#
        );
    }

    #[test]
    fn v2_prompt_exact_json() {
        let body = v2_prompt(
            "8a1e",
            "dsh-session-mail:0b6c",
            "session-t",
            Mode::Steer,
            "hi",
        );
        assert_eq!(
            body,
            r#"{"type":"client-request","rpcId":"8a1e","method":"session/prompt","payload":{"args":{"request":{"requestId":"dsh-session-mail:0b6c","sessionId":"session-t","mode":"steer","content":[{"type":"text","text":"hi"}]}}}}"#
        );
    }

    #[test]
    fn rc8_history_and_describe_exact_json() {
        assert_eq!(
            rc8_history("r1", "session-t", None, 200),
            r#"{"type":"client-request","rpcId":"r1","method":"session.history","payload":{"sessionId":"session-t","maxMessages":200}}"#
        );
        assert_eq!(
            rc8_history("r1", "session-t", Some(41), 200),
            r#"{"type":"client-request","rpcId":"r1","method":"session.history","payload":{"sessionId":"session-t","beforeSeq":41,"maxMessages":200}}"#
        );
        assert_eq!(
            rc8_describe("r2"),
            r#"{"type":"client-request","rpcId":"r2","method":"host.describe","payload":{}}"#
        );
    }

    #[test]
    fn responses() {
        assert_eq!(
            parse_response(
                r#"{"type":"server-response","rpcId":"x","result":{"ok":true,"value":{"accepted":true}}}"#
            ),
            Some(RpcResult::Ok(serde_json::json!({"accepted": true})))
        );
        assert_eq!(
            parse_response(
                r#"{"type":"server-response","rpcId":"x","result":{"ok":false,"error":{"code":"session/not-found","message":"no such session","details":{}}}}"#
            ),
            Some(RpcResult::Err {
                code: "session/not-found".into(),
                message: "no such session".into()
            })
        );
        assert_eq!(parse_response("handler failure: boom"), None);
        assert_eq!(parse_response(r#"{"result":{}}"#), None);
        assert_eq!(parse_response(r#"{"type":"server-res"#), None);
    }
}
