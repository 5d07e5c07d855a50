//! Logical layer: the header line and the event envelope, parsed without copying payloads.
//!
//! Envelope `{type, seq, time, data, ignorable?, surfaceOp?, sourceEventSeqs?}`
//! [R8 and Z17 `packages/core/session/src/types.ts` `SessionEvent`]. rc.8 also stores packed
//! chunk rows `{type:'text-chunks'|'reasoning-chunks'|'tool-call-chunks', seq0, time0, data}` that
//! expand to one event per member [R8 `packages/core/session/src/chunk-rows.ts` `decodeStorageRecord`].

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::HeaderError;

/// The session header (first line), any format version V0–V4.
/// V0: `{type:'session', version, id, createdAt, cwd?, parentSession?, seedLength?, origin?, delegationDepth, agentPreset?}`
/// [R8 `packages/session/session-persistence-jsonl/src/format.ts` `HeaderLine`];
/// V4: `seedLength` gone, `isSeeded` added [Z17 same file `HEADER_REQUIRED_KEYS`, `HEADER_OPTIONAL_KEYS`].
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Header {
    pub version: Option<i64>,
    pub id: String,
    pub created_at: Option<i64>,
    pub cwd: Option<String>,
    pub parent_session: Option<String>,
    pub origin: Option<String>,
    pub agent_preset: Option<String>,
    pub seed_length: Option<u64>,
    pub is_seeded: Option<bool>,
}

/// The one subagent test: a session whose header says `origin: "subagent"`. A header with
/// `parentSession` but no origin is a fork, which the host treats as top-level and accepts prompts
/// for [R8/Z17 `session-controller/src/agent.ts`].
pub fn is_subagent_origin(origin: Option<&str>) -> bool {
    origin == Some("subagent")
}

impl Header {
    /// See [`is_subagent_origin`].
    pub fn is_subagent(&self) -> bool {
        is_subagent_origin(self.origin.as_deref())
    }

    /// Parse a header line. Err: why it is no session header.
    pub fn parse(line: &[u8]) -> Result<Header, HeaderError> {
        let v: Value = serde_json::from_slice(line).map_err(|e| {
            if std::str::from_utf8(line).is_err() {
                HeaderError::NotUtf8
            } else {
                HeaderError::NotJson(e.to_string().into())
            }
        })?;
        if v.get("type").and_then(Value::as_str) != Some("session") {
            return Err(HeaderError::NotSessionHeader);
        }
        let id = v
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .ok_or(HeaderError::NoId)?;
        Ok(Header::from_value(&v, id))
    }

    /// Build from a header object (a file header line, or the live header the shim sends).
    pub fn from_value(v: &Value, id: &str) -> Header {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        Header {
            version: v.get("version").and_then(Value::as_i64),
            id: id.to_string(),
            created_at: v
                .get("createdAt")
                .and_then(|x| x.as_i64().or_else(|| x.as_f64().map(|f| f as i64))),
            cwd: s("cwd"),
            parent_session: s("parentSession"),
            origin: s("origin"),
            agent_preset: s("agentPreset"),
            seed_length: v.get("seedLength").and_then(Value::as_u64),
            is_seeded: v.get("isSeeded").and_then(Value::as_bool),
        }
    }
}

/// One log row, payload left raw.
#[derive(Debug, Deserialize)]
pub struct Envelope<'a> {
    #[serde(rename = "type", borrow)]
    pub ty: Cow<'a, str>,
    #[serde(default)]
    pub seq: Option<u64>,
    /// Packed chunk rows anchor their first member here.
    #[serde(default)]
    pub seq0: Option<u64>,
    #[serde(default, borrow)]
    pub data: Option<&'a RawValue>,
    #[serde(default, rename = "surfaceOp")]
    pub surface_op: Option<Value>,
}

/// `SurfaceOp`: `'append'` | `{op:'replace', start, end}` (rc.8) | `{op:'replace', startSeq, endSeq}` (V4)
/// [R8 `packages/core/session/src/surface.ts` `isReplaceOp`; Z17 same file `isReplaceOp` (startSeq/endSeq)].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SurfaceOp {
    Append,
    Replace { start: u64, end: u64 },
}

impl SurfaceOp {
    pub fn parse(v: &Value) -> Option<SurfaceOp> {
        if v.as_str() == Some("append") {
            return Some(SurfaceOp::Append);
        }
        if v.get("op").and_then(Value::as_str) != Some("replace") {
            return None;
        }
        let get = |a: &str, b: &str| v.get(a).or_else(|| v.get(b)).and_then(Value::as_u64);
        Some(SurfaceOp::Replace {
            start: get("start", "startSeq")?,
            end: get("end", "endSeq")?,
        })
    }
}

/// The message types that can sit on the model surface. rc.8: user, assistant, tool
/// [R8 `surface.ts` `SURFACE_EVENT_TYPES`]; V4 adds system and developer [Z17 same].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    Tool,
    System,
    Developer,
}

impl Role {
    pub fn of_event(ty: &str) -> Option<Role> {
        Some(match ty {
            "user/message" => Role::User,
            "assistant/message" => Role::Assistant,
            "tool/result" => Role::Tool,
            "system/message" => Role::System,
            "developer/message" => Role::Developer,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::System => "system",
            Role::Developer => "developer",
        }
    }
}

/// `MessageSource` fields we look at. rc.8: `{kind:'user', rpcId}`, `{kind:'plugin', plugin, form?}`,
/// `{kind:'model', provider, model}`, `{kind:'tool', callId}` [R8 `packages/llm/llm/src/message.ts` `MessageSourceMap`];
/// V4: the producer's own kind (`runtime-context`, `compact-checkpoint`, …) keeping `form`
/// [Z17 `packages/session/session-format-v3-to-v4/src/sources.ts` `rewritePluginSource`].
#[derive(Debug, Default, Deserialize)]
pub struct SourceLite<'a> {
    #[serde(default, borrow)]
    pub kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub plugin: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub form: Option<Cow<'a, str>>,
    #[serde(default, rename = "rpcId", borrow)]
    pub rpc_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "callId", borrow)]
    pub call_id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub provider: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub model: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct BlockLite<'a> {
    #[serde(rename = "type", default, borrow)]
    pub ty: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    #[serde(default, rename = "toolCallId", borrow)]
    pub tool_call_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "isError")]
    pub is_error: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub struct MessageLite<'a> {
    #[serde(default, borrow)]
    pub role: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub content: Vec<BlockLite<'a>>,
    #[serde(default, borrow)]
    pub source: SourceLite<'a>,
    #[serde(default, rename = "toolCallId", borrow)]
    pub tool_call_id: Option<Cow<'a, str>>,
    #[serde(default, rename = "isError")]
    pub is_error: Option<bool>,
}

/// `assistant/message`, `tool/result`, `system/message`, `developer/message` carry `{turn, step, message}`.
#[derive(Debug, Deserialize)]
pub struct Wrapped<'a> {
    #[serde(borrow)]
    pub message: MessageLite<'a>,
}

#[derive(Debug, Deserialize)]
pub struct TitleData {
    pub title: String,
}

#[derive(Debug, Deserialize)]
pub struct TurnData {
    #[serde(default)]
    pub turn: Option<u64>,
}

/// `agent/inbox/spliced {target, start, removedCount?, inserted[], outcome?}`
/// [R8 `packages/core/agent/src/inbox.ts`; Z17 `packages/core/agent-loop/src/inbox.ts` `mutate`].
#[derive(Debug, Deserialize)]
pub struct SpliceData<'a> {
    #[serde(borrow)]
    pub target: Cow<'a, str>,
    #[serde(default)]
    pub start: u64,
    #[serde(default, rename = "removedCount")]
    pub removed_count: u64,
    #[serde(default, borrow)]
    pub inserted: Vec<InsertedLite<'a>>,
    #[serde(default, borrow)]
    pub outcome: Option<Cow<'a, str>>,
}

#[derive(Debug, Deserialize)]
pub struct InsertedLite<'a> {
    #[serde(default, borrow)]
    pub source: SourceLite<'a>,
}

/// `session/end-seed {inherited?: true}`: the LAST tagged marker is the fork cut
/// [Z17 `packages/core/session/src/types.ts` `'session/end-seed'` doc].
#[derive(Debug, Deserialize)]
pub struct EndSeedData {
    #[serde(default)]
    pub inherited: Option<bool>,
}

/// Member count of a packed chunk row (`texts` for text/reasoning rows, `args` for tool-call rows)
/// [R8 `chunk-rows.ts` `TextRunData`, `ToolCallRunData`].
#[derive(Debug, Deserialize)]
pub struct ChunkRowData {
    #[serde(default)]
    pub texts: Option<Vec<serde::de::IgnoredAny>>,
    #[serde(default)]
    pub args: Option<Vec<serde::de::IgnoredAny>>,
}

impl ChunkRowData {
    pub fn members(&self) -> usize {
        self.texts
            .as_ref()
            .or(self.args.as_ref())
            .map_or(0, Vec::len)
    }
}

pub fn is_chunk_row(ty: &str) -> bool {
    matches!(ty, "text-chunks" | "reasoning-chunks" | "tool-call-chunks")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn surface_op_reads_both_generations() {
        let r8: Value = serde_json::json!({"op":"replace","start":3,"end":9});
        let v4: Value = serde_json::json!({"op":"replace","startSeq":4,"endSeq":5});
        assert_eq!(
            SurfaceOp::parse(&r8),
            Some(SurfaceOp::Replace { start: 3, end: 9 })
        );
        assert_eq!(
            SurfaceOp::parse(&v4),
            Some(SurfaceOp::Replace { start: 4, end: 5 })
        );
        assert_eq!(
            SurfaceOp::parse(&Value::from("append")),
            Some(SurfaceOp::Append)
        );
        assert_eq!(
            SurfaceOp::parse(&serde_json::json!({"op":"replace","start":1})),
            None
        );
    }

    #[test]
    fn header_parse_reports_why() {
        assert_eq!(
            Header::parse(b"{\"type\":\"x\"}"),
            Err(HeaderError::NotSessionHeader)
        );
        assert_eq!(
            Header::parse(b"{\"type\":\"session\"}"),
            Err(HeaderError::NoId)
        );
        let not_json = Header::parse(b"{not json").unwrap_err();
        assert!(matches!(not_json, HeaderError::NotJson(_)), "{not_json:?}");
        assert!(not_json
            .to_string()
            .starts_with("header line is not valid JSON (key must be a string"));
        assert_eq!(
            Header::parse(b"{\"type\":\"session\",\"id\":\"\xff\"}"),
            Err(HeaderError::NotUtf8)
        );
        let h = Header::parse(br#"{"type":"session","version":4,"id":"s1","createdAt":5,"isSeeded":true,"parentSession":"p"}"#).unwrap();
        assert_eq!(
            (
                h.id.as_str(),
                h.created_at,
                h.is_seeded,
                h.parent_session.as_deref()
            ),
            ("s1", Some(5), Some(true), Some("p"))
        );
    }
}
