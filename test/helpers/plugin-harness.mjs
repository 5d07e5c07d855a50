// Drive the plugin in-process against the contract host, the way test/mail.test.js does:
// `plugin.apply(ctx, config)` with a cordis-shaped ctx whose `webServer.port` is the contract host's
// and whose `agents` mirrors the contract host's live sessions; `execute(args, exec)` with
// `exec.agent.session.id` as the caller. Small and dependency-free; used by test/reliability.test.mjs.
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:net'
import * as plugin from '../../index.js'

/**
 * A ctx for `plugin.apply`. `ids()` returns the session ids the test created (the contract host does
 * not expose its own list); the live ones are mirrored as agents.
 */
export function hostContext(host, ids, { registered = [] } = {}) {
  return {
    registered,
    tools: { register: (def) => { registered.push(def); return () => {} } },
    webServer: host ? { port: host.port, host: '127.0.0.1' } : undefined,
    agents: host
      ? {
          list: () => ids().filter(id => host.state(id)?.live).map(id => agentView(host, id)),
          get: id => (ids().includes(id) && host.state(id)?.live ? agentView(host, id) : undefined),
        }
      : { list: () => [], get: () => undefined },
  }
}

/** What the runtime's AgentRegistry would show for one live session. */
export function agentView(host, id) {
  const st = host.state(id)
  const inbox = host.inbox(id)
  const header = host.events(id)[0] ?? {}
  return { id, status: st.status, session: { id, header }, inbox }
}

/** The runtime's `exec` for a call made by session `id`. */
export function execAs(id) {
  return { agent: { id, session: { id } }, signal: new AbortController().signal, callId: randomUUID() }
}

/**
 * The sessions a suite makes on its contract host (`hostOf()`, read at each call: the host starts in
 * `before`), all in `cwd` with the standard preset: `make(opts)` creates one and remembers it, `ids()` is
 * the list `hostContext` mirrors as agents.
 */
export function sessionsIn(hostOf, cwd) {
  const made = []
  return {
    ids: () => made,
    make(opts = {}) {
      const id = hostOf().createSession({ cwd, preset: 'standard', ...opts })
      made.push(id)
      return id
    },
  }
}

/** apply the plugin with `config`; the registered tools by name. */
export function toolsOf(config, host, ids) {
  const ctx = hostContext(host, ids)
  plugin.apply(ctx, config)
  return Object.fromEntries(ctx.registered.map(t => [t.name, t]))
}

/** A loopback port nothing listens on (bound, then released). */
export async function closedPort() {
  const server = createServer()
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', resolve)
  })
  const { port } = server.address()
  await new Promise(resolve => server.close(resolve))
  return port
}

const RID = /dsh-session-mail:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g

/** Every plugin request id mentioned in a text. */
export function requestIdsIn(text) {
  return [...new Set(String(text).match(RID) ?? [])]
}

/**
 * How often a request id appears in a session's log: insertions into its inbox
 * (`agent/inbox/spliced` with the id among `inserted`) and landings (`user/message` carrying it).
 */
export function landingsOf(events, requestId) {
  let insertions = 0
  let landings = 0
  for (const e of events) {
    if (e.type === 'agent/inbox/spliced') {
      insertions += (e.data?.inserted ?? []).filter(m => m?.source?.rpcId === requestId).length
    } else if (e.type === 'user/message' && e.data?.source?.rpcId === requestId) {
      landings += 1
    }
  }
  return { insertions, landings }
}

/** Prompt requests the host received (any outcome), optionally only those carrying `requestId`. */
export function promptRequests(host, requestId) {
  return host.requests.filter(r => r.path === '/api/session/prompt'
    && (requestId === undefined || r.body?.payload?.args?.request?.requestId === requestId))
}

/** Run `fn`, return [value, elapsed ms]. */
export async function timed(fn) {
  const t0 = performance.now()
  const value = await fn()
  return [value, performance.now() - t0]
}
