// Contract host for dsh-session-mail tests: a small Node HTTP server that behaves like the DSH
// 0.1.2+/0.2 host on the paths the plugin uses (POST /api/session/prompt), writes V4 session logs
// the way the host does, and exposes knobs to drive turns and inject transport faults.
//
// Every rule carries the source path it follows (see auth.mjs, store.mjs, agent.mjs for theirs).
// Reference: Z17 = zsagi1368/deepseek-harness-zDSH (0.1.7-rc.2 era), R8 = toninfo/deepseek-harness
// (0.1.0-rc.8, local snapshot). Research notes: docs shared with the team (session-contract.md §3-§5).
//
// The `session/writer-held` lock is modelled between contract-host instances on one DSH_HOME (see
// `WRITER_LEASES`). Not modelled: attachments (image/file parts), model routing (`requireServedRoute`),
// WebSocket streams, every endpoint other than session/prompt and the
// test-only session/history, request-body size limits (http-bridge.ts).

import { randomBytes, randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import { mkdirSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { isAbsolute, join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  assertTrustedAuthority, cookieName, decodeBase64Url, encodeBase64Url, encodeCookie, requestRejection,
} from './auth.mjs'
import { HostSession } from './agent.mjs'
import { SessionLogFile, logFilename, sessionDir, writeCredentials } from './store.mjs'

const DAY_MILLISECONDS = 24 * 60 * 60 * 1000
const API_PATH = '/api'
// rpc-host.ts `ENDPOINT_SEGMENT_PATTERN`
const ENDPOINT_SEGMENT_PATTERN = /^[A-Za-z0-9_$.-]+$/

/**
 * The session write lock of 0.1.5+ between host processes on one DSH_HOME: a live session holds an
 * exclusive lease on its log (0.1.7 `session-persistence-jsonl/src/index.ts` `acquireLease`, a kernel flock
 * on `session.lock`, released when the process dies), and a resume blocked by another holder's lease
 * answers `session/writer-held` with the session id (kilinthecode/deepseek-harness
 * packages/api/session-controller/README.md: "A resume blocked by an existing write handle returns
 * `session/writer-held` with the Session id"). Modelled per instance: `${dshHome}\0${sessionId}` → the
 * instance holding it; an instance's leases go when it is closed (its process ended).
 */
const WRITER_LEASES = new Map()

/** A failure that crosses the wire as `{ok:false, error:{code, message, details}}` (typert RemoteError). */
class RemoteError extends Error {
  constructor(code, message, details = {}) {
    super(message)
    this.code = code
    this.details = details
  }
}

// rpc-host.ts `endpointFromPath`: `/api/<seg>/<seg>...`, no empty/./.. segments, restricted charset.
function endpointFromPath(pathname) {
  if (!pathname.startsWith(`${API_PATH}/`)) return undefined
  const endpoint = pathname.slice(API_PATH.length + 1)
  const segments = endpoint.split('/')
  if (segments.some(s => s === '' || s === '.' || s === '..' || !ENDPOINT_SEGMENT_PATTERN.test(s))) return undefined
  return endpoint
}

function isPlainObject(value) {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false
  const prototype = Object.getPrototypeOf(value)
  return prototype === null || prototype === Object.prototype
}

// Z17 commands.ts `hasPromptContent`: some part is non-text, or text with non-whitespace.
function hasPromptContent(content) {
  return content.some(part => part.type !== 'text' || part.text.trim().length > 0)
}

// util-time `canonicalClientTimeZone` (not read): approximated as 'UTC' or an IANA Area/Location
// name that Intl accepts, canonicalized by Intl.
function canonicalClientTimeZone(value) {
  if (value === 'UTC') return 'UTC'
  if (!/^[A-Za-z_]+(?:\/[A-Za-z0-9_+-]+)+$/.test(value)) return undefined
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: value }).resolvedOptions().timeZone
  } catch {
    return undefined
  }
}

// Z15 session-controller/src/types.ts `SessionPromptRequest` shape. The real boundary codec was not
// read; a malformed request here answers `gateway/input-invalid` (gateway/src/index.ts `decode`).
function assertPromptRequest(request, endpoint) {
  const invalid = () => new RemoteError('gateway/input-invalid',
    `typert gateway: ${endpoint}: wire field "request" failed boundary validation`, { endpoint, field: 'request' })
  if (!isPlainObject(request)) throw invalid()
  const { requestId, sessionId, mode, content, clientTimeZone } = request
  if (typeof requestId !== 'string' || requestId.length === 0) throw invalid()
  if (typeof sessionId !== 'string' || sessionId.length === 0) throw invalid()
  if (mode !== 'queue' && mode !== 'steer') throw invalid()
  if (clientTimeZone !== undefined && typeof clientTimeZone !== 'string') throw invalid()
  if (!Array.isArray(content)) throw invalid()
  for (const part of content) {
    if (!isPlainObject(part)) throw invalid()
    if (part.type === 'text' && typeof part.text === 'string') continue
    if (part.type === 'image' && typeof part.mediaType === 'string' && typeof part.data === 'string') continue
    if (part.type === 'file' && typeof part.receiptId === 'string') continue
    throw invalid()
  }
}

/**
 * Start a contract host.
 * @param {object} [opts]
 * @param {string} [opts.dshHome] - DSH_HOME; a fresh `os.tmpdir()` directory when omitted.
 * @param {number} [opts.cookieMaxAgeDays=30] - client-connection Config `cookieMaxAgeDays`.
 * @param {string[]} [opts.trustedHosts=[]] - client-connection Config `trustedHosts`.
 * @param {() => number} [opts.now=Date.now] - host clock (cookie check, event times, createdAt).
 * @param {number} [opts.port=0] - listen port on 127.0.0.1.
 * @param {boolean} [opts.autoComplete=false] - every opened turn completes at once (instant model).
 * @param {string} [opts.secret] - base64url 32-byte secret to write instead of a random one.
 */
export async function startContractHost(opts = {}) {
  const now = opts.now ?? Date.now
  const cookieMaxAgeDays = opts.cookieMaxAgeDays ?? 30
  const trustedHosts = opts.trustedHosts ?? []
  // client/connection/src/index.ts `apply`: a malformed trustedHosts entry fails the load.
  for (const entry of trustedHosts) assertTrustedAuthority(entry)
  // client/connection/src/index.ts Config: `cookieMaxAgeDays: z.natural().min(1)`.
  if (!Number.isSafeInteger(cookieMaxAgeDays) || cookieMaxAgeDays < 1) {
    throw new Error('contract-host: cookieMaxAgeDays must be a natural number >= 1')
  }
  const autoComplete = opts.autoComplete ?? false
  const dshHome = opts.dshHome ?? mkdtempSync(join(tmpdir(), 'dsh-contract-host-'))
  mkdirSync(dshHome, { recursive: true })
  const sessionsRoot = join(dshHome, 'sessions')
  mkdirSync(sessionsRoot, { recursive: true })

  // browser-auth.ts `initializeSecret` / `canonicalSecret`: base64url of exactly 32 bytes.
  const secret = opts.secret ?? encodeBase64Url(randomBytes(32))
  const secretBytes = decodeBase64Url(secret)
  if (secretBytes === undefined || secretBytes.byteLength !== 32) {
    throw new Error('contract-host: secret must be canonical base64url of exactly 32 bytes')
  }
  const credentialsPath = writeCredentials(dshHome, secret)

  /** @type {Map<string, HostSession>} */
  const sessions = new Map()
  const instance = Symbol('contract-host instance')
  const leaseKey = id => `${dshHome}\0${id}`
  const heldElsewhere = id => {
    const holder = WRITER_LEASES.get(leaseKey(id))
    return holder !== undefined && holder !== instance
  }
  /** Take the write lease of a session becoming live here; writer-held when another instance has it. */
  function acquireLease(id) {
    if (heldElsewhere(id)) {
      throw new RemoteError('session/writer-held', `session "${id}" is held by another process`, { sessionId: id })
    }
    WRITER_LEASES.set(leaseKey(id), instance)
  }
  function releaseLeases() {
    for (const [k, v] of WRITER_LEASES) if (v === instance) WRITER_LEASES.delete(k)
  }
  const requests = []
  const faults = { status: undefined, delayMs: 0, resetAfterAccept: false }
  let down = false
  let listenPort = opts.port ?? 0

  // requireHostHeader: false lets a Host-less request reach the trust fence ('missing-host' -> 403)
  // instead of node's own 400; whether the DSH webserver sets this was not checked.
  const server = createServer({ requireHostHeader: false }, (req, res) => { void handle(req, res) })

  function listen() {
    return new Promise((resolve, reject) => {
      server.once('error', reject)
      server.listen(listenPort, '127.0.0.1', () => {
        server.off('error', reject)
        listenPort = server.address().port
        resolve()
      })
    })
  }
  await listen()
  const port = listenPort
  const authority = `127.0.0.1:${port}`

  /** Take the listener down (connections refused) or bring it back on the same port. */
  async function setDown(value) {
    if (value === down) return
    down = value
    if (value) {
      await new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    } else {
      await listen()
    }
  }
  Object.defineProperty(faults, 'down', {
    enumerable: true,
    get: () => down,
    set: (value) => { void setDown(Boolean(value)) },
  })

  function session(id) {
    const found = sessions.get(id)
    if (found === undefined) throw new Error(`contract-host: unknown session "${id}"`)
    return found
  }

  /** Run one host operation on a session and write its events as one frame. */
  function operate(id, fn) {
    const s = session(id)
    try {
      return fn(s)
    } finally {
      s.flush()
    }
  }

  // ---- session/prompt -------------------------------------------------------------------------

  // Z17 session-controller/src/agent.ts `resolve`, `resumeObserved`, `hasApiSessionSubagentOwner`,
  // `apiSessionSubagentOwnershipError`, `inspectApiSession` (no cwd = not found).
  function resolveAgent(sessionId) {
    // A session another instance holds exists on disk even when this instance never saw it.
    if (!sessions.get(sessionId)?.live && heldElsewhere(sessionId)) acquireLease(sessionId)
    const s = sessions.get(sessionId)
    if (s === undefined || (!s.live && s.header.cwd === undefined)) {
      throw new RemoteError('session/not-found', `session "${sessionId}" not found`, { sessionId })
    }
    if (s.header.origin === 'subagent') {
      throw new RemoteError('session/agent-busy', `session "${sessionId}" is owned by subagent routing`,
        { reason: 'use subagent delivery for this child session' })
    }
    // Cold resume makes the session live in this process (R8 core/session index.ts end-seed).
    if (!s.live) {
      acquireLease(sessionId)
      s.resume()
    }
    return s
  }

  // Z17 session-controller/src/commands.ts `prompt`, validation order:
  // content -> clientTimeZone -> resolveAgent -> hasPromptRequest -> attachments -> steer|followup.
  function prompt(request) {
    if (!hasPromptContent(request.content)) {
      throw new RemoteError('gateway/bad-request', 'prompt content must include non-whitespace text or an attachment', {})
    }
    const clientTimeZone = request.clientTimeZone === undefined ? undefined : canonicalClientTimeZone(request.clientTimeZone)
    if (request.clientTimeZone !== undefined && clientTimeZone === undefined) {
      throw new RemoteError('session/invalid-time-zone', 'clientTimeZone must be UTC or a valid IANA Area/Location name',
        { value: request.clientTimeZone })
    }
    if (!sessions.has(request.sessionId)) resolveAgent(request.sessionId) // throws session/not-found or writer-held
    return operate(request.sessionId, () => {
      const agent = resolveAgent(request.sessionId)
      if (agent.hasPromptRequest(request.requestId)) return { accepted: true }
      // commands.ts `resolvePromptFileReceipts`: no uploads exist here, so every file part is unstaged.
      if (request.content.some(part => part.type === 'file')) {
        throw new RemoteError('session/attachment-invalid', 'File was not uploaded for this session.', { reason: 'FILE_NOT_STAGED' })
      }
      if (request.content.some(part => part.type === 'image')) {
        throw new RemoteError('contract-host/unsupported', 'image parts are not modelled by the contract host', {})
      }
      // commands.ts: createUserMessage({content, source:{kind:'user', rpcId: requestId, clientTimeZone?}}),
      // fresh MessageId (UUID). llm/src/message.ts `createMessage`.
      const message = {
        id: randomUUID(),
        role: 'user',
        content: request.content.map(part => ({ type: 'text', text: part.text })),
        source: { kind: 'user', rpcId: request.requestId, ...(clientTimeZone === undefined ? {} : { clientTimeZone }) },
      }
      if (request.mode === 'steer') agent.steer(message)
      else agent.followup(message)
      return { accepted: true }
    })
  }

  // Test-only read endpoint (NOT a DSH endpoint; the host's own read path is `session/page`,
  // message-aligned with `throughSeq`, not modelled). Never resumes.
  function history(request) {
    if (!isPlainObject(request) || typeof request.sessionId !== 'string') {
      throw new RemoteError('gateway/input-invalid',
        'typert gateway: session/history: wire field "request" failed boundary validation',
        { endpoint: 'session/history', field: 'request' })
    }
    const s = sessions.get(request.sessionId)
    if (s === undefined) {
      throw new RemoteError('session/not-found', `session "${request.sessionId}" not found`, { sessionId: request.sessionId })
    }
    return { sessionId: s.header.id, live: s.live, status: s.status, header: { ...s.header }, events: structuredClone(s.events) }
  }

  // Endpoint table: each method's args keys are its parameter names minus `signal`
  // (gateway/src/index.ts `srcDescriptor`); prompt(request, signal) -> {request}.
  const ENDPOINTS = new Map([
    ['session/prompt', { params: ['request'], run: args => (assertPromptRequest(args.request, 'session/prompt'), prompt(args.request)) }],
    ['session/history', { params: ['request'], run: args => history(args.request) }],
  ])

  // gateway/src/index.ts `remoteRequest` (payload must be exactly {args:{...}}, else a plain Error ->
  // `rpcFailure` -> gateway/internal) and `assertExactArguments` (extra keys; missing keys are treated
  // as a strict descriptor would: both -> gateway/arguments-invalid).
  function dispatch(endpoint, payload) {
    const entry = ENDPOINTS.get(endpoint)
    if (!isPlainObject(payload) || Reflect.ownKeys(payload).length !== 1 || !Object.hasOwn(payload, 'args')
      || !isPlainObject(payload.args)) {
      throw new RemoteError('gateway/internal', 'Remote payload must contain exactly one plain-object args field', {})
    }
    const args = payload.args
    const expected = new Set(entry.params)
    const extra = Reflect.ownKeys(args).filter(key => typeof key !== 'string' || !expected.has(key))
    const missing = entry.params.filter(key => !Object.hasOwn(args, key))
    if (extra.length > 0 || missing.length > 0) {
      const clauses = []
      if (missing.length > 0) clauses.push(`missing ${missing.map(k => JSON.stringify(k)).join(', ')}`)
      if (extra.length > 0) clauses.push(`unexpected ${extra.map(k => JSON.stringify(String(k))).join(', ')}`)
      throw new RemoteError('gateway/arguments-invalid',
        `typert gateway: ${endpoint}: args fields do not match the descriptor: ${clauses.join('; ')}`, { endpoint })
    }
    return entry.run(args)
  }

  // ---- HTTP -----------------------------------------------------------------------------------

  function send(res, record, status, body, headers = {}) {
    record.status = status
    const text = typeof body === 'string' ? body : JSON.stringify(body)
    if (typeof body !== 'string') headers = { 'content-type': 'application/json', ...headers }
    else if (body !== 'forbidden' && body !== 'unauthorized') headers = { 'content-type': 'text/plain;charset=UTF-8', ...headers }
    res.writeHead(status, headers)
    res.end(text)
  }

  // rpc-host.ts `fullResponse` / `errorResponse`: HTTP 200, {type:'server-response', rpcId, result}.
  function rpcResponse(res, record, rpcId, result) {
    record.result = result
    send(res, record, 200, { type: 'server-response', rpcId, result })
  }

  async function readBody(req) {
    const chunks = []
    for await (const chunk of req) chunks.push(chunk)
    return Buffer.concat(chunks).toString('utf8')
  }

  async function handle(req, res) {
    const url = new URL(req.url ?? '/', 'http://contract-host.invalid')
    const record = {
      method: req.method, path: url.pathname, headers: { ...req.headers }, body: undefined,
      status: undefined, result: undefined, reset: false, time: now(),
    }
    requests.push(record)
    try {
      const raw = await readBody(req)
      try { record.body = raw.length === 0 ? undefined : JSON.parse(raw) } catch { record.body = raw }
      if (faults.delayMs > 0) await sleep(faults.delayMs)
      if (faults.status !== undefined) {
        const status = faults.status
        faults.status = undefined
        return send(res, record, status, `contract-host injected fault ${status}`)
      }
      // Only the /api prefix is the Connection route (client/connection/src/index.ts `apply`).
      if (url.pathname !== API_PATH && !url.pathname.startsWith(`${API_PATH}/`)) return send(res, record, 404, 'not found')
      // rpc-host.ts `requestRejection` via client/connection/src/index.ts /api route handler:
      // 403 'forbidden' (trust fence) before 401 'unauthorized' (cookie), plain bodies.
      const rejection = requestRejection(req.headers, { trustedHosts, secret: secretBytes, cookieMaxAgeDays, now: now() })
      if (rejection !== undefined) {
        record.trust = rejection.reason
        return send(res, record, rejection.status, rejection.status === 401 ? 'unauthorized' : 'forbidden')
      }
      // rpc-host.ts `createSharedFetchHandler`: an endpoint nobody claims is 404.
      const endpoint = endpointFromPath(url.pathname)
      if (endpoint === undefined || !ENDPOINTS.has(endpoint)) return send(res, record, 404, 'not found')
      // rpc-host.ts `rpcFetchHandler`: POST only (404), JSON media type (415), JSON body (400).
      if (req.method !== 'POST') return send(res, record, 404, 'not found')
      const mediaType = req.headers['content-type']?.split(';', 1)[0]?.trim().toLowerCase()
      if (mediaType !== 'application/json') return send(res, record, 415, 'content type must be application/json')
      let body
      try { body = JSON.parse(raw) } catch { return send(res, record, 400, 'body is not JSON') }
      // rpc-host.ts `invalidEnvelopeResponse` (R8 apiproxy api/rpc.schema.ts `clientRequestSchema`:
      // type 'client-request', rpcId string, method string, payload unknown).
      const issues = []
      if (!isPlainObject(body)) issues.push({ code: 'invalid_type', path: [], message: 'expected object' })
      else {
        if (body.type !== 'client-request') issues.push({ code: 'invalid_value', path: ['type'], message: 'expected "client-request"' })
        if (typeof body.rpcId !== 'string') issues.push({ code: 'invalid_type', path: ['rpcId'], message: 'expected string' })
        if (typeof body.method !== 'string') issues.push({ code: 'invalid_type', path: ['method'], message: 'expected string' })
      }
      if (issues.length > 0) {
        const rpcId = typeof body?.rpcId === 'string' ? body.rpcId : 'invalid-request'
        return rpcResponse(res, record, rpcId, {
          ok: false, error: { code: 'gateway/bad-request', message: 'invalid client-request message', details: { issues } },
        })
      }
      if (body.method !== endpoint) {
        return rpcResponse(res, record, body.rpcId, {
          ok: false,
          error: {
            code: 'gateway/bad-request',
            message: `method ${JSON.stringify(body.method)} does not match endpoint ${JSON.stringify(endpoint)}`,
            details: { issues: [] },
          },
        })
      }
      let result
      try {
        result = { ok: true, value: dispatch(endpoint, body.payload) }
      } catch (error) {
        if (!(error instanceof RemoteError)) throw error
        result = { ok: false, error: { code: error.code, message: error.message, details: error.details } }
      }
      if (faults.resetAfterAccept && endpoint === 'session/prompt') {
        faults.resetAfterAccept = false
        record.result = result
        record.reset = true
        req.socket.destroy()
        return
      }
      return rpcResponse(res, record, body.rpcId, result)
    } catch (error) {
      // rpc-host.ts: a handler crash is HTTP 500 `handler failure: …`.
      if (!res.headersSent && !res.destroyed) send(res, record, 500, `handler failure: ${String(error)}`)
    }
  }

  // ---- test API -------------------------------------------------------------------------------

  const host = {
    url: `http://${authority}`,
    port,
    authority,
    dshHome,
    sessionsRoot,
    credentialsPath,
    secret,
    requests,
    faults,
    setDown,

    /**
     * Create a session; its header frame is written at once. Cold (not live) unless `live: true`.
     * Header per format.ts `HeaderLine`; ids `session-<uuid>` like commands.ts `create`.
     */
    createSession({ cwd, origin, parentSession, preset, id, live = false, isSeeded = false, delegationDepth, events } = {}) {
      if (cwd !== undefined && !isAbsolute(cwd)) throw new Error('contract-host: cwd must be absolute (format.ts isHeaderLine)')
      if (origin !== undefined && origin !== 'subagent') throw new Error("contract-host: origin must be 'subagent' or absent")
      const sessionId = id ?? `session-${randomUUID()}`
      if (sessions.has(sessionId)) throw new Error(`contract-host: session "${sessionId}" exists`)
      const meta = {
        id: sessionId,
        createdAt: now(),
        ...(cwd === undefined ? {} : { cwd }),
        ...(parentSession === undefined ? {} : { parentSession }),
        isSeeded,
        ...(origin === undefined ? {} : { origin }),
        delegationDepth: delegationDepth ?? (origin === 'subagent' ? 1 : 0),
        ...(preset === undefined ? {} : { agentPreset: preset }),
      }
      if (live) acquireLease(sessionId)
      const s = new HostSession({ meta, file: new SessionLogFile(sessionsRoot, meta), now, live })
      s.autoComplete = autoComplete
      sessions.set(sessionId, s)
      if (events !== undefined) {
        for (const event of events) s.append(event.type, event.data, event.surfaceOp === undefined ? {} : { surfaceOp: event.surfaceOp })
        s.flush()
      }
      return sessionId
    },

    /** Path of the session's V4 log file. */
    logPath(id) {
      const s = session(id)
      return join(sessionDir(sessionsRoot, s.header.cwd, s.header.id), logFilename())
    },

    /** true: open a running turn (resumes a cold session first). false: complete turns until idle. */
    setRunning(id, running) {
      operate(id, (s) => {
        if (!s.live) acquireLease(id)
        s.resume()
        if (running) s.openBusyTurn()
        else while (s.status === 'running') s.finishTurn()
      })
    },

    /** Mark the running turn aborted (agent.ts `cancel`); completeTurn converges it. */
    abortTurn(id, { cause = { kind: 'user' }, keepInbox = true } = {}) {
      operate(id, (s) => {
        s.requireRunning()
        s.cancel(cause, { keepInbox })
      })
    },

    /** Wake an idle session (agent.ts `wakeDriver`): a turn opens and claims per the inbox rules. */
    runTurn(id) {
      operate(id, (s) => {
        if (!s.live) acquireLease(id)
        s.resume()
        if (s.status !== 'idle') throw new Error(`contract-host: session "${id}" is already running`)
        s.wakeDriver()
      })
    },

    /** End the current step as a tool step; next-step input lands in the next step of the same turn. */
    completeStep(id) {
      operate(id, s => s.completeStep())
    },

    /** End the current turn (or converge an aborted one); pending input opens the next turn. */
    completeTurn(id) {
      operate(id, s => s.finishTurn())
    },

    /** Events written so far (same content as the file). */
    events(id) {
      return structuredClone(session(id).events)
    },

    /** Pending inbox. */
    inbox(id) {
      const s = session(id)
      return { nextTurn: structuredClone(s.inbox['next-turn']), nextStep: structuredClone(s.inbox['next-step']) }
    },

    /** Live/idle/running/aborted view of one session. */
    state(id) {
      const s = session(id)
      return {
        live: s.live,
        status: s.status,
        aborted: s.phase.kind === 'running' && s.phase.aborted !== undefined,
        turn: s.phase.kind === 'running' ? s.phase.turn : s.phase.lastTurn,
        step: s.phase.kind === 'running' ? s.phase.step : 0,
      }
    },

    /**
     * Convenience: mint a cookie the way browser-auth.ts `authorizeIndex` would (the host's own
     * launch-token exchange). Tests of the host itself mint independently.
     */
    mintCookie({ issuedAt = now(), expiresAt = issuedAt + cookieMaxAgeDays * DAY_MILLISECONDS, authority: aud = authority } = {}) {
      const name = cookieName(aud)
      const value = encodeCookie({ version: 1, authority: aud, issuedAt, expiresAt }, secretBytes)
      return { name, value, header: `${name}=${value}` }
    },

    async close() {
      releaseLeases()
      if (down) return
      down = true
      await new Promise((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      })
    },
  }
  return host
}
