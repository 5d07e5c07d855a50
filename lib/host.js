// Host facts the Rust core cannot see from outside the host process: the caller's runtime
// identity, the live agent registry, the web server's bound port, the runtime version.
// Everything here is read defensively: a missing or changed host API yields "unknown", never a throw.
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'

const require = createRequire(import.meta.url)

function attempt(fn, fallback) {
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
export function callerOf(exec) {
  const agent = attempt(() => exec?.agent, undefined)
  if (agent === undefined || agent === null) return null
  const sessionId = attempt(() => agent.session?.id, undefined)
  const agentId = attempt(() => agent.id, undefined)
  return {
    sessionId: sessionId === undefined ? null : String(sessionId),
    agentId: agentId === undefined ? null : String(agentId),
    title: null,
  }
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

/** The agents live in this process (rc.8 `AgentRegistry.list()`, packages/core/agent/src/index.ts). */
export function liveAgents(ctx) {
  const agents = attempt(() => ctx.agents?.list?.(), []) ?? []
  return agents.map(agent => {
    const inbox = attempt(() => agent.inbox, undefined)
    const nextTurn = attempt(() => [...(inbox?.nextTurn ?? [])], [])
    const nextStep = attempt(() => [...(inbox?.nextStep ?? [])], [])
    return {
      id: String(agent.id),
      status: String(attempt(() => agent.status, '') ?? ''),
      header: plainHeader(attempt(() => agent.session?.header, undefined)),
      pendingRpcIds: rpcIdsOf([...nextTurn, ...nextStep]),
      pendingNextTurnRpcIds: rpcIdsOf(nextTurn),
      pendingNextTurn: nextTurn.length,
    }
  })
}

/**
 * The live events of one agent as JSON lines, or null when it is not live here.
 * 0.1.5+ `session.snapshotEvents()`, rc.8 `session.events` (packages/core/session/src/index.ts).
 */
export function liveEventsOf(ctx, id) {
  if (typeof id !== 'string') return null
  const agent = attempt(() => ctx.agents?.get?.(id), undefined)
  if (agent === undefined || agent === null) return null
  const session = attempt(() => agent.session, undefined)
  if (session === undefined) return null
  const events = attempt(
    () => (typeof session.snapshotEvents === 'function' ? session.snapshotEvents() : session.events),
    undefined,
  )
  if (!Array.isArray(events) && !(events && typeof events[Symbol.iterator] === 'function')) return null
  const header = plainHeader(session.header)
  const lines = [JSON.stringify({ type: 'session', ...header })]
  for (const e of events) lines.push(JSON.stringify(e))
  return lines.join('\n') + '\n'
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
