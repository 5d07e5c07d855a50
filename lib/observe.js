// What the shim knows about each live session's current turn, folded from the events the host publishes
// as they are appended — never by reading a session's event array. rc.8 `Session.append()` publishes every
// accepted event on the cordis `session/event` firehose as `(session, event)` (packages/core/session/src/index.ts
// `collectSessionCallbacks(…, 'session/event', …)`; rc.8's token meter and file-reference plugins listen the
// same way), and 0.1.7's built-in peer sessions fold their presence and activity rows from the same
// listener (kilinthecode/deepseek-harness packages/experimental/peer-sessions/src/index.ts
// `observeSessionEvent`). Reading `session.events` instead copies the whole log on the host's main thread
// whenever it grew (rc.8 getter `Object.freeze([...this.log])`), and 0.1.7's `snapshotEvents()` is
// deprecated ("new calls are prohibited", shared/host/plugin-contract.md §12).
//
// Each event costs O(1); every per-session structure is bounded, and a session's state is dropped when its
// agent is disposed. A session first seen in the middle of a turn (the plugin mounted while it ran) has no
// turn evidence until its next `turn/start`: `turnOf` answers null then (the loop guard treats it as
// unknown: a new chain, the budgets stay the backstop).
import { attempt } from './attempt.js'

/** Most sessions followed at once (live agents; the oldest state is dropped beyond it). */
const MAX_SESSIONS = 1024
/** User messages of one turn kept: the first ones (the turn's opening) and the newest. The opening is
 * kept apart from the window of the newest, so the message that opened a turn — a delivery of ours, or the
 * human's prompt — is never pushed out by the messages that follow it (harness reminders, context):
 * rc.8 appends `turn/start`, then `step/start` and the messages claimed from the next-turn inbox as the
 * turn's first `user/message` events (packages/core/agent-loop/src/agent.ts `turn()` → `preStep('next-turn')`
 * → `session.append('user/message', …)`; the runtime context is appended after them). Issue 16 #3 (c). */
const MAX_OPENING_MESSAGES = 16
const MAX_RECENT_MESSAGES = 48
/** Characters of a delivery of ours kept: its frame's head, where the host recorded the hop it was sent at
 * (`relay: hop N of M`, read back by the core's loop guard); 80 of every other message. */
const OUR_TEXT = 2048
const OUR_PREFIX = 'dsh-session-mail:'
/** Most open approvals / questions / write calls tracked in one session. */
const MAX_OPEN = 256
/** Request ids whose turn ended, kept per session (newest). */
const MAX_ENDED = 64
/** Files one session keeps, newest first, and how long a change counts as recent. */
const MAX_FILES = 12
const RECENT_MS = 30 * 60_000

/** Write/edit tools whose successful call changed a file, and the argument naming it (rc.8 packages/fs/tool-fs
 * `write`/`edit` {file_path}, packages/fs/tool-str-replace-editor `str_replace_editor` {command, path}; `view` reads). */
const WRITE_TOOLS = { write: 'file_path', edit: 'file_path', str_replace_editor: 'path' }

function messageOf(event) {
  const d = event?.data
  return d?.message && typeof d.message === 'object' ? d.message : d
}

function firstText(message, max = 80) {
  const c = message?.content
  if (typeof c === 'string') return c.slice(0, max)
  if (!Array.isArray(c)) return ''
  for (const b of c) if (b?.type === 'text' && typeof b.text === 'string') return b.text.slice(0, max)
  return ''
}

function eventTimeMs(e) {
  const t = e?.time
  if (typeof t === 'number') return t
  if (typeof t === 'string') { const n = Date.parse(t); return Number.isNaN(n) ? null : n }
  return null
}

const str = v => (typeof v === 'string' ? v : null)

/**
 * The path a call of tool `name` changes, or null: a write tool's path argument (`args` as the model
 * gave them: an object, or its JSON ≤ 4 KiB; the path ≤ 1 KiB); `view` changes nothing.
 * The one rule for "this call writes a file" (file activity here, the overlap notice in lib/overlap.js).
 */
export function writtenPath(name, args) {
  const key = WRITE_TOOLS[name]
  if (key === undefined) return null
  if (typeof args === 'string') args = args.length > 4096 ? null : attempt(() => JSON.parse(args), null)
  if (name === 'str_replace_editor' && args?.command === 'view') return null
  const path = args?.[key]
  return typeof path === 'string' && path !== '' && path.length <= 1024 ? path : null
}

/** A bounded insertion-ordered set: adding beyond `max` drops the oldest. */
function addBounded(set, value, max) {
  set.add(value)
  if (set.size > max) set.delete(set.values().next().value)
}

class SessionState {
  constructor() {
    /** Saw this turn from its `turn/start`: the turn evidence is whole. */
    this.whole = false
    /** User-role messages of the current turn, newest last: the first MAX_OPENING_MESSAGES, and after
     * them the newest MAX_RECENT_MESSAGES (`recent`). */
    this.opening = []
    this.recent = []
    /** Request ids of messages that landed in the current turn. */
    this.landed = new Set()
    /** Request ids whose turn has ended. */
    this.ended = new Set()
    /** Open `approval/asked` ids and `ask_user_question` call ids of the current turn. */
    this.asks = new Set()
    this.questions = new Set()
    /** Write calls waiting for their result: call id → {path, timeMs}. */
    this.writes = new Map()
    /** Changed files, newest first: {path, timeMs}. */
    this.files = []
  }

  fold(e) {
    switch (e?.type) {
      case 'turn/end':
        // everything after a turn end is seen: the next turn's evidence is whole
        for (const id of this.landed) addBounded(this.ended, id, MAX_ENDED)
        this.opening = []
        this.recent = []
        this.landed.clear()
        this.asks.clear()
        this.questions.clear()
        this.whole = true
        return
      case 'turn/start':
        // rc.8 appends `turn/start` before the turn's user messages (packages/core/agent-loop `turn()`)
        this.asks.clear()
        this.questions.clear()
        if (!this.whole) {
          this.opening = []
          this.recent = []
          this.landed.clear()
          this.whole = true
        }
        return
      case 'user/message': {
        const m = messageOf(e)
        const src = m?.source ?? {}
        const ours = typeof src.rpcId === 'string' && src.rpcId.startsWith(OUR_PREFIX)
        const msg = { seq: typeof e.seq === 'number' ? e.seq : null, kind: str(src.kind), rpcId: str(src.rpcId), plugin: str(src.plugin), form: str(src.form), text: firstText(m, ours ? OUR_TEXT : 80) }
        if (this.opening.length < MAX_OPENING_MESSAGES) this.opening.push(msg)
        else {
          this.recent.push(msg)
          if (this.recent.length > MAX_RECENT_MESSAGES) this.recent.shift()
        }
        if (typeof src.rpcId === 'string') addBounded(this.landed, src.rpcId, MAX_OPEN)
        return
      }
      case 'approval/asked':
        addBounded(this.asks, e.data?.id, MAX_OPEN)
        return
      case 'approval/decided':
        this.asks.delete(e.data?.id)
        return
      case 'tool/call': {
        const id = e.data?.callId
        if (e.data?.name === 'ask_user_question') addBounded(this.questions, id, MAX_OPEN)
        const path = writtenPath(e.data?.name, e.data?.arguments)
        if (path !== null) {
          this.writes.set(id, { path, timeMs: eventTimeMs(e) })
          if (this.writes.size > MAX_OPEN) this.writes.delete(this.writes.keys().next().value)
        }
        return
      }
      case 'tool/result': {
        const m = messageOf(e)
        // rc.8: message.source.callId; 0.1.7: message.toolCallId
        const id = m?.source?.callId ?? m?.toolCallId ?? e.data?.callId
        this.questions.delete(id)
        const call = this.writes.get(id)
        if (call === undefined) return
        this.writes.delete(id)
        const block = Array.isArray(m?.content) ? m.content.find(b => b?.type === 'tool-result') : undefined
        if (block?.isError === true || m?.isError === true) return
        this.files = [call, ...this.files.filter(f => f.path !== call.path)].slice(0, MAX_FILES)
        return
      }
      default:
    }
  }
}

/** The `session/event` fan-out of each plugin context: its one host listener and the plugin's own observers. */
const hubs = new WeakMap()

/**
 * Observe `session/event` of `ctx` through the plugin's one listener on it. The host calls every listener of
 * that firehose for every appended event, and each call costs on its main thread beyond the listener itself:
 * rc.8 collects the listeners through cordis' dispatch, calls each through cordis' tracing proxy (`bind`: its
 * arguments mapped through `getTraceable`) and wraps what it returns in a promise with a rejection handler
 * (packages/core/session/src/index.ts `collectSessionCallbacks`, `invokeContainedSessionObservers`). The
 * plugin's observers (this file's fold, the presence republish, the mailbox's landed and claimed ids, the
 * hand-back at a stop) share one such listener: one call per event instead of one per observer. The listener
 * is added with the first observer and removed with the last. An observer that throws is contained here, as
 * the host contains a listener, and never keeps the others from the event. Returns the unsubscriber, or null
 * when `ctx` has no `on` (nothing is observed).
 */
export function onSessionEvent(ctx, fn) {
  let hub = hubs.get(ctx)
  if (hub === undefined) {
    hub = { fns: [], off: null }
    hubs.set(ctx, hub)
  }
  if (hub.fns.length === 0) {
    const h = hub
    const off = attempt(() => ctx.on('session/event', (session, event) => {
      // a snapshot: an observer added or removed during this event changes the next one
      for (const f of h.fns) {
        try { f(session, event) } catch { /* contained: the other observers still see the event */ }
      }
    }), null)
    if (off === null) return null
    hub.off = off
  }
  hub.fns = [...hub.fns, fn]
  let on = true
  return () => {
    if (!on) return
    on = false
    hub.fns = hub.fns.filter(f => f !== fn)
    if (hub.fns.length === 0 && typeof hub.off === 'function') {
      const off = hub.off
      hub.off = null
      attempt(off, undefined)
    }
  }
}

/** The sessions of one plugin context, followed through `session/event`. */
export class SessionEvents {
  /** @param {any} ctx the plugin context (`on`) */
  constructor(ctx) {
    /** @type {Map<string, SessionState>} */
    this.states = new Map()
    onSessionEvent(ctx, (session, event) => this.observe(attempt(() => session?.id, undefined), event))
    attempt(() => ctx.on('agent/disposed', ({ agent }) => this.states.delete(String(attempt(() => agent.session?.id ?? agent.id, '')))), undefined)
  }

  /** Fold one appended event of session `id`. */
  observe(id, event) {
    if (typeof id !== 'string') return
    let st = this.states.get(id)
    if (st === undefined) {
      st = new SessionState()
      this.states.set(id, st)
      if (this.states.size > MAX_SESSIONS) this.states.delete(this.states.keys().next().value)
    }
    try {
      st.fold(event)
    } catch {
      /* a malformed event changes nothing */
    }
  }

  /** The user-role messages of the session's current turn (newest last; its opening and its newest, the
   * ones between dropped beyond 64), or null when not seen whole. */
  turnOf(id) {
    const st = this.states.get(id)
    return st?.whole ? [...st.opening, ...st.recent].map(m => ({ ...m })) : null
  }

  /** Is the current turn waiting on its human (an open approval or `ask_user_question`)? */
  awaitingUser(id) {
    const st = this.states.get(id)
    return st !== undefined && (st.asks.size > 0 || st.questions.size > 0)
  }

  /** Files the session's write tools changed in the last 30 minutes, newest first. */
  filesOf(id, now = Date.now()) {
    const st = this.states.get(id)
    if (st === undefined) return []
    return st.files.filter(f => f.timeMs === null || now - f.timeMs <= RECENT_MS).map(f => ({ ...f }))
  }

  /** Did a message with this request id land in the session, and has that turn ended? */
  landedAndEnded(id, requestId) {
    return this.states.get(id)?.ended.has(requestId) ?? false
  }
}
