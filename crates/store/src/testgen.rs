//! Test-only generator of realistic session logs (rc.8 / V0 shape and V4 shape), multi-frame
//! zstd like the host writes them: the header in its own frame, then one frame per batch
//! [R8 `session-persistence-jsonl/src/index.ts` `encodeMaterialization`, `encodeEventBatch`].
//! Shapes follow a real rc.8 log (`user/message` + runtime-context snapshot, `assistant/chunk`
//! rows, packed `text-chunks`, `tool/result` V0 wrapper with `role:'user'`) and the V4 types
//! (`system/message`, `developer/message`, tool-role results, `startSeq/endSeq`).
//!
//! `cargo test --lib regenerate_fixtures -- --ignored` rewrites `test/fixtures/logs/`.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

pub const BASE_TIME: u64 = 1_796_000_000_000;

pub const MAIN: &str = "session-e218a09e-8736-4483-9a04-2bf13608630c";
pub const V4: &str = "session-4b91c0de-1f2a-4c3b-9d8e-7f6a5b4c3d2e";
pub const SUB: &str = "019c3d96-79e0-4e6a-b7bf-ea46c224d701";
pub const FORK: &str = "session-77aa1234-5678-4abc-8def-0123456789ab";
pub const PLAIN: &str = "session-5e5e5e5e-0000-4000-8000-000000000001";
pub const V4FORK: &str = "session-6f1c0d2e-aaaa-4bbb-8ccc-dddddddddddd";
pub const PROJ: &str = "--home-ana-proj--";
pub const REQ_LANDED: &str = "dsh-session-mail:0b6c2a52-8a53-4f0e-9d0b-6a3e1f7c9d11";
pub const REQ_QUEUED: &str = "dsh-session-mail:9f1d7c33-1b2e-4c5d-8e9f-a0b1c2d3e4f5";
pub const REQ_V4: &str = "dsh-session-mail:4444aaaa-bbbb-4ccc-8ddd-eeeeffff0000";

/// One log under construction: header + batches of rows.
pub struct LogBuilder {
    pub header: Value,
    pub batches: Vec<Vec<String>>,
    pub seq: u64,
    /// The surface as the builder folds it (to cite real shadowed seqs).
    pub surface: Vec<u64>,
    v4: bool,
    turn: u64,
    step: u64,
    ids: u64,
}

impl LogBuilder {
    pub fn v0(id: &str, cwd: Option<&str>, created: u64) -> LogBuilder {
        let mut h = json!({"type":"session","version":0,"id":id,"createdAt":created});
        if let Some(c) = cwd {
            h["cwd"] = c.into();
        }
        h["delegationDepth"] = 0.into();
        h["agentPreset"] = "standard".into();
        LogBuilder::with(h, false)
    }

    pub fn v4(id: &str, cwd: Option<&str>, created: u64) -> LogBuilder {
        let mut h = json!({"type":"session","version":4,"id":id,"createdAt":created});
        if let Some(c) = cwd {
            h["cwd"] = c.into();
        }
        h["isSeeded"] = false.into();
        h["delegationDepth"] = 0.into();
        h["agentPreset"] = "standard".into();
        LogBuilder::with(h, true)
    }

    fn with(header: Value, v4: bool) -> LogBuilder {
        LogBuilder {
            header,
            batches: vec![Vec::new()],
            seq: 0,
            surface: Vec::new(),
            v4,
            turn: 0,
            step: 0,
            ids: 0,
        }
    }

    fn time(&self) -> u64 {
        BASE_TIME + self.seq * 7
    }

    fn id(&mut self) -> String {
        self.ids += 1;
        let h = self.header["id"].as_str().unwrap_or("x").len() as u64;
        format!(
            "{:08x}-0000-4000-8000-{:012x}",
            self.ids,
            h * 1000 + self.ids
        )
    }

    /// Append a raw row to the current batch.
    pub fn raw(&mut self, row: String) {
        self.batches.last_mut().unwrap().push(row);
    }

    /// Close the current batch: the next rows go to a new zstd frame.
    pub fn flush(&mut self) {
        if !self.batches.last().unwrap().is_empty() {
            self.batches.push(Vec::new());
        }
    }

    /// A log-only event.
    pub fn ev(&mut self, ty: &str, data: Value) -> u64 {
        let seq = self.seq;
        let row = json!({"type":ty,"seq":seq,"time":self.time(),"data":data});
        self.raw(row.to_string());
        self.seq += 1;
        seq
    }

    /// A surface event.
    pub fn surf(&mut self, ty: &str, data: Value, op: Value, sources: Option<Vec<u64>>) -> u64 {
        let seq = self.seq;
        let mut row = json!({"type":ty,"seq":seq,"time":self.time(),"data":data});
        if let Some(s) = sources {
            row["sourceEventSeqs"] = json!(s);
        }
        if op == "append" {
            self.surface.push(seq);
        } else {
            let a = op
                .get("start")
                .or(op.get("startSeq"))
                .and_then(Value::as_u64)
                .unwrap();
            let z = op
                .get("end")
                .or(op.get("endSeq"))
                .and_then(Value::as_u64)
                .unwrap();
            let i = self.surface.iter().position(|&x| x == a).unwrap();
            let j = self.surface.iter().position(|&x| x == z).unwrap();
            self.surface.splice(i..=j, [seq]);
        }
        row["surfaceOp"] = op;
        self.raw(row.to_string());
        self.seq += 1;
        seq
    }

    fn replace(&self, start: u64, end: u64) -> Value {
        if self.v4 {
            json!({"op":"replace","startSeq":start,"endSeq":end})
        } else {
            json!({"op":"replace","start":start,"end":end})
        }
    }

    pub fn user_msg(&mut self, text: &str, source: Value) -> Value {
        json!({"content":[{"type":"text","text":text}],"source":source,"role":"user","id":self.id()})
    }

    /// A human prompt as the host records it: inbox insertion, turn/start, claim, step/start,
    /// the landed `user/message`, the runtime-context snapshot. Returns the prompt's seq.
    pub fn prompt(&mut self, text: &str, rpc: &str) -> u64 {
        let msg = self.user_msg(text, json!({"kind":"user","rpcId":rpc}));
        self.ev(
            "agent/inbox/spliced",
            json!({"target":"next-turn","start":0,"inserted":[msg.clone()]}),
        );
        self.flush();
        self.turn += 1;
        self.step = 1;
        let turn = self.turn;
        self.ev("turn/start", json!({"turn":turn}));
        self.ev(
            "agent/inbox/spliced",
            json!({"target":"next-turn","start":0,"removedCount":1,"inserted":[]}),
        );
        self.ev("step/start", json!({"turn":turn,"step":1}));
        if self.v4 {
            let sys = json!({"turn":turn,"step":1,"message":{"id":self.id(),"role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"You are a coding agent."}]}});
            self.surf("system/message", sys, "append".into(), None);
        }
        let seq = self.surf("user/message", msg, "append".into(), None);
        let ctx_text = "Current runtime context. This snapshot supersedes earlier runtime-context snapshots.\n\nCurrent DSH file policy: workspace-write.";
        let src = if self.v4 {
            json!({"kind":"runtime-context","form":"snapshot","sections":[{"name":"sandbox:policy","text":"Current DSH file policy: workspace-write."}]})
        } else {
            json!({"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt","form":"snapshot","sections":[{"name":"sandbox:policy","text":"Current DSH file policy: workspace-write."}]})
        };
        let ctx = self.user_msg(ctx_text, src);
        self.surf("user/message", ctx, "append".into(), None);
        seq
    }

    pub fn title(&mut self, title: &str, source: Value, message_seqs: &[u64]) -> u64 {
        self.ev(
            "session/title",
            json!({"title":title,"messageSeqs":message_seqs,"source":source}),
        )
    }

    /// Model streaming rows (rc.8 `assistant/chunk` + a packed `text-chunks` row), then the message.
    pub fn reply(&mut self, text: &str, provider: &str, model: &str) -> u64 {
        let (turn, step) = (self.turn, self.step);
        let mut sources = Vec::new();
        self.ev(
            "request/header",
            json!({"header":{"config":{"provider":provider,"model":model}},"reason":"initial"}),
        );
        if !self.v4 {
            sources.push(self.ev("assistant/chunk", json!({"turn":turn,"step":step,"chunk":{"type":"block-start","index":0,"blockType":"text"}})));
            let parts: Vec<String> = text
                .as_bytes()
                .chunks(8)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            if parts.len() >= 3 {
                let seq0 = self.seq;
                let dt: Vec<u64> = vec![1; parts.len() - 1];
                let row = json!({"type":"text-chunks","seq0":seq0,"time0":self.time(),"data":{"turn":turn,"step":step,"index":0,"dt":dt,"texts":parts}});
                self.raw(row.to_string());
                for i in 0..parts.len() as u64 {
                    sources.push(seq0 + i);
                }
                self.seq += parts.len() as u64;
            }
            sources.push(self.ev(
                "assistant/chunk",
                json!({"turn":turn,"step":step,"chunk":{"type":"finish","reason":{"kind":"stop"}}}),
            ));
        }
        let mut data = json!({"turn":turn,"step":step,"message":{"role":"assistant","content":[{"type":"reasoning","text":"SECRET REASONING"},{"type":"text","text":text}],"source":{"kind":"model","provider":provider,"model":model},"id":self.id()},"usage":{"inputTokens":10,"outputTokens":5}});
        if self.v4 {
            data["stream"] = json!([]);
        }
        let seq = self.surf(
            "assistant/message",
            data,
            "append".into(),
            if self.v4 { None } else { Some(sources) },
        );
        self.ev("step/end", json!({"turn":turn,"step":step}));
        seq
    }

    /// One tool round: assistant tool-call message, tool/call, tool/result (V0 wrapper or V4 tool role).
    pub fn tool_round(
        &mut self,
        call: &str,
        name: &str,
        args: &str,
        result: &str,
        provider: &str,
        model: &str,
    ) -> u64 {
        let (turn, step) = (self.turn, self.step);
        let data = json!({"turn":turn,"step":step,"message":{"role":"assistant","content":[{"type":"tool-call","id":call,"name":name,"arguments":args}],"source":{"kind":"model","provider":provider,"model":model},"id":self.id()}});
        self.surf("assistant/message", data, "append".into(), None);
        let call_seq = self.ev(
            "tool/call",
            json!({"turn":turn,"step":step,"callId":call,"name":name,"arguments":args}),
        );
        let seq = self.tool_result(call, result, json!("append"), Some(vec![call_seq]));
        self.ev("step/end", json!({"turn":turn,"step":step}));
        self.step += 1;
        let s = self.step;
        self.ev("step/start", json!({"turn":turn,"step":s}));
        seq
    }

    pub fn tool_result(
        &mut self,
        call: &str,
        result: &str,
        op: Value,
        sources: Option<Vec<u64>>,
    ) -> u64 {
        let (turn, step) = (self.turn, self.step);
        let message = if self.v4 {
            json!({"id":self.id(),"role":"tool","source":{"kind":"tool","callId":call},"toolCallId":call,"content":[{"type":"text","text":result}]})
        } else {
            json!({"source":{"kind":"tool","callId":call},"content":[{"type":"tool-result","toolCallId":call,"content":[{"type":"text","text":result}],"isError":false}],"role":"user","id":self.id()})
        };
        self.surf(
            "tool/result",
            json!({"turn":turn,"step":step,"message":message}),
            op,
            sources,
        )
    }

    pub fn end_turn(&mut self) {
        let turn = self.turn;
        self.ev(
            "turn/end",
            json!({"turn":turn,"reason":{"kind":"completed"}}),
        );
        self.flush();
    }

    /// Compaction: brackets, summary, and the checkpoint `user/message` replacing `start..=end`
    /// [R8 `compaction-basic/src/region.ts` `commitCompactionBody`].
    pub fn compact(&mut self, start: u64, end: u64, summary: &str) -> u64 {
        let i = self.surface.iter().position(|&x| x == start).unwrap();
        let j = self.surface.iter().position(|&x| x == end).unwrap();
        let shadowed: Vec<u64> = self.surface[i..=j].to_vec();
        let shadowed = &shadowed[..];
        let start_seq = self.ev(
            "compaction/start",
            json!({"compactionId":"cmp-1","turn":null}),
        );
        let summary_seq = self.ev("compaction/summary", json!({"compactionId":"cmp-1","summary":[{"type":"text","text":summary}],"shadowedRange":{"start":start,"end":end},"shadowedSeqs":shadowed,"shadowedTokenCount":1000,"provider":"p","model":"m"}));
        let src = if self.v4 {
            json!({"kind":"compact-checkpoint","compactionId":"cmp-1"})
        } else {
            json!({"kind":"plugin","plugin":"compact","compactionId":"cmp-1"})
        };
        let msg = self.user_msg(
            &format!("<compaction-summary>\n{summary}\n</compaction-summary>"),
            src,
        );
        let mut sources = vec![start_seq, summary_seq];
        sources.extend_from_slice(shadowed);
        let op = self.replace(start, end);
        let seq = self.surf("user/message", msg, op, Some(sources));
        self.ev("compaction/end", json!({"compactionId":"cmp-1"}));
        self.flush();
        seq
    }

    /// Tool-result pruning: a `tool/result` replacing one node [R8 `compaction-tool-result-pruner/src/index.ts`].
    pub fn prune(&mut self, node: u64, call: &str, text: &str) -> u64 {
        self.ev("compaction/prune", json!({"shadowedRange":{"start":node,"end":node},"shadowedSeqs":[node],"shadowedTokenCount":500}));
        let op = self.replace(node, node);
        self.tool_result(call, text, op, Some(vec![node]))
    }

    /// A steer/queue delivery from another session still pending in the inbox.
    pub fn queued(&mut self, text: &str, rpc: &str, target: &str) -> u64 {
        let msg = self.user_msg(text, json!({"kind":"user","rpcId":rpc}));
        let s = self.ev(
            "agent/inbox/spliced",
            json!({"target":target,"start":0,"inserted":[msg]}),
        );
        self.flush();
        s
    }

    pub fn header_line(&self) -> String {
        self.header.to_string()
    }

    fn batch_text(b: &[String]) -> String {
        let mut s = b.join("\n");
        s.push('\n');
        s
    }

    /// Plain JSONL text.
    pub fn text(&self) -> String {
        let mut s = self.header_line();
        s.push('\n');
        for b in self.batches.iter().filter(|b| !b.is_empty()) {
            s.push_str(&Self::batch_text(b));
        }
        s
    }

    /// Multi-frame zstd: header frame, then one checksummed frame per batch.
    pub fn zstd(&self) -> Vec<u8> {
        let mut out = frame(format!("{}\n", self.header_line()).as_bytes());
        for b in self.batches.iter().filter(|b| !b.is_empty()) {
            out.extend(frame(Self::batch_text(b).as_bytes()));
        }
        out
    }
}

/// A host-shaped zstd session log built from `script`: the `log_reader` fuzz target's generated
/// logs, so that its mutations reach the shapes a read from the end (`store::window`) must get
/// right. The first byte picks the generation (odd: V4), then two bytes an op (at most 2,048):
/// a prompt (the first one titled), a reply, a tool round, a frame end, a turn end, a compaction
/// — from the head of the surface, as rc.8 runs them, or of a middle span, as a plugin's
/// `compactRegion(start, end)` may (`compaction-basic/src/region.ts` `validateSurfaceRegion` takes
/// any span of the surface), its start picked by the op's argument —, a pruned tool result, a
/// rename, a queued request, a line the fold cannot read. The builder keeps the host's rules
/// (every replace names nodes on the surface, seqs contiguous).
pub fn scripted(script: &[u8]) -> Vec<u8> {
    scripted_log(script).0.zstd()
}

/// [`scripted`]'s log, and how many of its compactions are of a middle span.
pub fn scripted_log(script: &[u8]) -> (LogBuilder, usize) {
    let mut middles = 0;
    let (v, ops) = script.split_first().unwrap_or((&0, &[]));
    let id = "session-5c5c5c5c-1111-4222-8333-444444444444";
    let mut b = if v & 1 == 1 {
        LogBuilder::v4(id, Some("/w"), 1)
    } else {
        LogBuilder::v0(id, Some("/w"), 1)
    };
    let mut tools: Vec<(u64, String)> = Vec::new();
    let mut prompts = 0u64;
    for (k, op) in ops.chunks(2).take(2048).enumerate() {
        let (op, arg) = (op[0], op.get(1).copied().unwrap_or(0));
        let n = b.surface.len();
        match op % 10 {
            0 => {
                let p = b.prompt(&format!("prompt {k}"), &format!("dsh-session-mail:p-{k}"));
                if prompts == 0 {
                    b.title("title 0", json!({"kind":"fallback"}), &[p]);
                }
                prompts += 1;
            }
            1 => {
                b.reply(&"reply ".repeat(1 + arg as usize % 8), DS.0, DS.1);
            }
            2 => {
                let call = format!("call_{k}");
                let text = "line\n".repeat(1 + arg as usize % 16);
                let seq = b.tool_round(&call, "read_file", r#"{"path":"a"}"#, &text, DS.0, DS.1);
                tools.push((seq, call));
            }
            3 => b.flush(),
            4 => b.end_turn(),
            // From position `arg % 8` (0: the head) through a node `arg / 8` from the end.
            5 if n >= 2 => {
                let i = (arg as usize & 7).min(n - 1);
                let j = n - 1 - ((arg as usize >> 3) % (n - i));
                let (s, e) = (b.surface[i], b.surface[j]);
                middles += usize::from(i > 0);
                b.compact(s, e, &format!("summary {k}"));
            }
            6 => {
                let live: Vec<_> = tools
                    .iter()
                    .filter(|(s, _)| b.surface.contains(s))
                    .cloned()
                    .collect();
                if let Some((seq, call)) = live.get(arg as usize % live.len().max(1)).cloned() {
                    b.prune(seq, &call, "[pruned]");
                }
            }
            7 => {
                b.title(&format!("title {k}"), json!({"kind":"user"}), &[]);
            }
            8 => b.raw("{oops not json".into()),
            9 => {
                b.queued("later", &format!("dsh-session-mail:q-{k}"), "next-turn");
            }
            _ => {}
        }
    }
    (b, middles)
}

/// One checksummed zstd frame.
pub fn frame(bytes: &[u8]) -> Vec<u8> {
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 3).unwrap();
    enc.include_checksum(true).unwrap();
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

/// The provider and model every generated assistant turn names.
pub const DS: (&str, &str) = ("opencode-go-deepseek", "deepseek-flash");

/// xorshift64*: generated cases are reproducible from their seed.
pub struct Rng(pub u64);
impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
    pub fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

/// rc.8 main session: two turns, a tool round, a pruned tool result, a compaction, titles,
/// one of our requests landed and one still queued, notices and injected context.
pub fn main_v0() -> LogBuilder {
    let mut b = LogBuilder::v0(MAIN, Some("/home/ana/proj"), BASE_TIME + 5_000);
    b.ev("permission/preset", json!({"preset":"workspace-write"}));
    b.ev("sandbox/mode", json!({"mode":"workspace-write"}));
    b.ev("approval/policy", json!({"policy":"ask"}));
    let p1 = b.prompt(
        "Fix the newapi reasoning-effort config for every model entry",
        "22915",
    );
    b.title(
        "Fix the newapi reasoning",
        json!({"kind":"fallback"}),
        &[p1],
    );
    let r = b.tool_round(
        "call_1",
        "read_file",
        r#"{"path":"config.yaml"}"#,
        &"models:\n  - id: flash\n".repeat(40),
        DS.0,
        DS.1,
    );
    let r1 = b.reply(
        "fixed. root cause: reasoningEfforts was never declared per model entry",
        DS.0,
        DS.1,
    );
    b.end_turn();
    b.title(
        "Fix the newapi reasoning-effort config",
        json!({"kind":"provider","provider":"session-title-first-prompt-llm"}),
        &[p1],
    );
    b.flush();
    b.prune(r, "call_1", "[pruned: 480 chars]");
    b.flush();
    let p2 = b.prompt(
        "Cross-session message from another session of this harness.\nfrom-session: session-4b91c0de-1f2a-4c3b-9d8e-7f6a5b4c3d2e (\"Port the parser\")\ndelivery: queue\n--- message begins ---\nplease also check the selector\n--- message ends ---",
        REQ_LANDED,
    );
    let notice = b.user_msg(
        "Plan mode is on: propose before editing.",
        json!({"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"plan mode on"}),
    );
    b.surf("user/message", notice, "append".into(), None);
    let reminder = b.user_msg(
        "<system-reminder>\nFollow AGENTS.md\n</system-reminder>",
        json!({"kind":"plugin","plugin":"agent-instructions"}),
    );
    b.surf("user/message", reminder, "append".into(), None);
    b.reply(
        "the reasoning selector is empty for every model",
        DS.0,
        DS.1,
    );
    b.end_turn();
    let _ = p2;
    // Compact the first turn: from the first prompt through the first reply.
    b.compact(
        p1,
        r1,
        "Earlier: the user asked to fix the reasoning-effort config.",
    );
    b.ev("brand-new/future-event", json!({"x":1}));
    b.queued("one more thing", REQ_QUEUED, "next-turn");
    b
}

/// A V4 session with system/developer messages, tool-role results, a V4 compaction.
pub fn v4_main() -> LogBuilder {
    let mut b = LogBuilder::v4(V4, Some("/home/ana/proj"), BASE_TIME + 9_000);
    let p1 = b.prompt("Port the parser to the new tokenizer", "req-1");
    b.title("Port the parser", json!({"kind":"fallback"}), &[p1]);
    let dev = json!({"turn":1,"step":1,"message":{"id":"dev-1","role":"developer","source":{"kind":"tool-catalog"},"content":[{"type":"text","text":"Tools changed: +grep"}]}});
    b.surf("developer/message", dev, "append".into(), None);
    b.tool_round(
        "call_a",
        "grep",
        r#"{"q":"tokenize"}"#,
        "src/parse.rs:12: fn tokenize",
        "deepseek-official",
        "deepseek-v4-flash",
    );
    let r1 = b.reply(
        "ported tokenize; tests pass",
        "deepseek-official",
        "deepseek-v4-flash",
    );
    b.end_turn();
    b.prompt("now the lexer too", REQ_V4);
    b.reply(
        "lexer ported as well",
        "deepseek-official",
        "deepseek-v4-flash",
    );
    b.end_turn();
    // Compact everything from the first system message through the first reply.
    b.compact(p1 - 1, r1, "The parser was ported to the new tokenizer.");
    b
}

/// The older generation of the V4 session (must be ignored: a newer generation exists).
pub fn v4_old_generation() -> LogBuilder {
    let mut b = LogBuilder::v0(V4, Some("/home/ana/proj"), BASE_TIME + 9_000);
    let p = b.prompt("Old generation prompt", "old");
    b.title("Old generation title", json!({"kind":"fallback"}), &[p]);
    b.end_turn();
    b
}

pub fn subagent() -> LogBuilder {
    let mut b = LogBuilder::v0(SUB, Some("/home/ana/proj"), BASE_TIME + 7_000);
    b.header["parentSession"] = MAIN.into();
    b.header["origin"] = "subagent".into();
    b.header["delegationDepth"] = 1.into();
    let brief = b.user_msg(
        "Summarize the checkpoint",
        json!({"kind":"plugin","plugin":"subagent","form":"instructions"}),
    );
    b.turn = 1;
    b.ev("turn/start", json!({"turn":1}));
    b.surf("user/message", brief, "append".into(), None);
    b.reply("done", DS.0, DS.1);
    b.end_turn();
    b.title(
        "Bounded completed checkpoint",
        json!({"kind":"provider","provider":"x"}),
        &[],
    );
    b
}

/// An rc.8 fork of MAIN: `parentSession`, no origin, `seedLength` events copied from the parent
/// (including one of our requests, which is the parent's, not the fork's).
pub fn fork_v0() -> LogBuilder {
    let mut parent = LogBuilder::v0(MAIN, Some("/home/ana/proj"), BASE_TIME + 5_000);
    parent.prompt("inherited prompt", "dsh-session-mail:inherited-1");
    parent.reply("inherited reply", DS.0, DS.1);
    parent.end_turn();
    let mut b = LogBuilder::v0(FORK, Some("/home/ana/proj"), BASE_TIME + 8_000);
    b.header["parentSession"] = MAIN.into();
    b.header["seedLength"] = parent.seq.into();
    b.batches = vec![parent.batches.concat()];
    b.seq = parent.seq;
    b.surface = parent.surface.clone();
    b.turn = parent.turn;
    b.ids = 100;
    b.flush();
    b.prompt(
        "continue from here in the fork",
        "dsh-session-mail:fork-own",
    );
    b.reply("fork reply", DS.0, DS.1);
    b.end_turn();
    b
}

/// A V4 fork: `isSeeded` and a tagged `session/end-seed` closing the inherited prefix.
pub fn fork_v4() -> LogBuilder {
    let mut b = LogBuilder::v4(V4FORK, Some("/srv/api"), BASE_TIME + 2_000);
    b.header["parentSession"] = V4.into();
    b.header["isSeeded"] = true.into();
    b.prompt("inherited v4 prompt", "dsh-session-mail:inherited-v4");
    b.end_turn();
    b.ev("session/end-seed", json!({"inherited":true}));
    b.flush();
    b.prompt("own v4 prompt", "dsh-session-mail:own-v4");
    b.end_turn();
    b
}

/// A plain (compression `none`) session with no title event: the fallback title applies.
pub fn plain() -> LogBuilder {
    let mut b = LogBuilder::v0(PLAIN, Some("/srv/api"), BASE_TIME + 1_000);
    b.prompt(
        "  Add   retries to the   upload client please, with backoff",
        "r1",
    );
    b.reply("added", DS.0, DS.1);
    b.end_turn();
    b
}

/// Files of the committed fixture tree (`<home>/…` relative path, bytes).
pub fn fixture_files() -> Vec<(String, Vec<u8>)> {
    let s = |p: &str, id: &str, f: &str| format!("sessions/{p}/{id}/{f}");
    vec![
        (s(PROJ, MAIN, "session.jsonl.zstd"), main_v0().zstd()),
        (s(PROJ, V4, "session.v4.jsonl.zstd"), v4_main().zstd()),
        (
            s(PROJ, V4, "session.jsonl.zstd"),
            v4_old_generation().zstd(),
        ),
        // Non-canonical names beside it: ignored.
        (
            s(PROJ, V4, "session.v5.jsonl.zstd.tmp"),
            b"partial".to_vec(),
        ),
        (s(PROJ, V4, "session.v05.jsonl"), b"{}\n".to_vec()),
        (s(PROJ, V4, "session.lock"), Vec::new()),
        (s(PROJ, SUB, "session.jsonl.zstd"), subagent().zstd()),
        (s(PROJ, FORK, "session.jsonl.zstd"), fork_v0().zstd()),
        (
            s("--srv-api--", PLAIN, "session.jsonl"),
            plain().text().into_bytes(),
        ),
        (
            s("--srv-api--", V4FORK, "session.v4.jsonl.zstd"),
            fork_v4().zstd(),
        ),
    ]
}

pub fn write_tree(root: &Path, files: &[(String, Vec<u8>)]) {
    for (rel, bytes) in files {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
}

/// The committed fixtures' directory.
pub fn fixtures_root() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test/fixtures/logs")
}

/// A temp copy of the committed fixture tree (tests that add bad files work on the copy).
pub fn fixture_home() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    copy_dir(&fixtures_root(), d.path());
    d
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        let t = to.join(e.file_name());
        if p.is_dir() {
            copy_dir(&p, &t);
        } else {
            std::fs::copy(&p, &t).unwrap();
        }
    }
}

#[test]
#[ignore = "writes test/fixtures/logs; run on purpose to regenerate"]
fn regenerate_fixtures() {
    let root = fixtures_root();
    let _ = std::fs::remove_dir_all(&root);
    write_tree(&root, &fixture_files());
}
