//! The wire between two linked machines: one request, one response, serde JSON in a versioned frame
//! `{"v": 1, "body": …}`, bounded on both sides. The transport (`crates/link`) carries the bytes and
//! knows nothing of them; [`encode`] / [`decode_request`] / [`decode_response`] are the only way in
//! and out, so a frame over its bound, of another version, or not of this shape is refused before
//! anything acts on it.
//!
//! Answers are typed results, never rendered text: the caller words them with its own printers and
//! adds the machine where its human sees it. A string field is capped (a longer one refuses the
//! frame); lists are capped by count.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::code::RefusalCode;

/// The protocol version this core speaks.
pub const VERSION: u32 = 1;
/// Largest request frame (a send: `maxSendChars` characters, up to 4 bytes each, plus its fields).
pub const MAX_REQUEST_BYTES: usize = 256 * 1024;
/// Largest response frame (a read window of up to 100 messages, each cut to the far side's
/// `maxMessageChars`, trimmed by the server to fit; or a listing of 200 rows). Under the transport's own
/// frame bound (`crates/link`: 4 MiB) with room for its envelope.
pub const MAX_RESPONSE_BYTES: usize = 3 * 1024 * 1024;
/// Longest id, label, cwd, title or note field (characters).
pub const MAX_FIELD: usize = 4096;
/// Longest message body in either direction (characters).
pub const MAX_BODY: usize = 64 * 1024;
/// Most rows of one listing answer / messages of one read answer.
pub const MAX_ROWS: usize = 200;
pub const MAX_MESSAGES: usize = 100;

/// How a message is handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WireMode {
    Queue,
    Steer,
}

/// Which send tool the sender called (the receiver runs the same one: From header or frame).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireTool {
    SessionsSend,
    SendSessionMessage,
}

impl From<crate::tool::SendTool> for WireTool {
    fn from(t: crate::tool::SendTool) -> WireTool {
        match t {
            crate::tool::SendTool::SessionsSend => WireTool::SessionsSend,
            crate::tool::SendTool::SendSessionMessage => WireTool::SendSessionMessage,
        }
    }
}

impl From<WireTool> for crate::tool::SendTool {
    fn from(t: WireTool) -> crate::tool::SendTool {
        match t {
            WireTool::SessionsSend => crate::tool::SendTool::SessionsSend,
            WireTool::SendSessionMessage => crate::tool::SendTool::SendSessionMessage,
        }
    }
}

/// A message for a session of the far side. The sender id is the sending machine's runtime id of
/// the caller (the far side checks it: never one of its own sessions, never one it saw from another
/// machine); the request id is minted once by the sender and kept through retries and the outbox,
/// so the far side lands it at most once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendReq {
    pub request_id: String,
    pub sender: String,
    #[serde(default)]
    pub sender_title: Option<String>,
    pub target: String,
    pub body: String,
    pub mode: WireMode,
    pub tool: WireTool,
    /// The loop guard's chain (the request id of its first delivery) and this delivery's hop in it.
    #[serde(default)]
    pub chain: Option<String>,
    pub hop: u32,
}

/// One request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Request {
    /// `sessions_list` there: the caller's arguments (the far side validates them with its own bounds).
    List {
        args: Value,
    },
    /// `sessions_read` there.
    Read {
        args: Value,
    },
    Send(SendReq),
    /// What became of a send there.
    #[serde(rename_all = "camelCase")]
    Verify {
        request_id: String,
    },
}

/// One listing row of the far side.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireRow {
    pub id: String,
    /// Live on that machine (in any of its processes).
    pub live: bool,
    /// Its status there when live (`running`, `idle`, `awaiting-user`).
    #[serde(default)]
    pub status: Option<String>,
    pub subagent: bool,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub preset: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// Creation time there (ms; the caller's order, newest first).
    pub created_at: i64,
}

/// A listing there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListAnswer {
    pub rows: Vec<WireRow>,
    /// Sessions it considered.
    pub considered: u64,
    /// Logs it could not read.
    #[serde(default)]
    pub unreadable: u64,
}

/// The head of a read window there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireHead {
    pub id: String,
    pub live: bool,
    pub subagent: bool,
    #[serde(default)]
    pub parent: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
    pub readable: u64,
    #[serde(default)]
    pub captured_through: Option<u64>,
    #[serde(default)]
    pub since: Option<u64>,
}

/// One message of a read window there (its body already cut to that machine's `maxMessageChars`,
/// the cut said in it as a local read says it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireMessage {
    pub role: String,
    pub seq: u64,
    pub label: String,
    #[serde(default)]
    pub request: Option<String>,
    pub injected: bool,
    pub replaced: bool,
    pub error: bool,
    pub body: String,
}

/// A read window there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadAnswer {
    pub head: WireHead,
    pub messages: Vec<WireMessage>,
    pub omitted: u64,
    pub hidden_injected: u64,
    pub hidden_system: u64,
    /// Notes about the window there (what was missing), each a short typed-out fact.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// A refusal there, typed: the code and the facts its words need.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WireRefusal {
    pub code: RefusalCode,
    /// `relay-limit`: the hop it would have been and the far side's `maxRelayHops`.
    #[serde(default)]
    pub hop: Option<u32>,
    #[serde(default)]
    pub max: Option<u32>,
    /// `budget`: when one more send may pass there (ms since the epoch).
    #[serde(default)]
    pub retry_at_ms: Option<i64>,
    /// `foreign-sender`: why the sender id is not believed there.
    #[serde(default)]
    pub foreign: Option<ForeignWhy>,
    /// `budget`: the machine's own budget there (not the pair's or the sender's).
    #[serde(default)]
    pub machine_budget: bool,
}

impl WireRefusal {
    pub fn code(code: RefusalCode) -> WireRefusal {
        WireRefusal {
            code,
            hop: None,
            max: None,
            retry_at_ms: None,
            foreign: None,
            machine_budget: false,
        }
    }
}

/// Why a receiving home does not take a sender id from a machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ForeignWhy {
    /// It names a session of the receiving home.
    Local,
    /// The receiving home first saw it from another machine.
    OtherMachine,
    /// It is not a session id.
    NotAnId,
    /// The receiving home's record of foreign ids cannot be read or written (fails closed).
    Unrecorded,
}

/// What became of a send on arrival.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum Landing {
    /// Its host took it (`woke`: resumed a cold session to take it; `waiting`: it waits in the
    /// mailbox of the process there that holds the session, not taken yet).
    Accepted {
        woke: bool,
        waiting: bool,
    },
    /// Kept for that machine's human.
    Held,
    Refused(WireRefusal),
    /// It went out there without a clear answer.
    MayHaveLanded,
}

/// The answer to a send.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SendAnswer {
    pub request_id: String,
    pub landing: Landing,
    /// The hop the far side counted (never below the one sent, never below what its ledger knows).
    pub hop: u32,
    /// An answer given before, to the same request id (nothing was delivered again).
    #[serde(default)]
    pub repeated: bool,
}

/// What a message's fate is: the one enum end to end (docs/architecture.md "Fates"), the same type as
/// `verify --json`'s `state`.
pub use crate::code::FateState;

/// The answer to a verify.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyAnswer {
    pub request_id: String,
    pub state: FateState,
    /// The session there it was for, when known.
    #[serde(default)]
    pub target: Option<String>,
    /// `refused`: the code there.
    #[serde(default)]
    pub code: Option<RefusalCode>,
}

/// One response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "kebab-case")]
pub enum Response {
    List(ListAnswer),
    Read(ReadAnswer),
    Send(SendAnswer),
    Verify(VerifyAnswer),
    /// The request was refused there before its tool ran (bad arguments, not found, busy, …).
    Refused(WireRefusal),
}

/// Why a frame is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// Over its bound (bytes).
    TooLarge { len: usize, max: usize },
    /// A version this core does not speak.
    Version(u32),
    /// Not a frame of this shape (serde's words).
    Shape(String),
    /// A field over its bound (which).
    Field(&'static str),
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WireError::TooLarge { len, max } => write!(f, "frame of {len} bytes over {max}"),
            WireError::Version(v) => {
                write!(f, "protocol version {v}, this machine speaks {VERSION}")
            }
            WireError::Shape(why) => write!(f, "not a frame: {why}"),
            WireError::Field(which) => write!(f, "field {which} over its bound"),
        }
    }
}

#[derive(Serialize)]
struct FrameOut<'a, T> {
    v: u32,
    body: &'a T,
}

#[derive(Deserialize)]
struct FrameIn<T> {
    v: u32,
    body: Option<T>,
}

#[derive(Deserialize)]
struct VersionOnly {
    v: u32,
}

/// The bytes of a request or response frame.
pub fn encode<T: Serialize>(body: &T) -> Vec<u8> {
    // A value of these types always serializes (no maps with non-string keys, no non-finite floats).
    serde_json::to_vec(&FrameOut { v: VERSION, body }).unwrap_or_default()
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8], max: usize) -> Result<T, WireError> {
    if bytes.len() > max {
        return Err(WireError::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    match serde_json::from_slice::<FrameIn<T>>(bytes) {
        Ok(FrameIn {
            v: VERSION,
            body: Some(b),
        }) => Ok(b),
        Ok(FrameIn {
            v: VERSION,
            body: None,
        }) => Err(WireError::Shape("no body".into())),
        Ok(FrameIn { v, .. }) => Err(WireError::Version(v)),
        Err(e) => match serde_json::from_slice::<VersionOnly>(bytes) {
            Ok(VersionOnly { v }) if v != VERSION => Err(WireError::Version(v)),
            _ => Err(WireError::Shape(e.to_string())),
        },
    }
}

fn capped(s: &str, max: usize, which: &'static str) -> Result<(), WireError> {
    if s.len() > max * 4 || s.chars().count() > max {
        return Err(WireError::Field(which));
    }
    Ok(())
}

fn capped_opt(s: &Option<String>, which: &'static str) -> Result<(), WireError> {
    s.as_deref().map_or(Ok(()), |s| capped(s, MAX_FIELD, which))
}

/// A frame as a JSON value (for a transport that carries `serde_json::Value`: `crates/link`).
pub fn encode_value<T: Serialize>(body: &T) -> Value {
    serde_json::to_value(FrameOut { v: VERSION, body }).unwrap_or(Value::Null)
}

/// At least the length of `v`'s JSON, from its strings' lengths (each byte at most 6 escaped) and a fixed
/// allowance for every number, literal and separator: a walk, nothing serialized.
fn json_len_bound(v: &Value) -> usize {
    match v {
        Value::Null | Value::Bool(_) => 5,
        // the longest f64 / i64 / u64 as serde_json writes them (without its arbitrary_precision feature,
        // which this workspace does not enable): 24 characters
        Value::Number(_) => 24,
        Value::String(s) => 6 * s.len() + 2,
        Value::Array(a) => 2 + a.iter().map(|x| json_len_bound(x) + 1).sum::<usize>(),
        Value::Object(o) => {
            2 + o
                .iter()
                .map(|(k, x)| 6 * k.len() + 4 + json_len_bound(x))
                .sum::<usize>()
        }
    }
}

/// The length of `v`'s JSON, counted as it is written (no copy of it made).
fn json_len(v: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    serde_json::to_writer(&mut c, v).map_or(usize::MAX, |()| c.0)
}

fn from_value<T: for<'de> Deserialize<'de>>(v: Value, max: usize) -> Result<T, WireError> {
    // the transport bounded the frame already; the bound here is this side's own. A frame whose upper
    // bound is under it is not measured: it was serialized whole only to be measured (a read answer of
    // 82 KB, on every remote read)
    if json_len_bound(&v) > max {
        let len = json_len(&v);
        if len > max {
            return Err(WireError::TooLarge { len, max });
        }
    }
    let version = v.get("v").and_then(Value::as_u64).unwrap_or(0);
    if version != u64::from(VERSION) {
        return Err(WireError::Version(
            u32::try_from(version).unwrap_or(u32::MAX),
        ));
    }
    match serde_json::from_value::<FrameIn<T>>(v) {
        Ok(FrameIn { body: Some(b), .. }) => Ok(b),
        Ok(FrameIn { body: None, .. }) => Err(WireError::Shape("no body".into())),
        Err(e) => Err(WireError::Shape(e.to_string())),
    }
}

/// [`decode_request`] of a frame carried as a JSON value.
pub fn request_from_value(v: Value) -> Result<Request, WireError> {
    check_request(from_value(v, MAX_REQUEST_BYTES)?)
}

/// [`decode_response`] of a frame carried as a JSON value.
pub fn response_from_value(v: Value) -> Result<Response, WireError> {
    check_response(from_value(v, MAX_RESPONSE_BYTES)?)
}

/// A request from bytes, bounded ([`MAX_REQUEST_BYTES`], every field).
pub fn decode_request(bytes: &[u8]) -> Result<Request, WireError> {
    check_request(decode(bytes, MAX_REQUEST_BYTES)?)
}

fn check_request(r: Request) -> Result<Request, WireError> {
    match &r {
        Request::Send(s) => {
            capped(&s.request_id, 128, "requestId")?;
            capped(&s.sender, 512, "sender")?;
            capped_opt(&s.sender_title, "senderTitle")?;
            capped(&s.target, 512, "target")?;
            capped(&s.body, MAX_BODY, "body")?;
            if let Some(c) = &s.chain {
                capped(c, 128, "chain")?;
            }
        }
        Request::Verify { request_id } => capped(request_id, 128, "requestId")?,
        Request::List { .. } | Request::Read { .. } => {}
    }
    Ok(r)
}

/// A response from bytes, bounded ([`MAX_RESPONSE_BYTES`], every field and list).
pub fn decode_response(bytes: &[u8]) -> Result<Response, WireError> {
    check_response(decode(bytes, MAX_RESPONSE_BYTES)?)
}

fn check_response(r: Response) -> Result<Response, WireError> {
    match &r {
        Response::List(l) => {
            if l.rows.len() > MAX_ROWS {
                return Err(WireError::Field("rows"));
            }
            for row in &l.rows {
                capped(&row.id, 512, "id")?;
                capped_opt(&row.status, "status")?;
                capped_opt(&row.parent, "parent")?;
                capped_opt(&row.cwd, "cwd")?;
                capped_opt(&row.preset, "preset")?;
                capped_opt(&row.title, "title")?;
            }
        }
        Response::Read(a) => {
            if a.messages.len() > MAX_MESSAGES || a.notes.len() > 16 {
                return Err(WireError::Field("messages"));
            }
            capped(&a.head.id, 512, "id")?;
            capped_opt(&a.head.cwd, "cwd")?;
            capped_opt(&a.head.title, "title")?;
            capped_opt(&a.head.parent, "parent")?;
            for m in &a.messages {
                capped(&m.role, 32, "role")?;
                capped(&m.label, MAX_FIELD, "label")?;
                capped_opt(&m.request, "request")?;
                capped(&m.body, MAX_BODY, "body")?;
            }
            for n in &a.notes {
                capped(n, MAX_FIELD, "notes")?;
            }
        }
        Response::Send(s) => capped(&s.request_id, 128, "requestId")?,
        Response::Verify(v) => {
            capped(&v.request_id, 128, "requestId")?;
            capped_opt(&v.target, "target")?;
        }
        Response::Refused(_) => {}
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send() -> Request {
        Request::Send(SendReq {
            request_id: "dsh-session-mail:00000000-0000-4000-8000-000000000001".into(),
            sender: "session-a".into(),
            sender_title: Some("Planner".into()),
            target: "session-b".into(),
            body: "hello".into(),
            mode: WireMode::Steer,
            tool: WireTool::SendSessionMessage,
            chain: Some("dsh-session-mail:c".into()),
            hop: 2,
        })
    }

    #[test]
    fn a_request_round_trips_through_its_versioned_frame() {
        let bytes = encode(&send());
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(
            text.starts_with("{\"v\":1,\"body\":{\"op\":\"send\""),
            "{text}"
        );
        assert!(text.contains("\"mode\":\"steer\""));
        assert!(text.contains("\"tool\":\"send_session_message\""));
        assert_eq!(decode_request(&bytes).unwrap(), send());
        let v = Request::Verify {
            request_id: "r".into(),
        };
        assert_eq!(decode_request(&encode(&v)).unwrap(), v);
    }

    #[test]
    fn frames_over_their_bound_of_another_version_or_shape_are_refused() {
        let big = vec![b' '; MAX_REQUEST_BYTES + 1];
        assert!(matches!(
            decode_request(&big),
            Err(WireError::TooLarge { .. })
        ));
        assert_eq!(
            decode_request(br#"{"v":2,"body":{"op":"list","args":{}}}"#),
            Err(WireError::Version(2))
        );
        assert_eq!(
            decode_request(br#"{"v":2,"body":{"op":"teleport"}}"#),
            Err(WireError::Version(2))
        );
        assert!(matches!(
            decode_request(br#"{"v":1,"body":{"op":"teleport"}}"#),
            Err(WireError::Shape(_))
        ));
        assert!(matches!(
            decode_request(b"\xff\x00garbage"),
            Err(WireError::Shape(_))
        ));
        // a field over its bound refuses the frame (the whole frame is under MAX_REQUEST_BYTES)
        let Request::Send(mut s) = send() else {
            unreachable!()
        };
        s.sender = "x".repeat(513);
        assert_eq!(
            decode_request(&encode(&Request::Send(s))),
            Err(WireError::Field("sender"))
        );
    }

    #[test]
    fn a_frame_carried_as_a_json_value_decodes_as_its_bytes_do() {
        let v = encode_value(&send());
        assert_eq!(request_from_value(v).unwrap(), send());
        assert_eq!(
            request_from_value(serde_json::json!({"v": 3, "body": {"op": "list", "args": {}}})),
            Err(WireError::Version(3))
        );
        let big = serde_json::json!({"v": 1, "body": {"op": "list", "args": {"q": "x".repeat(MAX_REQUEST_BYTES)}}});
        assert!(matches!(
            request_from_value(big),
            Err(WireError::TooLarge { .. })
        ));
        let r = Response::Refused(WireRefusal::code(RefusalCode::Busy));
        assert_eq!(response_from_value(encode_value(&r)).unwrap(), r);
    }

    #[test]
    fn a_values_length_bound_is_never_under_its_json_and_a_frame_under_it_is_not_measured() {
        let nasty: String = (0u8..32)
            .map(char::from)
            .chain("\"\\é€😀 x".chars())
            .collect();
        let v = serde_json::json!({
            "v": 1, nasty.clone(): [null, true, false, u64::MAX, i64::MIN, -1.7976931348623157e308,
            f64::MIN_POSITIVE, 0.1, [], {}, nasty.repeat(40)], "": {"a": [[[nasty]]]}
        });
        let exact = serde_json::to_vec(&v).unwrap().len();
        assert_eq!(json_len(&v), exact);
        assert!(
            json_len_bound(&v) >= exact,
            "{} < {exact}",
            json_len_bound(&v)
        );
        for x in [
            serde_json::json!(null),
            serde_json::json!(-0.000001234e-300),
            serde_json::json!(""),
        ] {
            assert!(json_len_bound(&x) >= serde_json::to_vec(&x).unwrap().len());
        }
        // over the bound by its worst case but not in fact: still decoded (measured exactly)
        let r = Response::Refused(WireRefusal::code(RefusalCode::Busy));
        let mut fits = encode_value(&r);
        fits["pad"] = Value::String("x".repeat(MAX_RESPONSE_BYTES / 2));
        assert!(json_len_bound(&fits) > MAX_RESPONSE_BYTES);
        assert_eq!(response_from_value(fits).unwrap(), r);
        // over it in fact: refused with its length
        let mut over = encode_value(&r);
        over["pad"] = Value::String("x".repeat(MAX_RESPONSE_BYTES));
        let len = serde_json::to_vec(&over).unwrap().len();
        assert_eq!(
            response_from_value(over),
            Err(WireError::TooLarge {
                len,
                max: MAX_RESPONSE_BYTES
            })
        );
    }

    #[test]
    fn a_listing_answer_is_bounded_by_rows_and_fields() {
        let row = WireRow {
            id: "session-b".into(),
            live: true,
            status: Some("idle".into()),
            subagent: false,
            parent: None,
            cwd: Some("/w".into()),
            preset: None,
            title: Some("t".into()),
            created_at: 1,
        };
        let ok = Response::List(ListAnswer {
            rows: vec![row.clone()],
            considered: 3,
            unreadable: 0,
        });
        assert_eq!(decode_response(&encode(&ok)).unwrap(), ok);
        let many = Response::List(ListAnswer {
            rows: vec![row; MAX_ROWS + 1],
            considered: 3,
            unreadable: 0,
        });
        assert_eq!(
            decode_response(&encode(&many)),
            Err(WireError::Field("rows"))
        );
    }
}
