// Host facts the Rust core cannot see from outside the host process: the caller's runtime
// identity, the live agent registry, the web server's bound port, the runtime version.
// Everything here is read defensively: a missing or changed host API yields "unknown", never a throw.
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'

const require = createRequire(import.meta.url)

/** `fn()`, or `fallback` when it throws or yields undefined: every read of a host object goes through it. */
export function attempt(fn, fallback) {
  try {
    const v = fn()
    return v === undefined ? fallback : v
  } catch {
    return fallback
  }
}

/** The DSH runtime version as seen through the peer `@deepseek-ai/dsh-tools`, or null. */
export function detectHostVersion() {
  return attempt(() => {
    const file = require.resolve('@deepseek-ai/dsh-tools/package.json')
    return JSON.parse(readFileSync(file, 'utf8')).version ?? null
  }, null)
}

/**
 * The caller as the runtime reports it: `exec.agent.session.id`, falling back to `exec.agent.id`
 * (rc.8 packages/core/agent/src/runtime-types.ts `Agent.id` / `Agent.session`). Never from arguments.
 */
export function callerOf(exec, { withTurn = false } = {}) {
  const agent = attempt(() => exec?.agent, undefined)
  if (agent === undefined || agent === null) return null
  const sessionId = attempt(() => agent.session?.id, undefined)
  const agentId = attempt(() => agent.id, undefined)
  return {
    sessionId: sessionId === undefined ? null : String(sessionId),
    agentId: agentId === undefined ? null : String(agentId),
    title: null,
    ...(withTurn ? { turn: turnMessagesOf(agent) } : {}),
  }
}

/** Longest walk back through a session's events (a turn longer than this is read from its newest part). */
const MAX_EVENTS_BACK = 20_000

/**
 * The session's events, newest last, without copying when the host hands out its frozen snapshot
 * (rc.8 `Session.events` getter, packages/core/session/src/index.ts; 0.1.5+ `snapshotEvents()`). null when
 * neither exists.
 */
function eventsOf(session) {
  const events = attempt(
    () => (Array.isArray(session?.events) ? session.events : typeof session?.snapshotEvents === 'function' ? session.snapshotEvents() : undefined),
    undefined,
  )
  return Array.isArray(events) ? events : null
}

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

/**
 * The user-role messages of the agent's current turn as its session recorded them (newest last): the
 * loop guard's evidence of who started the turn (crates/core/src/mail/chain.rs). Walks back from the
 * newest event to the previous turn's `turn/end`. null when the events cannot be seen.
 */
function turnMessagesOf(agent) {
  const events = eventsOf(attempt(() => agent.session, undefined))
  if (events === null) return null
  const out = []
  const stop = Math.max(0, events.length - MAX_EVENTS_BACK)
  for (let i = events.length - 1; i >= stop; i--) {
    const e = events[i]
    if (e?.type === 'turn/end') break
    if (e?.type !== 'user/message') continue
    const m = messageOf(e)
    const src = m?.source ?? {}
    const str = v => (typeof v === 'string' ? v : null)
    out.push({ seq: typeof e.seq === 'number' ? e.seq : null, kind: str(src.kind), rpcId: str(src.rpcId), plugin: str(src.plugin), form: str(src.form), text: firstText(m) })
    if (out.length >= 64) break
  }
  return out.reverse()
}

/**
 * Is the running turn waiting on its human? rc.8 records both ways a turn can: an `approval/asked` with no
 * `approval/decided` of the same id yet (packages/interaction/user-approval/src/index.ts `request()` appends
 * the pair around the answerer's wait), and a `tool/call` of `ask_user_question` with no `tool/result` yet
 * (packages/interaction/tool-ask-user: the call awaits `ctx.userQuestions.ask()`, which records nothing
 * else). 0.1.7's built-in derives the same from `user-questions/request` and `approval/asked|decided`
 * (kilinthecode/deepseek-harness packages/experimental/peer-sessions/src/index.ts `statusOf()`).
 */
function awaitingUser(events) {
  if (!Array.isArray(events)) return false
  const decided = new Set()
  const answered = new Set()
  const stop = Math.max(0, events.length - MAX_EVENTS_BACK)
  for (let i = events.length - 1; i >= stop; i--) {
    const e = events[i]
    const t = e?.type
    if (t === 'turn/end' || t === 'turn/start') break
    if (t === 'approval/decided') decided.add(e.data?.id)
    else if (t === 'approval/asked' && !decided.has(e.data?.id)) return true
    else if (t === 'tool/result') answered.add(messageOf(e)?.source?.callId ?? e.data?.callId)
    else if (t === 'tool/call' && e.data?.name === 'ask_user_question' && !answered.has(e.data?.callId)) return true
  }
  return false
}

function plainHeader(header) {
  if (header === null || typeof header !== 'object') return {}
  return attempt(() => JSON.parse(JSON.stringify(header)), {})
}

function rpcIdsOf(messages) {
  const out = []
  for (const m of messages ?? []) {
    const id = attempt(() => m?.source?.rpcId, undefined)
    if (typeof id === 'string') out.push(id)
  }
  return out
}

/** Write/edit tools whose successful call changed a file, and the argument naming it (rc.8 packages/fs/tool-fs
 * `write`/`edit` {file_path}, packages/fs/tool-str-replace-editor `str_replace_editor` {command, path}; `view` reads). */
const WRITE_TOOLS = { write: 'file_path', edit: 'file_path', str_replace_editor: 'path' }
/** How far back file activity counts, and how many files one row carries. */
const RECENT_MS = 30 * 60_000
const MAX_FILES = 12
/** Longest walk back for file activity: recent writes are near the end, and a log whose event times run
 * ahead of this clock must not make every listing walk MAX_EVENTS_BACK events per live session
 * (bench/README.md: +15–30 ms of host main-thread time per list with three 90k-event sessions). */
const MAX_ACTIVITY_EVENTS_BACK = 2_000

function eventTimeMs(e) {
  const t = e?.time
  if (typeof t === 'number') return t
  if (typeof t === 'string') { const n = Date.parse(t); return Number.isNaN(n) ? null : n }
  return null
}

/**
 * Files the session's write/edit tools changed in the last 30 minutes, newest first, as the calls named
 * them (the core makes them relative to the checkout): a `tool/call` of a write tool whose `tool/result`
 * is not an error. Bounded: the newest MAX_ACTIVITY_EVENTS_BACK events, MAX_FILES files, 4 KiB arguments.
 */
function fileActivityOf(events, now = Date.now()) {
  if (!Array.isArray(events)) return []
  const failed = new Set()
  const succeeded = new Set()
  const out = []
  const stop = Math.max(0, events.length - MAX_ACTIVITY_EVENTS_BACK)
  for (let i = events.length - 1; i >= stop && out.length < MAX_FILES; i--) {
    const e = events[i]
    const t = eventTimeMs(e)
    if (t !== null && now - t > RECENT_MS) break
    if (e?.type === 'tool/result') {
      const m = messageOf(e)
      const id = m?.source?.callId ?? e.data?.callId
      const block = Array.isArray(m?.content) ? m.content.find(b => b?.type === 'tool-result') : undefined
      if (block?.isError === true || m?.isError === true) failed.add(id)
      else succeeded.add(id)
      continue
    }
    if (e?.type !== 'tool/call') continue
    const key = WRITE_TOOLS[e.data?.name]
    if (key === undefined || !succeeded.has(e.data?.callId) || failed.has(e.data?.callId)) continue
    let args = e.data?.arguments
    if (typeof args === 'string') args = args.length > 4096 ? null : attempt(() => JSON.parse(args), null)
    if (e.data?.name === 'str_replace_editor' && args?.command === 'view') continue
    const path = args?.[key]
    if (typeof path !== 'string' || path === '' || path.length > 1024) continue
    if (!out.some(f => f.path === path)) out.push({ path, timeMs: t })
  }
  return out
}

/** The agents live in this process (rc.8 `AgentRegistry.list()`, packages/core/agent/src/index.ts). */
export function liveAgents(ctx, { activity = true, files = activity } = {}) {
  const agents = attempt(() => ctx.agents?.list?.(), []) ?? []
  return agents.map(agent => {
    const inbox = attempt(() => agent.inbox, undefined)
    const nextTurn = attempt(() => [...(inbox?.nextTurn ?? [])], [])
    const nextStep = attempt(() => [...(inbox?.nextStep ?? [])], [])
    let status = String(attempt(() => agent.status, '') ?? '')
    // awaiting-user and file activity walk back from the newest event (never the whole history); a read
    // needs neither, presence and send need the status only, and only sessions_list shows file activity
    const events = activity || files ? attempt(() => eventsOf(agent.session), null) : null
    if (activity && status === 'running' && attempt(() => awaitingUser(events), false)) status = 'awaiting-user'
    return {
      id: String(agent.id),
      status,
      header: plainHeader(attempt(() => agent.session?.header, undefined)),
      pendingRpcIds: rpcIdsOf([...nextTurn, ...nextStep]),
      pendingNextTurnRpcIds: rpcIdsOf(nextTurn),
      pendingNextTurn: nextTurn.length,
      files: files ? attempt(() => fileActivityOf(events), []) : [],
    }
  })
}

const FLUSH_TIMEOUT_MS = 500

/**
 * What a live read needs from the host, without copying any event: ask the host to write the
 * session's pending events now (rc.8 `ctx.sessions.flush(session)`, packages/core/session/src/index.ts
 * "consumers that flush themselves before reading storage must come through here"; the same call the
 * 0.1.7 built-in peer sessions make), then report how many events it holds (`session.seq`, the
 * log length, O(1)). The core reads the file through its incremental cache and waits briefly if the
 * file is still behind. Never `session.events` / `snapshotEvents()` (a full copy on the main thread;
 * `snapshotEvents` is deprecated in 0.1.7, "new calls are prohibited").
 * null when the session is not live here.
 */
export async function liveReadFacts(ctx, id) {
  if (typeof id !== 'string') return null
  const agent = attempt(() => ctx.agents?.get?.(id), undefined)
  if (agent === undefined || agent === null) return null
  const session = attempt(() => agent.session, undefined)
  if (session === undefined || session === null) return null
  let flushed = false
  const flush = attempt(() => ctx.sessions?.flush, undefined)
  if (typeof flush === 'function') {
    let timer
    try {
      flushed = await Promise.race([
        Promise.resolve(flush.call(ctx.sessions, session)).then(() => true, () => false),
        new Promise(resolve => { timer = setTimeout(resolve, FLUSH_TIMEOUT_MS, false) }),
      ])
    } catch {
      flushed = false
    } finally {
      clearTimeout(timer)
    }
  }
  const seq = attempt(() => session.seq, undefined)
  return { liveSeq: Number.isSafeInteger(seq) && seq >= 0 ? seq : null, liveFlushed: flushed }
}

/**
 * `http://<host>:<port>` of the host's web server, from the config override or `ctx.webServer`
 * (rc.8 packages/host/webserver/src/index.ts `get port()` is the bound port, also for `--port 0`).
 * A server bound to 0.0.0.0 is reached on loopback. null: this profile has no web server.
 */
export function baseUrlOf(ctx, config) {
  const port = config.port > 0 ? config.port : attempt(() => ctx.webServer?.port, undefined)
  if (typeof port !== 'number' || !(port > 0)) return null
  let host = config.host?.trim() || attempt(() => ctx.webServer?.host, '127.0.0.1') || '127.0.0.1'
  if (host === '0.0.0.0' || host === '::') host = '127.0.0.1'
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`
  return `http://${host}:${port}`
}

/**
 * The browser-session secret from the host's credentials service, when it has records
 * (0.1.7: `ctx.credentials.readRecord(credentialKey('client-connection', 'browser-session'))`
 * → `{kind:'grant', payload:{version:1, secret}}`, packages/credentials/credentials/README.md and
 * packages/client/connection/README.md). A CredentialKey is a branded `<owner>/<id>` string.
 * null on rc.8 (no records API) or on any failure: the core then reads $DSH_HOME/.credentials.yaml.
 * The value is handed to the core only; it is never logged or returned.
 */
export async function browserSessionSecret(ctx) {
  const credentials = attempt(() => ctx.credentials, undefined)
  if (typeof credentials?.readRecord !== 'function') return null
  try {
    const record = await credentials.readRecord('client-connection/browser-session')
    const secret = record?.payload?.secret
    return typeof secret === 'string' && secret !== '' ? secret : null
  } catch {
    return null
  }
}
