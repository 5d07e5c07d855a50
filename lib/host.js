// Host facts the Rust core cannot see from outside the host process: the caller's runtime
// identity, the live agent registry, the web server's bound port, the runtime version.
// Everything here is read defensively: a missing or changed host API yields "unknown", never a throw.
import { randomUUID } from 'node:crypto'
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import { attempt } from './attempt.js'
import { SessionEvents } from './observe.js'

const require = createRequire(import.meta.url)

/**
 * A host service looked up at call time instead of injected (`ctx.get(name)`, cordis 4; a test double
 * without `get` carries it as a property). For services some profiles lack: the headless profile has no
 * `webServer`, rc.8 has no `sessionController`. undefined when absent.
 */
export function service(ctx, name) {
  return attempt(() => (typeof ctx?.get === 'function' ? ctx.get(name) : ctx?.[name]) ?? undefined, undefined)
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
 * `sessions` (followSessions): with it, `turn` is the loop guard's evidence of who started the caller's
 * turn (crates/core/src/mail/chain.rs), as the session published it; null when not seen whole.
 */
export function callerOf(exec, { sessions = null } = {}) {
  const agent = attempt(() => exec?.agent, undefined)
  if (agent === undefined || agent === null) return null
  const sessionId = attempt(() => agent.session?.id, undefined)
  const agentId = attempt(() => agent.id, undefined)
  const id = sessionId === undefined ? agentId : sessionId
  return {
    sessionId: sessionId === undefined ? null : String(sessionId),
    agentId: agentId === undefined ? null : String(agentId),
    title: null,
    ...(sessions !== null ? { turn: id === undefined ? null : attempt(() => sessions.turnOf(String(id)), null) } : {}),
  }
}

/** The per-context follower of `session/event` (lib/observe.js), created once by `apply`. */
const followed = new WeakMap()

/** Follow the sessions of this plugin context (idempotent): the source of turn evidence, awaiting-user and file activity. */
export function followSessions(ctx) {
  let s = followed.get(ctx)
  if (s === undefined) {
    s = new SessionEvents(ctx)
    followed.set(ctx, s)
  }
  return s
}

function plainHeader(header) {
  if (header === null || typeof header !== 'object') return {}
  return attempt(() => JSON.parse(JSON.stringify(header)), {})
}

/** The request ids (`source.rpcId`) of inbox messages, in order. */
function rpcIdsOf(messages) {
  const out = []
  for (const m of messages ?? []) {
    const id = attempt(() => m?.source?.rpcId, undefined)
    if (typeof id === 'string') out.push(id)
  }
  return out
}

/**
 * A live agent's pending inbox, copied (rc.8 packages/core/agent/src/runtime-types.ts `AgentInbox`: `nextTurn`
 * waits for the running turn to end, `nextStep` lands at its next step), with their request ids: the one reading
 * of "what is waiting in that session" (the send's stacking guard and note, the mailbox's dedup).
 */
export function pendingOf(agent) {
  const inbox = attempt(() => agent?.inbox, undefined)
  const nextTurn = attempt(() => [...(inbox?.nextTurn ?? [])], [])
  const nextStep = attempt(() => [...(inbox?.nextStep ?? [])], [])
  const nextTurnRpcIds = rpcIdsOf(nextTurn)
  return { nextTurn: nextTurn.length, nextTurnRpcIds, rpcIds: [...nextTurnRpcIds, ...rpcIdsOf(nextStep)] }
}

/** Deep-freeze a plain value (rc.8 messages are immutable once made). */
function deepFreeze(v) {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const x of Object.values(v)) deepFreeze(x)
  }
  return v
}

/**
 * A user-role message as the host makes one (rc.8 `createUserMessage`, packages/llm/src/types/message.ts:
 * `{...input, role:'user', id: randomUUID()}`, deep-frozen): one text part and its `source` — `{kind:'user',
 * rpcId}` for a delivery (what rc.8's own prompt route admits), `{kind:'plugin', plugin, form, …}` for a notice.
 */
export function userMessage(text, source) {
  return deepFreeze({ role: 'user', content: [{ type: 'text', text }], source: { ...source }, id: randomUUID() })
}

/**
 * Ask the host to write a session's pending events now, bounded by `timeoutMs` (rc.8 `ctx.sessions.flush(session)`,
 * packages/core/session/src/index.ts `SessionStore.flush`: "consumers that flush themselves before reading storage
 * must come through here"; 0.1.7's built-in peer sessions call the same). true once flushed; false on a host without
 * it, a failure, or the timeout.
 */
export async function flushSession(ctx, session, timeoutMs) {
  const flush = attempt(() => ctx.sessions?.flush, undefined)
  if (typeof flush !== 'function' || session === undefined || session === null) return false
  let timer
  try {
    return await Promise.race([
      Promise.resolve(flush.call(ctx.sessions, session)).then(() => true, () => false),
      new Promise(resolve => { timer = setTimeout(resolve, timeoutMs, false) }),
    ])
  } catch {
    return false
  } finally {
    clearTimeout(timer)
  }
}

/** cordis' key for a traceable proxy's target (cordis 4.0.1 src/utils.ts `symbols.original`, `createTraceable`). */
const ORIGINAL = Symbol.for('cordis.original')

/**
 * The service object behind cordis' traceable proxy, for reads only (a registry lookup): through the proxy
 * each method read makes a shadow context and a method proxy, and each call runs with a shadowed `this`
 * (~50-70 µs of the host's main thread for one `get` here; rc.8's `AgentRegistry.get(id)` reads only its own
 * map). The other registry reads (lib/mailbox.js, lib/notice.js) keep going through the proxy. Without the key
 * (another cordis) or when the original is no object, the proxy.
 */
function readable(service) {
  const raw = attempt(() => service?.[ORIGINAL], undefined)
  return raw !== null && typeof raw === 'object' ? raw : service
}

/**
 * The agents live in this process (rc.8 `AgentRegistry.list()`, packages/core/agent/src/index.ts).
 * awaiting-user and file activity come from the events the sessions published (followSessions; O(1) per
 * agent, never a read of a session's event array). awaiting-user: a running turn with an `approval/asked`
 * without its `approval/decided` (rc.8 packages/interaction/user-approval `request()`), or an
 * `ask_user_question` call without its result (packages/interaction/tool-ask-user); 0.1.7's built-in
 * derives the same (kilinthecode/deepseek-harness packages/experimental/peer-sessions/src/index.ts `statusOf()`).
 */
export function liveAgents(ctx, { activity = true, files = activity, only = null, registryOf = null } = {}) {
  // `only`: just the agent with that id (a send needs its target alone), by the registry's own map lookup
  // (rc.8 `AgentRegistry.get(id)`; agent id = session id, its `resolve: sessionId => this.get(sessionId)`), so
  // a send costs the same whatever else is live; without `get`, the list filtered to that id. At most one
  // service lookup per call (cordis resolves `ctx.agents` through a proxy that builds an Error each time),
  // none with `registryOf`, the registry as `serviceMemo` keeps it.
  const registry = typeof registryOf === 'function' ? attempt(registryOf, undefined) : attempt(() => ctx.agents, undefined)
  const all = () => attempt(() => registry?.list?.(), []) ?? []
  let agents
  // (the registry's own `get`, read once: see `readable`)
  const own = typeof only === 'string' ? readable(registry) : undefined
  const get = attempt(() => own?.get, undefined)
  if (typeof only !== 'string') agents = all()
  else if (typeof get === 'function') {
    const one = attempt(() => get.call(own, only), undefined)
    agents = one !== undefined && one !== null && attempt(() => String(one.id), null) === only ? [one] : []
  } else agents = all().filter(a => attempt(() => String(a.id), null) === only)
  const sessions = followed.get(ctx) ?? null
  return agents.map(agent => {
    const pending = pendingOf(agent)
    const id = String(agent.id)
    const sid = String(attempt(() => agent.session?.id, undefined) ?? id)
    let status = String(attempt(() => agent.status, '') ?? '')
    if (activity && status === 'running' && sessions !== null && attempt(() => sessions.awaitingUser(sid), false)) status = 'awaiting-user'
    return {
      id,
      status,
      header: plainHeader(attempt(() => agent.session?.header, undefined)),
      pendingRpcIds: pending.rpcIds,
      pendingNextTurnRpcIds: pending.nextTurnRpcIds,
      pendingNextTurn: pending.nextTurn,
      files: files && sessions !== null ? attempt(() => sessions.filesOf(sid), []) : [],
    }
  })
}

/** How long a live read waits for the host's flush. */
const FLUSH_TIMEOUT_MS = 500

/**
 * What a live read needs from the host, without copying any event: ask the host to write the
 * session's pending events now (`flushSession`), then report how many events it holds (`session.seq`,
 * the log length, O(1)). The core reads the file through its incremental cache and waits briefly if the
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
  const flushed = await flushSession(ctx, session, FLUSH_TIMEOUT_MS)
  const seq = attempt(() => session.seq, undefined)
  return { liveSeq: Number.isSafeInteger(seq) && seq >= 0 ? seq : null, liveFlushed: flushed }
}

/**
 * A value derived from one host service, kept until cordis says that service changed: cordis emits
 * `internal/service` with the service's name whenever one is provided, replaced or removed (cordis 4.0.1
 * lib/index.js `ReflectService.notify`, to every context of the same isolate). A lookup through the
 * context costs a send ~0.1–0.2 ms of the host's main thread: the context proxy builds an Error and runs
 * the `internal/get` waterfall for every service read (`ReflectService.handler.get`), and wraps the service
 * in a tracing proxy whose property reads each make a shadow context (`createTraceable`). Only a found
 * value (not null or undefined) is kept; a context without `on` (a test double) derives it every time.
 * @param {any} ctx plugin context
 * @param {string} name the service whose change drops the value
 * @param {() => any} derive reads the value through the context
 * @returns {() => any}
 */
export function serviceMemo(ctx, name, derive) {
  let kept
  const listening = attempt(() => {
    ctx.on('internal/service', changed => { if (changed === name) kept = undefined })
    return true
  }, false)
  return () => {
    if (kept !== undefined) return kept
    const v = derive()
    if (listening && v !== null && v !== undefined) kept = v
    return v
  }
}

/**
 * `http://<host>:<port>` of the host's web server, from the config override or the `webServer` service
 * (rc.8 packages/host/webserver/src/index.ts `get port()` is the bound port, also for `--port 0`).
 * A server bound to 0.0.0.0 is reached on loopback. null: this profile has no web server.
 */
export function baseUrlOf(ctx, config) {
  const web = service(ctx, 'webServer')
  const port = config.port > 0 ? config.port : attempt(() => web?.port, undefined)
  if (typeof port !== 'number' || !(port > 0)) return null
  let host = config.host?.trim() || attempt(() => web?.host, '127.0.0.1') || '127.0.0.1'
  if (host === '0.0.0.0' || host === '::') host = '127.0.0.1'
  if (host.includes(':') && !host.startsWith('[')) host = `[${host}]`
  return `http://${host}:${port}`
}

/**
 * The browser-session secret from the host's credentials service, when it has records
 * (0.1.7: `ctx.credentials.readRecord(credentialKey('client-connection', 'browser-session'))`
 * → `{kind:'grant', payload:{version:1, secret}}`, packages/credentials/credentials/README.md and
 * packages/client/connection/README.md). A CredentialKey is a branded `<owner>/<id>` string.
 * null on rc.8 (no records API; then synchronously, not a promise) or on any failure: the core then reads
 * $DSH_HOME/.credentials.yaml.
 * The value is handed to the core only; it is never logged or returned.
 */
export function browserSessionSecret(ctx) {
  const credentials = attempt(() => ctx.credentials, undefined)
  // rc.8 has no records API: answer at once, without a promise (a send awaits only when there is a record to read)
  if (typeof credentials?.readRecord !== 'function') return null
  return readSecret(credentials)
}

async function readSecret(credentials) {
  try {
    const record = await credentials.readRecord('client-connection/browser-session')
    const secret = record?.payload?.secret
    return typeof secret === 'string' && secret !== '' ? secret : null
  } catch {
    return null
  }
}

/** How long "this host has no credentials records API" is remembered (see `secretReader`). */
const NO_RECORDS_TTL_MS = 30_000

/**
 * `browserSessionSecret` for one plugin instance, remembering for NO_RECORDS_TTL_MS that the host has no
 * records API. rc.8 has no `credentials` service with `readRecord`, and looking an absent optional service up
 * costs ~0.2 ms on every send (cordis's context proxy builds and throws an Error: `ReflectService.handler.get`,
 * packages/cordis/src/reflect.ts). The answer only decides whether the core gets the secret from the host or
 * reads $DSH_HOME/.credentials.yaml itself (delivery/credentials.rs), so a stale "no" costs nothing but that fallback.
 */
export function secretReader(ctx, { ttlMs = NO_RECORDS_TTL_MS, now = Date.now } = {}) {
  let noRecordsUntil = -Infinity
  return () => {
    if (now() < noRecordsUntil) return null
    const credentials = attempt(() => ctx.credentials, undefined)
    if (typeof credentials?.readRecord !== 'function') {
      noRecordsUntil = now() + ttlMs
      return null
    }
    return readSecret(credentials)
  }
}
