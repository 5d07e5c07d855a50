// dsh-session-mail: the cordis plugin shim. It declares the Config, registers the four tools,
// and hands each call — raw arguments, the caller's runtime identity, host facts — to the Rust
// core, which returns the text the model sees. A tool never throws at the model.
import Schema from '@deepseek-ai/schemastery'
import { defineTool } from '@deepseek-ai/dsh-tools'
import { resolveDshHome } from './lib/home.js'
import { internalFailure, loadCore } from './lib/native.js'
import { toolSpecs } from './lib/tools.js'
import { baseUrlOf, browserSessionSecret, callerOf, detectHostVersion, followSessions, liveAgents, liveReadFacts, secretReader, serviceMemo } from './lib/host.js'
import { IdleNotices } from './lib/notice.js'
import { installOverlapNotice } from './lib/overlap.js'
import { startPresence } from './lib/presence.js'
import { sendFactsOf, startMachines } from './lib/machines.js'
import { canDrain, startHandBack, startMailbox } from './lib/mailbox.js'
import { startClientRoutes } from './lib/client-host.js'

export const name = 'dsh-session-mail'

// Optional services are declared one by one (the `{required:[…], optional:[…]}` form leaves the row
// pending in rc.8: shared/host/plugin-contract.md §11). Only services every profile declares: an optional
// inject of a service the profile does not have leaves the plugin pending and fails the boot ("waiting for
// service: webServer" in the headless profile), so the web server is looked up (lib/host.js `service`).
export const inject = {
  tools: { required: true },
  agents: { required: false },
  credentials: { required: false },
  // rc.8+ `ctx.sessions.flush(session)`: a live read asks the host to write pending events first.
  sessions: { required: false },
}

// The Config keys the core reads take their defaults from the core (crates/core/src/config.rs `Config::default`,
// exported as configDefaults()): declared once. An addon that does not load leaves them without a default —
// every tool then answers that the addon did not load, and the core fills its own defaults anyway.
const CORE_DEFAULTS = loadCore().core?.configDefaults?.() ?? {}
const coreDefault = (schema, key) => (CORE_DEFAULTS[key] === undefined ? schema : schema.default(CORE_DEFAULTS[key]))

export const Config = Schema.object({
  enabled: Schema.boolean().default(true).description('Register the tools. false: the plugin registers nothing.'),
  frameMessages: coreDefault(Schema.boolean(), 'frameMessages').description('Frame sessions_send bodies so the receiver can tell a peer from the human.'),
  maxSendChars: coreDefault(Schema.natural().min(1), 'maxSendChars').description('Longest message body, in characters.'),
  defaultSendMode: coreDefault(Schema.union(['queue', 'steer']), 'defaultSendMode').description('sessions_send mode when the call names none.'),
  allowResume: coreDefault(Schema.boolean(), 'allowResume').description('May a send wake a cold session?'),
  maxListResults: coreDefault(Schema.natural().min(1).max(200), 'maxListResults').description('Cap on sessions_list rows.'),
  maxReadMessages: coreDefault(Schema.natural().min(1).max(100), 'maxReadMessages').description('Cap on sessions_read messages.'),
  maxMessageChars: coreDefault(Schema.natural().min(16), 'maxMessageChars').description('Longer messages are cut, visibly.'),
  includeInjectedByDefault: coreDefault(Schema.boolean(), 'includeInjectedByDefault').description('sessions_read default for include_injected.'),
  hostApi: coreDefault(Schema.union(['auto', 'rc8', 'v2']), 'hostApi').description('Host route generation: rc8 = /api/session.prompt, v2 = /api/session/prompt with the browser-session cookie.'),
  host: Schema.string().default('').description('Override the web server host (default: the host\'s own, on loopback).'),
  port: Schema.natural().max(65535).default(0).description('Override the web server port (0: the host\'s bound port).'),
  connectTimeoutMs: coreDefault(Schema.natural().min(1), 'connectTimeoutMs'),
  requestTimeoutMs: coreDefault(Schema.natural().min(1), 'requestTimeoutMs'),
  budgetWindowSecs: coreDefault(Schema.natural(), 'budgetWindowSecs').description('Sliding window of the send budgets, in seconds (0: budgets off).'),
  budgetPerPair: coreDefault(Schema.natural(), 'budgetPerPair').description('Sends one session may make to one target per window (0: no pair budget).'),
  budgetPerSender: coreDefault(Schema.natural(), 'budgetPerSender').description('Sends one session may make to all targets per window (0: no sender budget).'),
  urgentReserve: coreDefault(Schema.natural(), 'urgentReserve').description('Extra urgent/steer sends per pair beyond budgetPerPair, so a correction can still interrupt.'),
  maxStackedPerSender: coreDefault(Schema.natural(), 'maxStackedPerSender').description('Queued messages from one sender that may wait unclaimed in a target inbox (0: no limit).'),
  maxRelayHops: coreDefault(Schema.natural(), 'maxRelayHops').description('Agent-to-agent deliveries one conversation chain may make until a human writes in it (0: no loop guard).'),
  budgetPerMachine: coreDefault(Schema.natural(), 'budgetPerMachine').description('Sends all sessions of one linked machine may make into this home per window (0: no machine budget).'),
  outboxTtlMs: coreDefault(Schema.natural().min(1), 'outboxTtlMs').description('How long a message for an unreachable linked machine waits in the outbox before it expires.'),
  sendTools: Schema.union(['both', 'sessions_send', 'send_session_message']).default('both').description('Register both send tools, or only one (each schema is paid on every model request).'),
  idleNoticeMinutes: Schema.natural().min(1).default(30).description('A pending notify_when_idle notice expires after this many minutes.'),
  overlapNotice: Schema.boolean().default(false).description('After a write/edit, tell the session when a live peer of its repository changed the same file recently (injected into that turn; off: shown in sessions_list only).'),
})

/** The part of the Config the core reads: the keys it has defaults for. */
function coreConfig(config) {
  const out = {}
  for (const key of Object.keys(CORE_DEFAULTS)) if (config[key] !== undefined) out[key] = config[key]
  return out
}

/** A send's target as written (the core takes it exactly so); '' when it is not a string. */
function targetOf(tool, args) {
  const v = tool === 'sessions_send' ? args?.session_id : args?.toSessionId
  return typeof v === 'string' ? v : ''
}

/** Build the JSON request the core takes (src/request.rs `ToolRequest`). */
/**
 * JSON has no NaN or Infinity: JSON.stringify would turn them into null, which the core takes as
 * "argument left out" and silently replaces by the default. Spell them as strings instead, so the
 * core refuses them by name ("max_messages must be an integer …; got the string \"NaN\"").
 */
function keepNonFinite(v, seen = new Set()) {
  // Arguments as JSON.parse makes them (plain objects and arrays of data properties) without a non-finite
  // number are passed as they are: JSON.stringify reads them exactly as it would read the copy (own
  // enumerable keys, "__proto__" among them). Anything else (a getter, a prototype's toJSON, a boxed
  // number) is copied, as before.
  if (seen.size === 0 && plainFinite(v)) return v
  if (typeof v === 'number' && !Number.isFinite(v)) return String(v)
  if (v === null || typeof v !== 'object' || seen.has(v)) return v // a cycle: JSON.stringify reports it
  seen.add(v)
  // fromEntries keeps a "__proto__" key as an own property (an unknown argument the core names).
  const out = Array.isArray(v)
    ? v.map((x) => keepNonFinite(x, seen))
    : Object.fromEntries(Object.entries(v).map(([k, x]) => [k, keepNonFinite(x, seen)]))
  seen.delete(v)
  return out
}

/**
 * Is `v` JSON-plain and finite: primitives other than NaN/±Infinity, and plain objects (prototype
 * Object.prototype or null) and arrays (Array.prototype, no own toJSON) whose enumerable properties are all
 * own data properties holding such values, at most 8 levels deep (deeper, or a cycle: not plain)? Without a
 * Set or a descriptor list: ~16 µs of the host's thread per call against ~45 µs (bench:send's arguments).
 */
function plainFinite(v, depth = 0) {
  if (typeof v === 'number') return Number.isFinite(v)
  if (v === null || typeof v !== 'object') return true
  if (depth > 8) return false
  const proto = Object.getPrototypeOf(v)
  if (Array.isArray(v) ? proto !== Array.prototype || Object.hasOwn(v, 'toJSON') : proto !== Object.prototype && proto !== null) return false
  for (const k in v) {
    const d = Object.getOwnPropertyDescriptor(v, k)
    if (d === undefined || !('value' in d) || !plainFinite(d.value, depth + 1)) return false
  }
  return true
}

/** Have this process's own rc.8 host adopt (resume) a stored session, without a message. */
async function adoptSession(baseUrl, sessionId, cwd) {
  try {
    await fetch(`${baseUrl}/api/session.create`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'client-request', rpcId: `dsh-session-mail-wake-${Date.now()}`, method: 'session.create', payload: { sessionId, cwd } }),
      signal: AbortSignal.timeout(10_000),
    })
  } catch {
    // the next pass looks again once the wake lock expires
  }
}

/** This process's presence `startedAt` once the plugin is mounted (what its own inboxes are recorded as held by). */
let processStartedAt = null

/**
 * The host facts a call reads through its services, each kept until the service changes (lib/host.js
 * `serviceMemo`): the web server's URL and the agent registry. Made once per plugin instance (`apply`).
 */
function hostReaders(ctx, config) {
  return {
    baseUrl: serviceMemo(ctx, 'webServer', () => baseUrlOf(ctx, config)),
    agents: serviceMemo(ctx, 'agents', () => ctx.agents),
  }
}

function buildRequest(ctx, config, tool, args, exec, hostVersion, secret = null, liveRead = null, host) {
  const sends = tool === 'sessions_send' || tool === 'send_session_message'
  return {
    tool,
    args: keepNonFinite(args ?? {}),
    // a send carries the caller's current turn: the loop guard's evidence of who started it
    caller: callerOf(exec, { sessions: sends ? followSessions(ctx) : null }),
    config: coreConfig(config),
    host: {
      dshHome: resolveDshHome(),
      baseUrl: host.baseUrl(),
      version: config.hostApi === 'auto' ? hostVersion : null,
      secret,
      profile: null,
      startedAt: processStartedAt,
    },
    // a send looks at its target alone (crates/core/src/tools/send.rs finds it by id in `live`)
    live: liveAgents(ctx, { activity: tool !== 'sessions_read', files: tool === 'sessions_list', only: sends ? targetOf(tool, args) : null, registryOf: host.agents }),
    liveSeq: liveRead?.liveSeq ?? null,
    liveFlushed: liveRead?.liveFlushed ?? null,
  }
}

/** Run one call through the core; every failure becomes readable text. */
async function runTool(ctx, config, tool, args, exec, hostVersion, notices = null, readSecret = () => browserSessionSecret(ctx), host) {
  const { core, error } = loadCore()
  if (core === undefined) {
    return `refused (internal): the dsh-session-mail native addon did not load on this platform (${process.platform}-${process.arch}): ${error?.message ?? error}. Reinstall the plugin for this platform.`
  }
  if (exec?.signal?.aborted) return 'refused (cancelled): the call was cancelled before anything was sent.'
  try {
    const sends = tool === 'sessions_send' || tool === 'send_session_message'
    let secret = sends ? readSecret() : null
    if (secret !== null && typeof secret === 'object') secret = await secret
    const liveRead = tool === 'sessions_read' && typeof args?.session_id === 'string'
      ? await liveReadFacts(ctx, args.session_id)
      : null
    const request = buildRequest(ctx, config, tool, args, exec, hostVersion, secret, liveRead, host)
    // notify_when_idle: what only the shim knows goes in; the core decides and words the receipt's note
    const watch = sends && notices !== null && args?.notify_when_idle === true
      ? { watcher: request.caller?.sessionId ?? request.caller?.agentId ?? null, target: targetOf(tool, args), turn: request.caller?.turn ?? null }
      : null
    const outcome = await core.run(JSON.stringify(request), watch === null ? null : JSON.stringify(notices.factsFor(watch)))
    if (outcome.notice === 'set') notices.watch({ ...watch, requestId: outcome.requestId })
    return outcome.text
  } catch (e) {
    // A request the core cannot take (err.code E_BAD_REQUEST) fails the same way every time: no retry advice.
    return internalFailure(tool, e)
  }
}

/** Live peers of the caller's repository with the files both changed recently (the core's list rows). */
async function overlapRows(ctx, config, exec, hostVersion, host) {
  const { core } = loadCore()
  if (typeof core?.listSessions !== 'function') return null
  const request = buildRequest(ctx, config, 'sessions_list', { repo_only: true, live_only: true, limit: 200 }, exec, hostVersion, null, null, host)
  const v = await core.listSessions(JSON.stringify(request))
  return v?.ok ? v.rows.filter(r => !r.isCaller && Array.isArray(r.overlap) && r.overlap.length > 0) : null
}

export function apply(ctx, config) {
  config = Config(config ?? {})
  if (!config.enabled) return
  const hostVersion = detectHostVersion()
  const host = hostReaders(ctx, config)
  // Presence: publish this process's live sessions for the plugin in other processes on this home.
  // Started inside ctx.effect so the record is withdrawn and the timer cleared when the plugin is
  // disposed (a cordis context always has effect; a bare test double without it publishes nothing).
  if (typeof ctx.effect === 'function') {
    const { core } = loadCore()
    // The mailbox drain starts with it: the record advertises it, and envelopes are addressed to startedAt.
    ctx.effect(() => {
      const startedAt = Date.now()
      processStartedAt = startedAt
      // a cold session a lost message waits for is woken only where allowResume permits, through this host
      const wake = () => {
        const baseUrl = config.allowResume ? host.baseUrl() : null
        // rc.8 adopts a stored session by id (api-proxy `create` with `sessionId`: ctx.agents.resume);
        // 0.1.2+ routes are not taught this yet
        if (baseUrl === null || (hostVersion !== null && !String(hostVersion).startsWith('0.1.0'))) return null
        return (sessionId, cwd) => adoptSession(baseUrl, sessionId, cwd)
      }
      const stopMailbox = startMailbox(ctx, core, { startedAt, config: coreConfig(config), wake })
      const stopHandBack = startHandBack(ctx, core, { startedAt })
      const stopPresence = startPresence(ctx, core, { hostVersion, baseUrl: host.baseUrl, startedAt, mailbox: canDrain(core) })
      // the routes of the web client half (lib/client.js): the human's mail view and inbound policy
      const routeSecret = secretReader(ctx)
      const promptHost = async () => ({
        baseUrl: host.baseUrl(),
        hostSecret: (await routeSecret()) ?? null,
        hostVersion,
        hostApi: config.hostApi,
        live: liveAgents(ctx, { activity: false, files: false }).map(a => a.id),
      })
      const stopRoutes = startClientRoutes(ctx, core, { promptHost })
      // the home's machine lease: this process may hold the endpoint to linked machines (docs/machines.md);
      // what arrives from them runs through this process's own tools, with its host facts (`here`)
      // asked when each request arrives (src/lib.rs `here_of`), for what it needs (lib/machines.js `askOf`):
      // a read's session is flushed first, as for a local read; a send's facts are a local send's (its
      // target's live entry alone, no file activity), plus the sender's entry should that id be live here
      // (the request's unchanging part made once: lib/machines.js `sendFactsOf`; `dshHome`: the home the core
      // serves, as lib/machines.js registered it)
      const sendHead = sendFactsOf(({ dshHome, baseUrl, secret }) => ({
        tool: 'sessions_send',
        args: {},
        caller: null,
        config: coreConfig(config),
        host: { dshHome, baseUrl, version: config.hostApi === 'auto' ? hostVersion : null, secret, profile: null, startedAt },
        liveSeq: null,
        liveFlushed: null,
      }))
      const sendFacts = (secret, send, sender, home) => {
        const live = liveAgents(ctx, { activity: true, files: false, only: send, registryOf: host.agents })
        if (sender !== null && sender !== send) live.push(...liveAgents(ctx, { activity: false, files: false, only: sender, registryOf: host.agents }))
        return sendHead({ dshHome: home ?? resolveDshHome(), baseUrl: host.baseUrl(), secret }, live)
      }
      // a send's facts at once when the secret needs no wait (rc.8: none; src/lib.rs `HereFn`), else a Promise
      const here = ({ read, send, sender }, home) => {
        const asked = routeSecret()
        if (send !== null && typeof asked?.then !== 'function') return sendFacts(asked ?? null, send, sender, home)
        return (async () => {
          const secret = (await asked) ?? null
          if (send !== null) return sendFacts(secret, send, sender, home)
          const liveRead = read !== null ? await liveReadFacts(ctx, read) : null
          return JSON.stringify(buildRequest(ctx, config, 'sessions_list', {}, null, hostVersion, secret, liveRead, host))
        })()
      }
      const stopMachines = startMachines(core, { here })
      return () => { stopMachines(); stopRoutes(); stopHandBack(); stopMailbox(); stopPresence() }
    })
  }
  // turn evidence, awaiting-user and file activity: folded from `session/event` as it happens (lib/observe.js)
  const sessions = followSessions(ctx)
  const notices = new IdleNotices(ctx, { ttlMs: config.idleNoticeMinutes * 60_000, sessions })
  const readSecret = secretReader(ctx)
  if (config.overlapNotice) installOverlapNotice(ctx, exec => overlapRows(ctx, config, exec, hostVersion, host))
  for (const spec of toolSpecs({ sendTools: config.sendTools })) {
    // defineTool compiles the schemas the model sees. Its execute throws ToolArgsError on a bad call;
    // we keep its definition and replace execute so a bad call becomes a readable refusal from the
    // core instead (rc.8 packages/core/tools/src/schema.ts `defineTool`; the runtime itself does not
    // validate arguments: "tools validate their own schema", packages/core/tools/src/index.ts).
    const defined = defineTool({ ...spec, execute: async () => '' })
    ctx.tools.register({
      ...defined,
      async execute(args, exec) {
        return runTool(ctx, config, spec.name, args, exec, hostVersion, notices, readSecret, host)
      },
    })
  }
}
