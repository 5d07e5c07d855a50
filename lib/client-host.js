// The host half of the web client (issue 17): the routes lib/client.js calls, and only it.
//
// One Connection RPC channel, `/dsh-session-mail/<endpoint>`, registered through the host's own
// `ctx.connection.rpc.handle(channel, handler, { authority: 'loopback' })` (rc.8
// packages/client/connection/src/rpc-host.ts `HostConnectionService.register`): every request passes the
// host's browser-trust fence first (`isTrustedApiRequest`: a loopback Host, an Origin equal to it, no
// `sec-fetch-site: cross-site`; packages/client/connection/src/api-request-trust.ts), with an empty trust list
// so it stays loopback-only, like the host's privileged configuration methods. On 0.1.2+ the same service
// also carries the host's access gate. The envelope is the host's own (`client-request` / `server-response`).
//
// These routes are the only writers of the human's policy and decisions. No tool registers them or calls
// them: a model reaches the plugin through its four tools only (lib/tools.js), which never write a policy.
// A profile without the Connection service (headless) has no routes: nobody there can change the policy, and
// the policy the human set elsewhere still applies to its sends (docs/architecture.md "The human's inbound
// policy").
import { attempt } from './attempt.js'
import { service } from './host.js'
import { resolveDshHome } from './home.js'

const CHANNEL = '/dsh-session-mail'
const SESSION_ID = /^[A-Za-z0-9_.-]{1,200}$/
const REQUEST_ID = /^dsh-session-mail:[0-9a-fA-F-]{36}$/
const MACHINE_ID = /^[0-9a-f]{64}$/
const INBOUND = ['accept', 'hold', 'refuse']
const isObject = v => v !== null && typeof v === 'object' && !Array.isArray(v)

const ok = value => ({ ok: true, value })
const bad = (code, message) => ({ ok: false, error: { code, message } })

function parse(json) {
  try { return JSON.parse(json) } catch { return null }
}

/** A route answer the core made (`{ok, value}` or `{ok:false, error:{code, message}}`, issue 32's routes). */
function answer(json) {
  const r = parse(json)
  if (r?.ok === true) return ok(r.value)
  return bad(String(r?.error?.code ?? 'internal'), String(r?.error?.message ?? 'no answer'))
}

const MACHINE_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/

/** A machines export's answer (`{ok: true, …}` or `{ok: false, error}`) as a route answer. */
function machines(json) {
  const r = parse(json)
  if (r?.ok === true) {
    const { ok: _, ...value } = r
    return ok(value)
  }
  // r.error is crates/link's LinkError as data: its words are its message
  return bad('machines', String(r?.error?.message ?? 'no answer'))
}

/**
 * The human's names for the linked machines, `id -> name` (an empty map without links, or from a core
 * without the machines exports). Read on each call that shows machines, so a rename shows at once.
 */
async function linkedNames(core, home) {
  if (typeof core.machinesList !== 'function') return new Map()
  let r = null
  try { r = parse(await core.machinesList(home, false)) } catch { /* no names: the core's stay */ }
  const links = Array.isArray(r?.links) ? r.links : []
  return new Map(links.filter(l => typeof l?.id === 'string' && typeof l?.name === 'string').map(l => [l.id, l.name]))
}

/**
 * Put the human's name on every machine a core answer names (`{id: <MachineId>, name}`: the core knows only
 * the id, and names it by its first 12 characters — docs/architecture.md "Machines and the human's overview").
 * Walks the answer's objects and arrays (bounded depth); a machine no longer linked keeps the core's name.
 */
function nameMachines(value, names, depth = 0) {
  if (names.size === 0 || depth > 6 || value === null || typeof value !== 'object') return value
  if (Array.isArray(value)) { for (const v of value) nameMachines(v, names, depth + 1); return value }
  if (typeof value.id === 'string' && MACHINE_ID.test(value.id) && typeof value.name === 'string' && names.has(value.id)) value.name = names.get(value.id)
  for (const k of Object.keys(value)) { const v = value[k]; if (v !== null && typeof v === 'object') nameMachines(v, names, depth + 1) }
  return value
}

const FATES = ['landed', 'queued', 'waiting', 'held', 'approved', 'rejected', 'expired', 'refused', 'canceled', 'lost', 'removed', 'unknown']
const isTime = v => Number.isSafeInteger(v) && v >= 0

/**
 * `mail.list`'s payload checked and copied field by field (crates/core/src/mailindex `MailListArgs`), or
 * the problem as a sentence.
 */
function mailListArgs(p) {
  const f = p.filter ?? {}
  if (f === null || typeof f !== 'object' || Array.isArray(f)) return 'filter must be an object'
  const filter = {}
  if (f.session != null) {
    if (typeof f.session !== 'string' || !SESSION_ID.test(f.session)) return 'filter.session must be a session id'
    filter.session = f.session
  }
  if (f.fate != null) {
    const fates = Array.isArray(f.fate) ? f.fate : [f.fate]
    if (fates.length > FATES.length || !fates.every(x => FATES.includes(x))) return `filter.fate must be one or more of ${FATES.join(', ')}`
    filter.fate = fates
  }
  if (f.held != null) {
    if (typeof f.held !== 'boolean') return 'filter.held must be a boolean'
    filter.held = f.held
  }
  for (const k of ['since', 'until']) {
    if (f[k] == null) continue
    if (!isTime(f[k])) return `filter.${k} must be a time in ms since the epoch`
    filter[k] = f[k]
  }
  const args = { filter }
  if (p.query != null) {
    if (typeof p.query !== 'string' || p.query.length > 512) return 'query must be a string of at most 512 characters'
    args.query = p.query
  }
  if (p.before != null) {
    if (typeof p.before !== 'string' || !/^[ts][0-9.-]{1,48}$/.test(p.before)) return 'before must be the next of a previous page'
    args.before = p.before
  }
  if (p.limit != null) {
    if (!Number.isInteger(p.limit) || p.limit < 1) return 'limit must be a positive integer'
    args.limit = Math.min(p.limit, 200)
  }
  return args
}

/**
 * The route handler: `(endpoint, payload) → {ok, value} | {ok:false, error}`. Bad input is a readable error,
 * never a throw (a throw would be the host's 500).
 * @param {any} core the napi binding
 * @param {{ home?: () => string, promptHost?: () => any }} [options] promptHost: this process's facts for
 *   `human.sendMany` (`human::PromptHost`: baseUrl, hostSecret, hostVersion, hostApi, live)
 */
function routeHandler(core, { home = () => resolveDshHome(), promptHost = () => ({}) } = {}) {
  return async function handle(endpoint, payload) {
    const p = payload !== null && typeof payload === 'object' ? payload : {}
    try {
      switch (endpoint) {
        case 'card': {
          if (typeof p.requestId !== 'string' || !REQUEST_ID.test(p.requestId)) return bad('bad-request', 'requestId must be a dsh-session-mail request id')
          return ok(nameMachines(parse(await core.mailCard(home(), p.requestId)), await linkedNames(core, home())))
        }
        case 'view': {
          if (typeof p.sessionId !== 'string' || !SESSION_ID.test(p.sessionId)) return bad('bad-request', 'sessionId must be a session id')
          const limit = Number.isInteger(p.limit) && p.limit > 0 ? Math.min(p.limit, 200) : 100
          return ok(nameMachines(parse(await core.mailView(home(), p.sessionId, limit)), await linkedNames(core, home())))
        }
        case 'policy.set': {
          let change
          if (typeof p.stopAll === 'boolean') change = { stopAll: p.stopAll }
          else if (Number.isSafeInteger(p.heldTtlMs) && p.heldTtlMs > 0) change = { heldTtlMs: p.heldTtlMs }
          else if (typeof p.sessionId === 'string' && SESSION_ID.test(p.sessionId) && ['accept', 'hold', 'refuse'].includes(p.inbound)) change = { sessionId: p.sessionId, inbound: p.inbound }
          else return bad('bad-request', 'a change is {sessionId, inbound: accept|hold|refuse}, {stopAll: boolean} or {heldTtlMs: number}')
          const r = parse(await core.policyApply(home(), JSON.stringify(change)))
          return r?.ok ? ok(r.policy) : bad('policy', String(r?.error ?? 'the policy was not saved'))
        }
        case 'held.decide': {
          if (typeof p.sessionId !== 'string' || !SESSION_ID.test(p.sessionId)) return bad('bad-request', 'sessionId must be a session id')
          if (typeof p.requestId !== 'string' || !REQUEST_ID.test(p.requestId)) return bad('bad-request', 'requestId must be a dsh-session-mail request id')
          if (p.decision !== 'approve' && p.decision !== 'reject') return bad('bad-request', 'decision must be approve or reject')
          const r = parse(await core.heldDecide(home(), p.sessionId, p.requestId, p.decision === 'approve'))
          return r?.ok ? ok({ state: r.state, posted: r.posted }) : bad('held', String(r?.error ?? 'nothing was decided'))
        }
        // issue 32: the payloads and results are the core's DTOs (crates/core/src/human.rs); the shapes are
        // checked here so a bad one never reaches the core, and the core parses them again strictly.
        case 'rules.set': {
          const who = typeof p.sender === 'string' ? 'sender' : typeof p.machine === 'string' ? 'machine' : null
          const inbound = p.inbound === null || INBOUND.includes(p.inbound) ? p.inbound : undefined
          const fits = who === 'sender' ? SESSION_ID.test(p.sender) && p.machine === undefined : who === 'machine' && MACHINE_ID.test(p.machine) && p.sender === undefined
          if (!fits || inbound === undefined) return bad('bad-request', 'a rule is {sender: <session id>, inbound} or {machine: <machine id>, inbound}, inbound accept|hold|refuse or null')
          return answer(await core.rulesSet(home(), JSON.stringify({ [who]: p[who], inbound })))
        }
        case 'rules.list':
          return answer(await core.rulesList(home()))
        case 'held.decideMany': {
          const f = isObject(p.filter) ? p.filter : null
          const filter = {}
          if (f?.all === true) filter.all = true
          if (typeof f?.sender === 'string' && SESSION_ID.test(f.sender)) filter.sender = f.sender
          if (typeof f?.session === 'string' && SESSION_ID.test(f.session)) filter.session = f.session
          const named = filter.sender !== undefined || filter.session !== undefined
          const known = f !== null && Object.keys(f).every(k => filter[k] !== undefined || (k === 'all' && f.all === false))
          if (!known || (filter.all === true) === named) return bad('bad-request', 'filter is {all: true}, or {sender} and/or {session} (session ids)')
          if (p.decision !== 'approve' && p.decision !== 'reject') return bad('bad-request', 'decision must be approve or reject')
          return answer(await core.heldDecideMany(home(), JSON.stringify({ filter, decision: p.decision })))
        }
        case 'held.counts':
          return answer(await core.heldCounts(home()))
        case 'human.sendMany': {
          const ids = Array.isArray(p.sessionIds) ? p.sessionIds : null
          if (ids === null || ids.length === 0 || ids.length > 64 || !ids.every(id => typeof id === 'string' && SESSION_ID.test(id))) return bad('bad-request', 'sessionIds: 1 to 64 session ids')
          if (typeof p.text !== 'string' || p.text.trim() === '') return bad('bad-request', 'text: the message')
          if (p.mode !== 'queue' && p.mode !== 'steer') return bad('bad-request', 'mode must be queue or steer')
          const host = await promptHost()
          return answer(await core.humanSendMany(home(), JSON.stringify({ sessionIds: ids, text: p.text, mode: p.mode }), JSON.stringify(host ?? {})))
        }
        // issue 31: the human's linked machines (docs/machines.md); only these routes and the command line
        // link, rename or unlink — no tool does
        case 'machines.list':
          return machines(await core.machinesList(home(), p.probe === true))
        case 'machines.invite': {
          const relay = p.relay === undefined ? 'none' : p.relay
          if (typeof relay !== 'string' || (relay !== 'none' && relay !== 'public' && !/^https?:\/\/\S{1,500}$/.test(relay))) return bad('bad-request', "relay is none, public (Iroh's public relays) or the URL of your iroh-relay")
          const ttl = p.ttlMinutes === undefined ? 10 : p.ttlMinutes
          if (!Number.isInteger(ttl) || ttl < 1 || ttl > 1440) return bad('bad-request', 'ttlMinutes: 1 to 1440')
          return machines(await core.machinesInvite(home(), relay, ttl))
        }
        case 'machines.link': {
          if (typeof p.invite !== 'string' || !/^dshm1[A-Za-z0-9_-]{1,8192}$/.test(p.invite.trim())) return bad('bad-request', 'invite: the string dsh-session-mail link printed on the other machine')
          if (typeof p.name !== 'string' || !MACHINE_NAME.test(p.name)) return bad('bad-request', 'name: [a-z0-9][a-z0-9-]{0,31}')
          return machines(await core.machinesLink(home(), p.invite.trim(), p.name))
        }
        case 'machines.rename': {
          if (typeof p.name !== 'string' || !MACHINE_NAME.test(p.name) || typeof p.newName !== 'string' || !MACHINE_NAME.test(p.newName)) return bad('bad-request', 'name and newName: [a-z0-9][a-z0-9-]{0,31}')
          return machines(await core.machinesRename(home(), p.name, p.newName))
        }
        case 'machines.unlink': {
          if (typeof p.name !== 'string' || !MACHINE_NAME.test(p.name)) return bad('bad-request', 'name: a linked machine\'s name')
          return machines(await core.machinesUnlink(home(), p.name))
        }
        case 'machines.sessions': {
          // the `@` locator's sessions of linked machines (issue 31 #6): each machine's own listing
          if (typeof core.machinesSessions !== 'function') return bad('not-found', 'no machines.sessions in this core')
          if (p.query != null && (typeof p.query !== 'string' || p.query.length > 200)) return bad('bad-request', 'query: a string of at most 200 characters')
          const limit = p.limit == null ? 20 : p.limit
          if (!Number.isInteger(limit) || limit < 1 || limit > 200) return bad('bad-request', 'limit: 1 to 200')
          return ok(parse(await core.machinesSessions(home(), p.query ?? null, limit)))
        }
        case 'mail.list': {
          // {filter: {session?, fate?: string[], held?: boolean, since?: ms, until?: ms}, query?, before?, limit?}
          const args = mailListArgs(p)
          if (typeof args === 'string') return bad('bad-request', args)
          return ok(nameMachines(parse(await core.mailList(home(), JSON.stringify(args))), await linkedNames(core, home())))
        }
        case 'mail.thread': {
          if (typeof p.requestId !== 'string' || !REQUEST_ID.test(p.requestId)) return bad('bad-request', 'requestId must be a dsh-session-mail request id')
          return ok(nameMachines(parse(await core.mailThread(home(), p.requestId)), await linkedNames(core, home())))
        }
        default:
          return bad('not-found', `no endpoint ${JSON.stringify(endpoint)}`)
      }
    } catch (e) {
      return bad('internal', String(e?.message ?? e))
    }
  }
}

/**
 * Mount the channel on the host's Connection service, now or when it appears (cordis `internal/service`).
 * `promptHost`: `() => human::PromptHost | Promise<…>` for `human.sendMany` (index.js gives this process's web
 * server, secret, version, hostApi and live sessions).
 * A profile without it (headless) mounts nothing and waits for nothing: no pending fiber.
 * @returns {() => void} disposer
 */
export function startClientRoutes(ctx, core, { promptHost } = {}) {
  if (typeof core?.mailView !== 'function') return () => {}
  const handler = routeHandler(core, promptHost ? { promptHost } : {})
  let dispose = null
  const tryMount = () => {
    if (dispose !== null) return
    const connection = service(ctx, 'connection')
    const rpc = attempt(() => connection?.rpc, undefined)
    if (typeof rpc?.handle !== 'function') return
    dispose = attempt(() => rpc.handle(CHANNEL, handler, { authority: 'loopback' }), null) ?? (() => {})
    // an approval whose hand-off died with an earlier process is handed on now (crates/core/src/policy/held.rs)
    attempt(() => core.heldRecover?.(resolveDshHome())?.catch?.(() => {}), undefined)
  }
  tryMount()
  const off = dispose === null && typeof ctx.on === 'function'
    ? attempt(() => ctx.on('internal/service', name => { if (name === 'connection') tryMount() }), null)
    : null
  return () => {
    if (typeof off === 'function') attempt(() => off(), undefined)
    if (typeof dispose === 'function') attempt(() => dispose(), undefined)
    dispose = null
  }
}
