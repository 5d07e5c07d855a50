// Model-facing tool definitions: names, argument names and descriptions.
// Names and argument names are stable: transcripts cite them.
// Argument schemas are written in the dsh-tools value-schema DSL: every object node declares
// additionalProperties, `required` is only ever `true` (rc.8 packages/core/tools/src/schema.ts).

const SEND_SESSION_MESSAGE_DESCRIPTION = [
  'Send a message from this session to the agent in another session of the same DSH host.',
  'The plugin prepends a header line `From <your session id> ：` — that line tells the receiver the message came from another agent (not from the human) and where to answer. You never write that header yourself; a body that carries one is refused.',
  'When YOU receive a user message that starts with `From session-… ：`, it was sent by the agent of that session, not by your human. To answer it, call send_session_message with toSessionId set to the id from that header.',
  'Conventions: answer only when the message asks for something or explicitly asks for a reply (a reply is not a message to auto-answer); stop after two or three exchanges and take the conclusion back to your human; do not queue several messages before the other side answers (they stack up in its inbox).',
  'urgent=false (default): the message waits until the target finishes its current turn and becomes its next turn. urgent=true: it is inserted at the next step of the turn the target is running now — use it only for a correction, retraction or changed conclusion, i.e. when this message makes an earlier one wrong.',
  'Delivery is one-way and asynchronous: the result says the message was accepted into the target inbox, not that it was read. Find session ids with sessions_list; you cannot message yourself or a subagent session.',
  'Sends are budgeted per target and per sender in a sliding window (the result shows what is left), and a third queued message to a session that has not yet taken your earlier ones is refused: wait for its answer instead.',
].join('\n')

const SESSIONS_LIST_DESCRIPTION = [
  'List the other sessions of this DSH host (newest first, this session last), with live/cold state, workspace, preset, title, and what a send to each can do right now.',
  'Use the ids with sessions_read (read its conversation) and sessions_send / send_session_message (deliver a message). Subagent sessions are listed with scope "subagents" or "all" but are not messageable.',
].join('\n')

const SESSIONS_READ_DESCRIPTION = [
  'Read a bounded, text-only window of another session\'s current conversation (newest message first): user messages, assistant text and tool results with their source labels. Never its reasoning.',
  'Reading never wakes or resumes the session and never spends its tokens. Harness-injected context and plugin notices are hidden unless include_injected / include_system are set. Truncation is always marked.',
].join('\n')

const SESSIONS_SEND_DESCRIPTION = [
  'Deliver a message into another top-level session\'s inbox. mode "queue" (default) becomes that session\'s next turn without interrupting it; mode "steer" is inserted into the turn it is running now (use it when the target is working on the thing the message is about).',
  'The delivered body is framed so the receiver knows it came from another session and can reply by id. The call returns when the inbox accepts the message, never with the reply: read the reply later with sessions_read.',
].join('\n')

const text = {
  schema: { type: 'string' },
  render: (_args, value) => [{ type: 'text', text: value }],
}

/** The four tool specs (before defineTool). */
export function toolSpecs() {
  return [
    {
      name: 'send_session_message',
      description: SEND_SESSION_MESSAGE_DESCRIPTION,
      parameters: {
        toSessionId: { type: 'string', required: true, description: 'Target session id (as listed by sessions_list). When answering, use the id from the From header.' },
        message: { type: 'string', required: true, description: 'What to say. The plugin prepends the From header.' },
        urgent: { type: 'boolean', description: 'false (default): queue for the target\'s next turn. true: interject at the next step of its running turn — only for corrections.' },
      },
      output: text,
    },
    {
      name: 'sessions_list',
      description: SESSIONS_LIST_DESCRIPTION,
      parameters: {
        query: { type: 'string', description: 'Case-insensitive filter over id, title, workspace path and preset. Empty lists the most recent.' },
        scope: { type: 'string', enum: ['top-level', 'subagents', 'all'], description: 'Defaults to top-level.' },
        live_only: { type: 'boolean', description: 'Only sessions live right now. Defaults to false.' },
        limit: { type: 'integer', description: 'Rows to return, 1-200 (further capped by the deployment).' },
      },
      output: text,
    },
    {
      name: 'sessions_read',
      description: SESSIONS_READ_DESCRIPTION,
      parameters: {
        session_id: { type: 'string', required: true, description: 'Durable session id, as returned by sessions_list.' },
        max_messages: { type: 'integer', description: 'Messages to return, 1-100 (further capped by the deployment).' },
        include_injected: { type: 'boolean', description: 'Include harness-injected context. Defaults to false.' },
        include_system: { type: 'boolean', description: 'Include system, developer and plugin-authored notices. Defaults to false.' },
      },
      output: text,
    },
    {
      name: 'sessions_send',
      description: SESSIONS_SEND_DESCRIPTION,
      parameters: {
        session_id: { type: 'string', required: true, description: 'Durable id of the target session.' },
        message: { type: 'string', required: true, description: 'Body to deliver.' },
        mode: { type: 'string', enum: ['queue', 'steer'], description: 'queue (default): next turn. steer: next step of the running turn.' },
      },
      output: text,
    },
  ]
}
