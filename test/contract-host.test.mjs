// Proves the contract host (test/contract-host/) follows the DSH host contract.
// Run: node --test test/contract-host.test.mjs   (Node >= 22.15 for zlib zstd)
//
// Everything the test checks is computed here independently of the host's own helpers:
// cookies are minted with node:crypto, the secret is read from .credentials.yaml by hand, the
// V4 log is split into zstd frames by a frame-header walker written below.

import { test, describe, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { createHash, createHmac, randomUUID } from 'node:crypto'
import { request as httpRequest } from 'node:http'
import { readFileSync, statSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { zstdDecompressSync } from 'node:zlib'
import { startContractHost } from './contract-host/index.mjs'

const DAY = 86_400_000
const T0 = 1_800_000_000_000 // fixed host clock for the cookie tests

// ---- independent helpers ------------------------------------------------------------------------

const b64url = bytes => Buffer.from(bytes).toString('base64url')

/** Read the secret straight from the fixed YAML layout the host promises to write. */
function readSecret(dshHome) {
  const text = readFileSync(join(dshHome, '.credentials.yaml'), 'utf8')
  const match = /^records:\n {2}client-connection\/browser-session:\n {4}kind: grant\n {4}payload:\n {6}version: 1\n {6}secret: ([A-Za-z0-9_-]+)\n/m.exec(text)
  assert.ok(match, `unexpected credentials layout:\n${text}`)
  return match[1]
}

/** 'dsh-auth-' + b64url(sha256(authority)) = v1.<b64url(json)>.<b64url(hmac(secretBytes, body))> */
function cookie(secretB64, { authority, issuedAt, expiresAt, nameAuthority = authority, version = 1, tamper = false }) {
  const body = b64url(Buffer.from(JSON.stringify({ version, authority, issuedAt, expiresAt })))
  let sig = createHmac('sha256', Buffer.from(secretB64, 'base64url')).update(body).digest()
  if (tamper) sig = Buffer.from(sig.map((b, i) => (i === 0 ? b ^ 1 : b)))
  const name = 'dsh-auth-' + b64url(createHash('sha256').update(nameAuthority).digest())
  return `${name}=v1.${body}.${b64url(sig)}`
}

/** Raw HTTP so Host / Origin / Cookie are exactly what the test says (setHost: false). */
function raw(host, { method = 'POST', path = '/api/session/prompt', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port: host.port, method, path, headers, setHost: false, agent: false }, (res) => {
      const chunks = []
      res.on('data', c => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json
        try { json = JSON.parse(text) } catch {}
        resolve({ status: res.statusCode, headers: res.headers, text, json })
      })
    })
    req.on('error', reject)
    if (body !== undefined) req.write(typeof body === 'string' ? body : JSON.stringify(body))
    req.end()
  })
}

function envelope(args, { method = 'session/prompt', rpcId = randomUUID() } = {}) {
  return { type: 'client-request', rpcId, method, payload: { args } }
}

function promptArgs(sessionId, { mode = 'queue', text = 'From session-x ：\nhello', requestId = `dsh-session-mail:${randomUUID()}` } = {}) {
  return { request: { requestId, sessionId, mode, content: [{ type: 'text', text }] } }
}

/** A client with a valid cookie for the host's own authority. */
function client(host, secretB64, clock) {
  const authority = `127.0.0.1:${host.port}`
  return (body, { path = '/api/session/prompt', headers = {} } = {}) => raw(host, {
    path,
    headers: {
      host: authority,
      'content-type': 'application/json',
      cookie: cookie(secretB64, { authority, issuedAt: clock() - 1000, expiresAt: clock() + DAY }),
      ...headers,
    },
    body,
  })
}

/** A contract host, a client with a valid cookie for it and, given `live`, a live session in <tmpdir>/<live>. */
async function openHost({ live, ...options } = {}) {
  const host = await startContractHost(options)
  const call = client(host, readSecret(host.dshHome), Date.now)
  const sid = live === undefined ? undefined : host.createSession({ cwd: join(tmpdir(), live), live: true })
  return { host, call, sid }
}

/** Close a host and remove its DSH_HOME. */
async function closeHost(host) {
  await host.close()
  rmSync(host.dshHome, { recursive: true, force: true })
}

/** Walk concatenated zstd frames by their headers (RFC 8878 §3.1.1) and return each frame's bytes. */
function splitZstdFrames(buf) {
  const frames = []
  let off = 0
  while (off < buf.length) {
    const start = off
    assert.equal(buf.readUInt32LE(off), 0xFD2FB528, `zstd magic at ${off}`)
    off += 4
    const fhd = buf[off++]
    const fcsFlag = fhd >> 6
    const single = (fhd & 0x20) !== 0
    const checksum = (fhd & 0x04) !== 0
    const dictBytes = [0, 1, 2, 4][fhd & 0x03]
    const fcsBytes = fcsFlag === 0 ? (single ? 1 : 0) : [0, 2, 4, 8][fcsFlag]
    off += (single ? 0 : 1) + dictBytes + fcsBytes
    for (;;) {
      const bh = buf.readUIntLE(off, 3)
      off += 3
      const type = (bh >> 1) & 3
      off += type === 1 ? 1 : bh >> 3
      if (bh & 1) break
    }
    if (checksum) off += 4
    assert.ok(off <= buf.length, 'frame runs past the end of the file')
    frames.push({ bytes: buf.subarray(start, off), checksum })
  }
  return frames
}

/** Expected project directory for a cwd made of [A-Za-z0-9._-], separators and spaces only. */
function expectedProjectDir(cwd) {
  const slug = cwd.replace(/[/\\:]+/g, '-').replace(/ /g, '~0020').replace(/^-+/, '')
  return `--${slug}--`
}

const types = events => events.map(e => e.type)
const landings = (events, rpcId) => events.filter(e => e.type === 'user/message' && e.data.source?.rpcId === rpcId)
const insertSplices = (events, rpcId) => events.filter(e => e.type === 'agent/inbox/spliced'
  && e.data.inserted.some(m => m.source?.rpcId === rpcId))

// ---- auth ---------------------------------------------------------------------------------------

describe('auth: trust fence and browser-session cookie', () => {
  let host, secret, authority, sid
  let clockNow = T0
  before(async () => {
    host = await startContractHost({ now: () => clockNow })
    secret = readSecret(host.dshHome)
    authority = `127.0.0.1:${host.port}`
    sid = host.createSession({ cwd: join(tmpdir(), 'auth-proj'), live: true })
  })
  after(() => closeHost(host))

  const post = (headers, body) => raw(host, { headers: { 'content-type': 'application/json', ...headers }, body: body ?? envelope(promptArgs(sid)) })

  test('credentials file: version 1 layout, mode 0600, 32-byte base64url secret equal to host.secret', () => {
    const path = join(host.dshHome, '.credentials.yaml')
    assert.equal(statSync(path).mode & 0o777, 0o600)
    const text = readFileSync(path, 'utf8')
    assert.match(text, /^version: 1\nrefs: \{\}\nrecords:\n/)
    assert.equal(Buffer.from(secret, 'base64url').length, 32)
    assert.equal(Buffer.from(Buffer.from(secret, 'base64url')).toString('base64url'), secret)
    assert.equal(secret, host.secret)
  })

  test('a good cookie is accepted (200, {accepted:true})', async () => {
    const res = await post({ host: authority, cookie: cookie(secret, { authority, issuedAt: T0 - 1000, expiresAt: T0 + DAY }) })
    assert.equal(res.status, 200)
    assert.deepEqual(res.json.result, { ok: true, value: { accepted: true } })
    assert.equal(res.json.type, 'server-response')
  })

  test('boundaries that pass: issuedAt == now, lifetime exactly cookieMaxAgeDays, cookie among others', async () => {
    let res = await post({ host: authority, cookie: cookie(secret, { authority, issuedAt: T0, expiresAt: T0 + 30 * DAY }) })
    assert.equal(res.status, 200)
    res = await post({ host: authority, cookie: `a=b; ${cookie(secret, { authority, issuedAt: T0 - 5, expiresAt: T0 + 5 })}; c=d` })
    assert.equal(res.status, 200)
  })

  const rejected = {
    'expired (expiresAt == now)': () => cookie(secret, { authority, issuedAt: T0 - DAY, expiresAt: T0 }),
    'expired (expiresAt < now)': () => cookie(secret, { authority, issuedAt: T0 - 2 * DAY, expiresAt: T0 - 1 }),
    'issued 1 s in the future (no clock skew)': () => cookie(secret, { authority, issuedAt: T0 + 1000, expiresAt: T0 + DAY }),
    'issued 1 ms in the future': () => cookie(secret, { authority, issuedAt: T0 + 1, expiresAt: T0 + DAY }),
    'over max age (30 days + 1 ms)': () => cookie(secret, { authority, issuedAt: T0 - 1000, expiresAt: T0 - 1000 + 30 * DAY + 1 }),
    '3650-day cookie': () => cookie(secret, { authority, issuedAt: T0 - 1000, expiresAt: T0 + 3650 * DAY }),
    'expiresAt <= issuedAt': () => cookie(secret, { authority, issuedAt: T0, expiresAt: T0 }),
    'wrong authority in payload (right cookie name)': () => cookie(secret, { authority: `localhost:${host.port}`, nameAuthority: authority, issuedAt: T0 - 1, expiresAt: T0 + DAY }),
    'cookie minted for another authority': () => cookie(secret, { authority: `localhost:${host.port}`, issuedAt: T0 - 1, expiresAt: T0 + DAY }),
    'bad signature': () => cookie(secret, { authority, issuedAt: T0 - 1, expiresAt: T0 + DAY, tamper: true }),
    'signed with another secret': () => cookie(b64url(Buffer.alloc(32, 7)), { authority, issuedAt: T0 - 1, expiresAt: T0 + DAY }),
    'payload version 2': () => cookie(secret, { authority, issuedAt: T0 - 1, expiresAt: T0 + DAY, version: 2 }),
    'non-integer issuedAt': () => cookie(secret, { authority, issuedAt: T0 - 0.5, expiresAt: T0 + DAY }),
  }
  for (const [name, make] of Object.entries(rejected)) {
    test(`401 unauthorized: ${name}`, async () => {
      const res = await post({ host: authority, cookie: make() })
      assert.equal(res.status, 401)
      assert.equal(res.text, 'unauthorized')
    })
  }

  test('401 unauthorized: no cookie; the HMAC covers the body string, not the raw JSON', async () => {
    assert.equal((await post({ host: authority })).status, 401)
    const json = JSON.stringify({ version: 1, authority, issuedAt: T0 - 1, expiresAt: T0 + DAY })
    const body = b64url(Buffer.from(json))
    const wrongSig = b64url(createHmac('sha256', Buffer.from(secret, 'base64url')).update(json).digest())
    const name = 'dsh-auth-' + b64url(createHash('sha256').update(authority).digest())
    assert.equal((await post({ host: authority, cookie: `${name}=v1.${body}.${wrongSig}` })).status, 401)
    const keyedByString = b64url(createHmac('sha256', secret).update(body).digest())
    assert.equal((await post({ host: authority, cookie: `${name}=v1.${body}.${keyedByString}` })).status, 401,
      'the HMAC key is the decoded secret bytes, not the base64url string')
  })

  test('the clock is the host clock: a cookie becomes valid once the host catches up', async () => {
    const c = cookie(secret, { authority, issuedAt: T0 + 1000, expiresAt: T0 + DAY })
    assert.equal((await post({ host: authority, cookie: c })).status, 401)
    clockNow = T0 + 1000
    try {
      assert.equal((await post({ host: authority, cookie: c })).status, 200)
    } finally {
      clockNow = T0
    }
  })

  test('403 beats 401: bad Origin, untrusted/missing/bad Host, cross-site, opaque origin (no cookie)', async () => {
    const cases = [
      { host: authority, origin: 'http://evil.example' },
      { host: authority, origin: 'null' },
      { host: authority, origin: 'file:///x' },
      { host: `evil.example:${host.port}` },
      { host: 'exa mple' },
      {},
      { host: authority, 'sec-fetch-site': 'cross-site' },
    ]
    for (const headers of cases) {
      const res = await post(headers)
      assert.equal(res.status, 403, JSON.stringify(headers))
      assert.equal(res.text, 'forbidden')
    }
    // ... and 403 even with a valid cookie attached
    const good = cookie(secret, { authority, issuedAt: T0 - 1, expiresAt: T0 + DAY })
    assert.equal((await post({ host: authority, origin: 'http://evil.example', cookie: good })).status, 403)
    const reasons = host.requests.filter(r => r.status === 403).map(r => r.trust)
    assert.deepEqual([...new Set(reasons)].sort(),
      ['bad-host', 'cross-site', 'missing-host', 'opaque-origin', 'origin-mismatch', 'untrusted-host'])
  })

  test('loopback spellings share one trust domain: localhost Origin on a 127.0.0.1 Host passes the fence', async () => {
    assert.equal((await post({ host: authority, origin: `http://localhost:${host.port}` })).status, 401)
    assert.equal((await post({ host: authority, origin: 'http://[::1]:9' })).status, 401)
    assert.equal((await post({ host: authority, 'sec-fetch-site': 'same-origin' })).status, 401)
    const good = cookie(secret, { authority, issuedAt: T0 - 1, expiresAt: T0 + DAY })
    assert.equal((await post({ host: authority, origin: `http://${authority}`, cookie: good })).status, 200)
  })

  test('trustedHosts admits a non-loopback Host; the cookie is bound to that authority', async () => {
    const h2 = await startContractHost({ trustedHosts: ['harness.internal'], now: () => T0 })
    try {
      const s2 = readSecret(h2.dshHome)
      const aud = `harness.internal:${h2.port}`
      const body = envelope(promptArgs(h2.createSession({ cwd: join(tmpdir(), 'p2'), live: true })))
      const ok = await raw(h2, { headers: { host: aud, 'content-type': 'application/json', cookie: cookie(s2, { authority: aud, issuedAt: T0 - 1, expiresAt: T0 + DAY }) }, body })
      assert.equal(ok.status, 200)
      const other = await raw(h2, { headers: { host: `other.internal:${h2.port}`, 'content-type': 'application/json' }, body })
      assert.equal(other.status, 403)
    } finally {
      await closeHost(h2)
    }
  })

  test('cookieMaxAgeDays option changes the cap', async () => {
    const h3 = await startContractHost({ cookieMaxAgeDays: 3650, now: () => T0 })
    try {
      const s3 = readSecret(h3.dshHome)
      const aud = `127.0.0.1:${h3.port}`
      const body = envelope(promptArgs(h3.createSession({ cwd: join(tmpdir(), 'p3'), live: true })))
      const res = await raw(h3, { headers: { host: aud, 'content-type': 'application/json', cookie: cookie(s3, { authority: aud, issuedAt: T0 - 1, expiresAt: T0 - 1 + 3650 * DAY }) }, body })
      assert.equal(res.status, 200)
    } finally {
      await closeHost(h3)
    }
  })
})

// ---- route and envelope -------------------------------------------------------------------------

describe('route and envelope', () => {
  let host, call, sid
  before(async () => ({ host, call, sid } = await openHost({ live: 'route-proj' })))
  after(() => closeHost(host))

  test('415 for a non-JSON media type; charset parameter is fine', async () => {
    let res = await call(envelope(promptArgs(sid)), { headers: { 'content-type': 'text/plain' } })
    assert.equal(res.status, 415)
    res = await call(envelope(promptArgs(sid)), { headers: { 'content-type': 'Application/JSON; charset=utf-8' } })
    assert.equal(res.status, 200)
  })

  test('400 for a body that is not JSON', async () => {
    const res = await call('{not json')
    assert.equal(res.status, 400)
    assert.equal(res.text, 'body is not JSON')
  })

  test('404: GET, unknown endpoint, malformed path, outside /api', async () => {
    const authority = `127.0.0.1:${host.port}`
    const secret = readSecret(host.dshHome)
    const headers = { host: authority, 'content-type': 'application/json', cookie: cookie(secret, { authority, issuedAt: Date.now() - 1000, expiresAt: Date.now() + DAY }) }
    assert.equal((await raw(host, { method: 'GET', headers })).status, 404)
    assert.equal((await raw(host, { path: '/api/session/nope', headers, body: envelope({}, { method: 'session/nope' }) })).status, 404)
    assert.equal((await raw(host, { path: '/api/session//prompt', headers, body: {} })).status, 404)
    assert.equal((await raw(host, { path: '/api', headers, body: {} })).status, 404)
    assert.equal((await raw(host, { path: '/session/prompt', headers, body: {} })).status, 404)
    // auth runs before endpoint matching on /api: an unknown endpoint without a cookie is 401
    assert.equal((await raw(host, { path: '/api/session/nope', headers: { host: authority } })).status, 401)
  })

  test('invalid envelope -> gateway/bad-request, rpcId echoed or "invalid-request"', async () => {
    let res = await call({ type: 'client-response', rpcId: 'r-1', method: 'session/prompt', payload: {} })
    assert.equal(res.status, 200)
    assert.equal(res.json.rpcId, 'r-1')
    assert.equal(res.json.result.ok, false)
    assert.equal(res.json.result.error.code, 'gateway/bad-request')
    assert.ok(Array.isArray(res.json.result.error.details.issues))
    res = await call([1, 2])
    assert.equal(res.json.rpcId, 'invalid-request')
    assert.equal(res.json.result.error.code, 'gateway/bad-request')
  })

  test('method must equal the path endpoint', async () => {
    const res = await call(envelope(promptArgs(sid), { method: 'session/list', rpcId: 'r-2' }))
    assert.equal(res.json.rpcId, 'r-2')
    assert.equal(res.json.result.error.code, 'gateway/bad-request')
    assert.deepEqual(res.json.result.error.details, { issues: [] })
  })

  test('args keys must be exactly {request}: gateway/arguments-invalid', async () => {
    const args = promptArgs(sid)
    let res = await call(envelope({ ...args, extra: 1 }))
    assert.equal(res.json.result.error.code, 'gateway/arguments-invalid')
    res = await call(envelope({ req: args.request }))
    assert.equal(res.json.result.error.code, 'gateway/arguments-invalid')
    res = await call(envelope({}))
    assert.equal(res.json.result.error.code, 'gateway/arguments-invalid')
    // R8-style payload (the request object itself, no args) is refused before arguments are read
    res = await call({ type: 'client-request', rpcId: 'r-3', method: 'session/prompt', payload: args.request })
    assert.equal(res.json.result.error.code, 'gateway/internal')
  })

  test('prompt validation: blank content, unknown session, subagent session, bad time zone', async () => {
    let res = await call(envelope(promptArgs(sid, { text: ' \n\t ' })))
    assert.equal(res.json.result.error.code, 'gateway/bad-request')
    res = await call(envelope({ request: { ...promptArgs(sid).request, content: [] } }))
    assert.equal(res.json.result.error.code, 'gateway/bad-request')
    res = await call(envelope(promptArgs('session-does-not-exist')))
    assert.deepEqual(res.json.result.error, { code: 'session/not-found', message: 'session "session-does-not-exist" not found', details: { sessionId: 'session-does-not-exist' } })
    const child = host.createSession({ cwd: join(tmpdir(), 'route-proj'), origin: 'subagent', parentSession: sid, live: true })
    res = await call(envelope(promptArgs(child)))
    assert.equal(res.json.result.error.code, 'session/agent-busy')
    assert.equal(res.json.result.error.details.reason, 'use subagent delivery for this child session')
    assert.equal(host.events(child).length, 0)
    res = await call(envelope({ request: { ...promptArgs(sid).request, clientTimeZone: 'Mars/Olympus' } }))
    assert.equal(res.json.result.error.code, 'session/invalid-time-zone')
    const tz = { request: { ...promptArgs(sid).request, clientTimeZone: 'Europe/Berlin' } }
    res = await call(envelope(tz))
    assert.equal(res.json.result.ok, true)
    assert.deepEqual(insertSplices(host.events(sid), tz.request.requestId)[0].data.inserted[0].source,
      { kind: 'user', rpcId: tz.request.requestId, clientTimeZone: 'Europe/Berlin' })
  })

  test('session/history returns the written events (read-only, test endpoint)', async () => {
    const before = host.events(sid).length
    const res = await call(envelope({ request: { sessionId: sid } }, { method: 'session/history' }), { path: '/api/session/history' })
    assert.equal(res.json.result.ok, true)
    assert.equal(res.json.result.value.events.length, before)
    assert.equal(host.events(sid).length, before)
  })

  test('requests log records method, path, status and parsed body', async () => {
    const rec = host.requests.at(-1)
    assert.equal(rec.method, 'POST')
    assert.equal(rec.path, '/api/session/history')
    assert.equal(rec.status, 200)
    assert.equal(rec.body.method, 'session/history')
  })
})

// ---- inbox semantics ----------------------------------------------------------------------------

describe('delivery: dedup, queue, steer, downgrade, idle wake, cold resume', () => {
  let host, call
  const cwd = join(tmpdir(), 'mail proj')
  before(async () => ({ host, call } = await openHost()))
  after(() => closeHost(host))

  test('steer on an idle session opens a turn at once and lands in step 1', async () => {
    const sid = host.createSession({ cwd, live: true })
    const args = promptArgs(sid, { mode: 'steer' })
    const res = await call(envelope(args))
    assert.deepEqual(res.json.result, { ok: true, value: { accepted: true } })
    const ev = host.events(sid)
    assert.deepEqual(types(ev), ['agent/inbox/spliced', 'turn/start', 'agent/inbox/spliced', 'step/start', 'user/message'])
    assert.equal(ev[0].data.target, 'next-step')
    assert.deepEqual(ev[2].data, { target: 'next-step', start: 0, removedCount: 1, inserted: [] })
    assert.deepEqual(ev[3].data, { turn: 1, step: 1 })
    const landed = ev[4]
    assert.equal(landed.surfaceOp, 'append')
    assert.deepEqual(landed.data, ev[0].data.inserted[0], 'the landed message is the inserted one')
    assert.deepEqual(landed.data.source, { kind: 'user', rpcId: args.request.requestId })
    assert.equal(landed.data.role, 'user')
    assert.match(landed.data.id, /^[0-9a-f-]{36}$/)
    assert.deepEqual(ev.map(e => e.seq), [0, 1, 2, 3, 4])
    assert.equal(host.state(sid).status, 'running')
  })

  test('dedup: the same requestId twice -> one insert splice, one landing, second call changes nothing', async () => {
    const sid = host.createSession({ cwd, live: true })
    const args = promptArgs(sid)
    assert.equal((await call(envelope(args))).json.result.value.accepted, true)
    const count = host.events(sid).length
    assert.equal((await call(envelope(args))).json.result.value.accepted, true)
    const ev = host.events(sid)
    assert.equal(ev.length, count)
    assert.equal(insertSplices(ev, args.request.requestId).length, 1)
    assert.equal(landings(ev, args.request.requestId).length, 1)
  })

  test('dedup while pending (not yet landed) also holds', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    const args = promptArgs(sid)
    await call(envelope(args))
    await call(envelope(args))
    assert.equal(host.inbox(sid).nextTurn.length, 1)
    assert.equal(insertSplices(host.events(sid), args.request.requestId).length, 1)
    host.completeTurn(sid)
    assert.equal(landings(host.events(sid), args.request.requestId).length, 1)
  })

  test('queue while running -> next-turn; lands only in the following turn, first step', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    const args = promptArgs(sid, { mode: 'queue' })
    await call(envelope(args))
    let ev = host.events(sid)
    assert.equal(insertSplices(ev, args.request.requestId)[0].data.target, 'next-turn')
    assert.equal(landings(ev, args.request.requestId).length, 0)
    assert.equal(host.inbox(sid).nextTurn.length, 1)
    host.completeStep(sid) // a step boundary does not claim next-turn input
    assert.equal(landings(host.events(sid), args.request.requestId).length, 0)
    host.completeTurn(sid)
    ev = host.events(sid)
    const landing = landings(ev, args.request.requestId)[0]
    const before = ev.slice(0, landing.seq)
    assert.deepEqual(before.filter(e => e.type === 'turn/end').map(e => e.data), [{ turn: 1, reason: { kind: 'completed' } }])
    assert.deepEqual(before.findLast(e => e.type === 'turn/start').data, { turn: 2 })
    assert.deepEqual(before.findLast(e => e.type === 'step/start').data, { turn: 2, step: 1 })
    assert.deepEqual(host.inbox(sid), { nextTurn: [], nextStep: [] })
  })

  test('steer while running -> next-step; lands at the next step boundary inside the same turn', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    const args = promptArgs(sid, { mode: 'steer' })
    await call(envelope(args))
    assert.equal(insertSplices(host.events(sid), args.request.requestId)[0].data.target, 'next-step')
    assert.equal(landings(host.events(sid), args.request.requestId).length, 0)
    host.completeStep(sid)
    const ev = host.events(sid)
    const landing = landings(ev, args.request.requestId)[0]
    assert.ok(landing)
    assert.equal(ev.some(e => e.type === 'turn/end'), false, 'no turn ended before the landing')
    assert.deepEqual(ev[landing.seq - 1].data, { turn: 1, step: 2 })
    assert.deepEqual(ev[landing.seq - 2].data, { target: 'next-step', start: 0, removedCount: 1, inserted: [] })
    assert.equal(host.state(sid).turn, 1)
  })

  test('steer after the running turn was aborted -> downgraded to next-turn; wake replays after convergence', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    host.abortTurn(sid)
    const args = promptArgs(sid, { mode: 'steer' })
    await call(envelope(args))
    assert.equal(insertSplices(host.events(sid), args.request.requestId)[0].data.target, 'next-turn')
    assert.equal(host.inbox(sid).nextStep.length, 0)
    host.completeTurn(sid)
    const ev = host.events(sid)
    assert.deepEqual(ev.find(e => e.type === 'turn/end').data, { turn: 1, reason: { kind: 'aborted', reason: { kind: 'user' } } })
    const landing = landings(ev, args.request.requestId)[0]
    assert.deepEqual(ev.slice(0, landing.seq).findLast(e => e.type === 'turn/start').data, { turn: 2 })
  })

  test('queue on an idle session also opens a turn at once (one next-turn item per turn)', async () => {
    const sid = host.createSession({ cwd, live: true })
    const a = promptArgs(sid)
    const b = promptArgs(sid)
    await call(envelope(a))
    await call(envelope(b))
    assert.equal(landings(host.events(sid), a.request.requestId).length, 1)
    assert.equal(landings(host.events(sid), b.request.requestId).length, 0)
    host.completeTurn(sid)
    assert.equal(landings(host.events(sid), b.request.requestId).length, 1)
    host.completeTurn(sid)
    assert.equal(host.state(sid).status, 'idle')
  })

  test('cancel without keepInbox clears the inbox durably (outcome canceled); hasPromptRequest ignores splice history', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    const args = promptArgs(sid)
    await call(envelope(args))
    host.abortTurn(sid, { keepInbox: false })
    const cleared = host.events(sid).at(-1)
    assert.deepEqual(cleared.data, { target: 'next-turn', start: 0, removedCount: 1, inserted: [], outcome: 'canceled' })
    host.completeTurn(sid)
    assert.equal(host.state(sid).status, 'idle')
    await call(envelope(args)) // same requestId: admitted again, because only inbox + user/message count
    assert.equal(insertSplices(host.events(sid), args.request.requestId).length, 2)
    assert.equal(landings(host.events(sid), args.request.requestId).length, 1)
  })

  test('setRunning(false) completes turns until idle, landing whatever was pending', async () => {
    const sid = host.createSession({ cwd, live: true })
    host.setRunning(sid, true)
    const a = promptArgs(sid)
    const b = promptArgs(sid, { mode: 'steer' })
    await call(envelope(a))
    await call(envelope(b))
    host.setRunning(sid, false)
    const ev = host.events(sid)
    assert.equal(host.state(sid).status, 'idle')
    assert.equal(landings(ev, a.request.requestId)[0].seq > landings(ev, b.request.requestId)[0].seq, true)
    assert.deepEqual(ev.filter(e => e.type === 'turn/end').map(e => e.data.turn), [1, 2])
  })

  test('autoComplete: every opened turn completes at once', async () => {
    const h = await startContractHost({ autoComplete: true })
    try {
      const c = client(h, readSecret(h.dshHome), Date.now)
      const sid = h.createSession({ cwd, live: true })
      const args = promptArgs(sid)
      await c(envelope(args))
      assert.equal(landings(h.events(sid), args.request.requestId).length, 1)
      assert.deepEqual(types(h.events(sid)).slice(-2), ['step/end', 'turn/end'])
      assert.equal(h.state(sid).status, 'idle')
    } finally {
      await closeHost(h)
    }
  })

  test('cold session: resumed on prompt (untagged session/end-seed first), then delivered', async () => {
    const sid = host.createSession({ cwd, preset: 'standard' })
    assert.equal(host.state(sid).live, false)
    const args = promptArgs(sid)
    await call(envelope(args))
    const ev = host.events(sid)
    assert.deepEqual(ev[0], { type: 'session/end-seed', seq: 0, time: ev[0].time, data: {} })
    assert.equal(landings(ev, args.request.requestId).length, 1)
    assert.equal(host.state(sid).live, true)
  })

  test('cold resume closes an interrupted turn before the end-seed', async () => {
    const sid = host.createSession({
      cwd,
      events: [{ type: 'turn/start', data: { turn: 1 } }, { type: 'step/start', data: { turn: 1, step: 1 } }],
    })
    await call(envelope(promptArgs(sid)))
    const ev = host.events(sid)
    assert.deepEqual(types(ev).slice(0, 5), ['turn/start', 'step/start', 'step/end', 'turn/end', 'session/end-seed'])
    assert.deepEqual(ev[3].data, { turn: 1, reason: { kind: 'interrupted' } })
    assert.deepEqual(ev.find(e => e.type === 'turn/start' && e.seq > 4).data, { turn: 2 })
  })

  test('a cold session without cwd is not found; dedup sees a landed rpcId from the stored log', async () => {
    const noCwd = host.createSession({})
    assert.equal((await call(envelope(promptArgs(noCwd)))).json.result.error.code, 'session/not-found')
    const rpcId = `dsh-session-mail:${randomUUID()}`
    const sid = host.createSession({
      cwd,
      events: [{ type: 'user/message', surfaceOp: 'append', data: { id: randomUUID(), role: 'user', content: [{ type: 'text', text: 'old' }], source: { kind: 'user', rpcId } } }],
    })
    const res = await call(envelope(promptArgs(sid, { requestId: rpcId })))
    assert.equal(res.json.result.value.accepted, true)
    assert.equal(landings(host.events(sid), rpcId).length, 1)
  })
})

// ---- V4 file ------------------------------------------------------------------------------------

describe('V4 log on disk', () => {
  let host, call, sid, cwd
  before(async () => {
    ({ host, call } = await openHost())
    cwd = join(tmpdir(), 'v4 proj', 'sub')
    sid = host.createSession({ cwd, preset: 'standard', live: true })
    await call(envelope(promptArgs(sid, { mode: 'steer' })))
    host.completeTurn(sid)
    await call(envelope(promptArgs(sid)))
  })
  after(() => closeHost(host))

  test('path: $DSH_HOME/sessions/--<cwd-slug>--/<id>/session.v4.jsonl.zstd', () => {
    const path = join(host.dshHome, 'sessions', expectedProjectDir(cwd), sid, 'session.v4.jsonl.zstd')
    assert.equal(statSync(path).isFile(), true)
    assert.equal(host.logPath(sid), path)
  })

  test('multi-frame: header alone in frame 1, one checksummed frame per append batch; decoded by zlib per frame', () => {
    const buf = readFileSync(join(host.dshHome, 'sessions', expectedProjectDir(cwd), sid, 'session.v4.jsonl.zstd'))
    const frames = splitZstdFrames(buf)
    assert.equal(frames.length, 4, 'header + prompt batch + completeTurn batch + prompt batch')
    assert.ok(frames.every(f => f.checksum), 'frames carry the content checksum')
    const texts = frames.map(f => zstdDecompressSync(f.bytes).toString('utf8'))
    assert.ok(texts.every(t => t.endsWith('\n')))
    assert.equal(texts[0].split('\n').length, 2, 'first frame is exactly one header line')
    const header = JSON.parse(texts[0])
    assert.deepEqual(Object.keys(header).sort(), ['agentPreset', 'createdAt', 'cwd', 'delegationDepth', 'id', 'isSeeded', 'type', 'version'])
    assert.deepEqual({ ...header, createdAt: 0 }, { type: 'session', version: 4, id: sid, createdAt: 0, cwd, isSeeded: false, delegationDepth: 0, agentPreset: 'standard' })
    const events = texts.slice(1).join('').trimEnd().split('\n').map(l => JSON.parse(l))
    assert.deepEqual(events, host.events(sid))
    assert.deepEqual(events.map(e => e.seq), events.map((_, i) => i))
    for (const e of events) {
      assert.deepEqual(Object.keys(e).filter(k => !['type', 'seq', 'time', 'data', 'surfaceOp'].includes(k)), [])
    }
  })

  test('subagent and fork headers: optional keys only when set', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'v4-'))
    const h = await startContractHost({ dshHome: dir })
    try {
      const child = h.createSession({ cwd, origin: 'subagent', parentSession: sid })
      const bare = h.createSession({})
      const read = id => JSON.parse(zstdDecompressSync(splitZstdFrames(readFileSync(h.logPath(id)))[0].bytes).toString())
      assert.deepEqual(Object.keys(read(child)).sort(), ['createdAt', 'cwd', 'delegationDepth', 'id', 'isSeeded', 'origin', 'parentSession', 'type', 'version'])
      assert.equal(read(child).origin, 'subagent')
      assert.deepEqual(Object.keys(read(bare)).sort(), ['createdAt', 'delegationDepth', 'id', 'isSeeded', 'type', 'version'])
      assert.ok(h.logPath(bare).includes(join('sessions', '_no-cwd', bare)))
    } finally {
      await h.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

// ---- faults ------------------------------------------------------------------------------------

describe('faults', () => {
  let host, call, sid
  before(async () => ({ host, call, sid } = await openHost({ live: 'fault-proj' })))
  after(() => closeHost(host))

  test('status: the next request gets that HTTP status, then normal service', async () => {
    host.faults.status = 503
    assert.equal((await call(envelope(promptArgs(sid)))).status, 503)
    assert.equal((await call(envelope(promptArgs(sid)))).status, 200)
  })

  test('resetAfterAccept: the message lands, the socket closes without a response; a retry is deduplicated', async () => {
    host.faults.resetAfterAccept = true
    const args = promptArgs(sid)
    await assert.rejects(call(envelope(args)), /socket hang up|ECONNRESET/)
    assert.equal(insertSplices(host.events(sid), args.request.requestId).length, 1)
    assert.equal(host.requests.at(-1).reset, true)
    const retry = await call(envelope(args))
    assert.equal(retry.json.result.value.accepted, true)
    assert.equal(insertSplices(host.events(sid), args.request.requestId).length, 1)
  })

  test('delayMs delays every response: held back behind a timer of the same length started before the request', async () => {
    // one event loop: the host's own wait of delayMs is armed after this timer of the same length, so it
    // cannot end first; an undelayed answer comes back in a few ms, before the timer
    host.faults.delayMs = 150
    const order = []
    const timer = new Promise(resolve => setTimeout(resolve, 150)).then(() => order.push('timer'))
    const res = await call(envelope(promptArgs(sid)))
    order.push('response')
    host.faults.delayMs = 0
    await timer
    assert.equal(res.status, 200)
    assert.deepEqual(order, ['timer', 'response'], 'the response waited out the delay')
  })

  test('down: connections are refused; back up on the same port', async () => {
    await host.setDown(true)
    assert.equal(host.faults.down, true)
    await assert.rejects(call(envelope(promptArgs(sid))), /ECONNREFUSED/)
    await host.setDown(false)
    assert.equal((await call(envelope(promptArgs(sid)))).status, 200)
  })
})
