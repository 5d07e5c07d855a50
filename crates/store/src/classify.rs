//! Which surface messages `sessions_read` shows: the label of a message and its class
//! (conversation, harness-injected, system/plugin notice, empty), from the tables of injected
//! prefixes, forms and producers (docs/output-contract.md "sessions_read — output").

use crate::events::{MessageLite, Role};

/// Request ids this plugin puts on its deliveries (`source.rpcId`): the prefix `mail` mints them with.
pub use base::names::REQUEST_ID_PREFIX as REQUEST_PREFIX;

/// How a surface message is filtered by `sessions_read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Human prompts, model replies, tool results, compaction checkpoints, agent relays.
    Conversation,
    /// Harness-injected context (hidden unless `include_injected`).
    Injected,
    /// System/developer messages and plugin-authored notices (hidden unless `include_system`).
    System,
    /// A node that projects to no message (empty assistant/system/developer content).
    Empty,
}

/// Content prefixes of harness-injected `user/message`s (seed 000 §sessions_read "What it filters";
/// the first prefix was lost in the seed's conversion, `<system-reminder>` is our reconstruction:
/// agent-instructions bakes it into content [R8 `packages/core/session/src/surface.ts` `deriveEventMessage` comment]).
pub const INJECTED_PREFIXES: [&str; 4] = [
    "<system-reminder>",
    "[MNEMON]",
    "MNEMON RUNTIME MEMORY SNAPSHOT",
    "Current runtime context.",
];

/// Context forms that are injected context rather than conversation
/// [R8 `packages/llm/llm/src/message.ts` `ContextForm`].
const INJECTED_FORMS: [&str; 4] = ["instructions", "catalog", "snapshot", "recall"];

/// Producers (rc.8 `plugin` names and their V4 kinds) whose messages are injected context
/// [Z17 `packages/session/session-format-v3-to-v4/src/sources.ts` `RENAMED_PRODUCERS`,
/// `RELEASED_SAME_NAME_PRODUCERS`; R8 `packages/core/agent-loop/src/runtime-context.ts` `SOURCE`].
const INJECTED_PRODUCERS: [&str; 15] = [
    "runtime-context",
    "system-prompt",
    "@deepseek-ai/dsh-system-prompt",
    "agent-instructions",
    "time-context",
    "tmux-context",
    "skill-invocation",
    "skill-catalog",
    "session-reference",
    "ptc-mode",
    "tools-code-mode",
    "tools-ptc",
    "goal",
    "tool-goal",
    "model-selection",
];

/// Label and filter class of one surface message.
pub fn classify(role: Role, m: &MessageLite<'_>) -> (Class, String) {
    let src = &m.source;
    let kind = src.kind.as_deref().unwrap_or("");
    let label = match kind {
        "user" => "user".to_string(),
        "plugin" => match (src.plugin.as_deref(), src.form.as_deref()) {
            (Some(p), Some(f)) => format!("plugin:{p}/{f}"),
            (Some(p), None) => format!("plugin:{p}"),
            _ => "plugin".to_string(),
        },
        "model" => format!(
            "model:{}/{}",
            src.provider.as_deref().unwrap_or("?"),
            src.model.as_deref().unwrap_or("?")
        ),
        "tool" => format!(
            "tool:{}",
            src.call_id
                .as_deref()
                .or(m.tool_call_id.as_deref())
                .unwrap_or("?")
        ),
        "" if role == Role::Tool => format!(
            "tool:{}",
            m.tool_call_id
                .as_deref()
                .or_else(|| m.content.iter().find_map(|b| b.tool_call_id.as_deref()))
                .unwrap_or("?")
        ),
        "" => "unknown".to_string(),
        k => k.to_string(),
    };
    // Empty system/developer/assistant content projects to no message [Z17 `surface.ts` `deriveEventMessage`;
    // R8 same for assistant/message].
    let class = match role {
        Role::Assistant | Role::System | Role::Developer if m.content.is_empty() => Class::Empty,
        Role::System | Role::Developer => Class::System,
        Role::Assistant | Role::Tool => Class::Conversation,
        Role::User => classify_user(m),
    };
    (class, label)
}

fn classify_user(m: &MessageLite<'_>) -> Class {
    let src = &m.source;
    let first_text = m
        .content
        .iter()
        .find(|b| b.ty.as_deref() == Some("text"))
        .and_then(|b| b.text.as_deref());
    if let Some(t) = first_text {
        let t = t.trim_start();
        if INJECTED_PREFIXES.iter().any(|p| t.starts_with(p)) {
            return Class::Injected;
        }
    }
    let kind = src.kind.as_deref().unwrap_or("");
    if kind == "user" {
        return Class::Conversation;
    }
    let producer = if kind == "plugin" {
        src.plugin.as_deref().unwrap_or("")
    } else {
        kind
    };
    // Compaction checkpoint: rc.8 `{kind:'plugin', plugin:'compact'}` [R8 `packages/compaction/compaction/src/checkpoint.ts`
    // `COMPACT_CHECKPOINT_MARKER`], V4 `compact-checkpoint` [Z17 `sources.ts` `RENAMED_PRODUCERS`]: the condensed history.
    if producer == "compact" || producer == "compact-checkpoint" {
        return Class::Conversation;
    }
    // A message another agent addressed to this one (`relay` form; V4 `agent-message`).
    if src.form.as_deref() == Some("relay") || producer == "agent-message" {
        return Class::Conversation;
    }
    if src
        .form
        .as_deref()
        .is_some_and(|f| INJECTED_FORMS.contains(&f))
        || INJECTED_PRODUCERS.contains(&producer)
    {
        return Class::Injected;
    }
    // Any other plugin/producer-authored message (notices, reminders, hooks, approvals, unknown kinds).
    Class::System
}
