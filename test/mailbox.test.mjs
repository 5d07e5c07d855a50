// The owner's half of the mailbox (lib/mailbox.js over crates/core/src/mailbox), with the real core and a
// host double: envelopes posted in the on-disk format are delivered in-process once, through the session
// controller when the host has one (0.1.7) or the agent's inbox (rc.8), and each gets its receipt.
// The sender's half and the crash rules are in the Rust tests (mailbox::tests, tools::send::tests); the
// real rc.8 proof is test/real-host-peers.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { appendFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHash, randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import { startMailbox } from '../lib/mailbox.js'
import { startOwnerProcess } from './helpers/owner-process.mjs'

const core = createRequire(import.meta.url)('../binding.cjs')
const sleep = ms => new Promise(r => setTimeout(r, ms))
const STARTED = 1234
let posted = Date.now()

function home(t) {
  const h = mkdtempSync(join(tmpdir(), 'mailbox-'))
  t.after(() => rmSync(h, { recursive: true, force: true }))
  return h
}

/** The delivered text of a send_session_message from session-a (seed 003's From header). */
const fromA = body => `From session-a \uFF1A\n${body}`

/**
 * Post an envelope the way the core's sender does (file name = the request id's UUID): the sender is a
 * session of this home and its ledger line, written when it posts, vouches for the message
 * (crates/core/src/mailbox/admit.rs) — the drain delivers nothing else.
 */
function post(h, session, { mode = 'queue', text = 'hello', ownerPid = process.pid, startedAt = STARTED } = {}) {
  const uuid = randomUUID()
  const requestId = `dsh-session-mail:${uuid}`
  const dir = join(h, 'dsh-session-mail', 'mailbox', session)
  for (const d of [join(h, 'dsh-session-mail'), join(h, 'dsh-session-mail', 'mailbox'), dir]) mkdirSync(d, { recursive: true, mode: 0o700 })
  const senderLog = join(h, 'sessions', '-w', 'session-a')
  mkdirSync(senderLog, { recursive: true })
  writeFileSync(join(senderLog, 'session.jsonl'), JSON.stringify({ type: 'session', version: 0, id: 'session-a', createdAt: 1, cwd: '/w' }) + '\n')
  appendFileSync(join(h, 'dsh-session-mail', 'ledger.jsonl'), JSON.stringify({
    time: new Date().toISOString(), sender: 'session-a', target: session, tool: 'send_session_message', mode, requestId,
    outcome: 'accepted', bodyChars: [...text].length, bodySha256: createHash('sha256').update(text).digest('hex'), chain: requestId, hop: 1,
  }) + '\n', { mode: 0o600 })
  writeFileSync(join(dir, `${uuid}.msg`), JSON.stringify({
    v: 1, requestId, sessionId: session, mode, text: fromA(text), sender: 'session-a', ownerPid, ownerStartedAt: startedAt, postedAt: ++posted, // oldest first
  }), { mode: 0o600 })
  return { requestId, uuid, dir }
}

function receipt(dir, uuid) {
  const p = join(dir, `${uuid}.done`)
  return existsSync(p) ? JSON.parse(readFileSync(p, 'utf8')) : null
}

/** A live agent of rc.8's shape: steer/followup put the message in its inbox. */
function fakeAgent(id) {
  const agent = {
    id, status: 'running', session: { id, seq: 3 }, inbox: { nextTurn: [], nextStep: [] }, calls: [],
    followup(m) { agent.calls.push(['followup', m]); agent.inbox.nextTurn.push(m) },
    steer(m) { agent.calls.push(['steer', m]); agent.inbox.nextStep.push(m) },
  }
  return agent
}

function fakeCtx(agents, extra = {}) {
  const flushed = []
  return {
    flushed,
    agents: { list: () => agents, get: id => agents.find(a => a.id === id) },
    sessions: { flush: async s => { flushed.push(s.id) } },
    ...extra,
  }
}

async function until(fn, ms = 3000) {
  const t0 = Date.now()
  for (;;) {
    const v = fn()
    if (v) return v
    if (Date.now() - t0 > ms) return v
    await sleep(20)
  }
}

test('rc.8 route: each envelope lands once in the live agent, as the host\'s own route builds it, then its receipt', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const ctx = fakeCtx([b])
  const q = post(h, 'session-b', { mode: 'queue', text: 'first' })
  const s = post(h, 'session-b', { mode: 'steer', text: 'second' })
  const stop = startMailbox(ctx, core, { startedAt: STARTED, dshHome: () => h })
  t.after(stop)
  assert.ok(await until(() => receipt(q.dir, q.uuid) && receipt(s.dir, s.uuid)), 'both settled')
  assert.deepEqual(b.calls.map(([how, m]) => [how, m.content[0].text, m.source.rpcId, m.role]), [
    ['followup', fromA('first'), q.requestId, 'user'],
    ['steer', fromA('second'), s.requestId, 'user'],
  ])
  assert.ok(Object.isFrozen(b.calls[0][1]) && Object.isFrozen(b.calls[0][1].source), 'deep-frozen like createUserMessage')
  assert.equal(typeof b.calls[0][1].id, 'string')
  assert.deepEqual(ctx.flushed, ['session-b', 'session-b'], 'flushed before each receipt')
  const r = receipt(q.dir, q.uuid)
  assert.equal(r.state, 'delivered')
  assert.equal(r.route, 'agent')
  assert.equal(r.pid, process.pid)
  assert.deepEqual(readdirSync(q.dir).filter(n => !n.endsWith('.done')), [], 'no envelope or claim left')
  // a few more ticks: nothing is delivered again
  await sleep(600)
  assert.equal(b.calls.length, 2)
})

test('dedup without host help: already pending in the inbox, or already delivered by this process; a refusing agent is a rejection', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const ctx = fakeCtx([b])
  const stop = startMailbox(ctx, core, { startedAt: STARTED, dshHome: () => h })
  t.after(stop)
  // another holder put it in the inbox before it crashed without a receipt: not delivered again
  const pending = post(h, 'session-b')
  b.inbox.nextTurn.push({ role: 'user', content: [], source: { kind: 'user', rpcId: pending.requestId } })
  assert.ok(await until(() => receipt(pending.dir, pending.uuid)))
  assert.deepEqual([receipt(pending.dir, pending.uuid).state, receipt(pending.dir, pending.uuid).route], ['delivered', 'already-delivered'])
  assert.equal(b.calls.length, 0)
  // delivered here, then its claim came back unsettled (the receipt write failed): not delivered twice
  const once = post(h, 'session-b', { text: 'once' })
  assert.ok(await until(() => receipt(once.dir, once.uuid)))
  assert.equal(b.calls.length, 1)
  b.inbox.nextTurn.length = 0 // the turn took it: the inbox no longer shows it
  const body = JSON.stringify({ v: 1, requestId: once.requestId, sessionId: 'session-b', mode: 'queue', text: fromA('once'), sender: 'session-a', ownerPid: process.pid, ownerStartedAt: STARTED, postedAt: 1 })
  rmSync(join(once.dir, `${once.uuid}.done`))
  writeFileSync(join(once.dir, `${once.uuid}.claimed-${process.pid}`), body, { mode: 0o600 })
  assert.ok(await until(() => receipt(once.dir, once.uuid)))
  assert.equal(receipt(once.dir, once.uuid).route, 'already-delivered')
  assert.equal(b.calls.length, 1)
  // the agent refuses: rc.8's own route answers agent-busy for the same throw
  b.followup = () => { throw new Error('closed') }
  const no = post(h, 'session-b', { text: 'no' })
  assert.ok(await until(() => receipt(no.dir, no.uuid)))
  const r = receipt(no.dir, no.uuid)
  assert.deepEqual([r.state, r.code, r.message], ['rejected', 'agent-busy', 'closed'])
})

test('0.1.7 route: the session controller gets the request id (host dedup); its refusal code reaches the receipt', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const prompts = []
  const controller = {
    async prompt(request, signal) {
      prompts.push(request)
      assert.ok(signal instanceof AbortSignal)
      if (request.content[0].text === fromA('refuse')) throw Object.assign(new Error('no adapter serves provider'), { code: 'session/model-unavailable' })
      return { accepted: true }
    },
  }
  const ctx = fakeCtx([b], { get: name => (name === 'sessionController' ? controller : undefined) })
  const ok = post(h, 'session-b', { text: 'fine', mode: 'steer' })
  const no = post(h, 'session-b', { text: 'refuse' })
  const stop = startMailbox(ctx, core, { startedAt: STARTED, dshHome: () => h })
  t.after(stop)
  assert.ok(await until(() => receipt(ok.dir, ok.uuid) && receipt(no.dir, no.uuid)))
  assert.deepEqual(prompts.map(p => [p.requestId, p.sessionId, p.mode]), [[ok.requestId, 'session-b', 'steer'], [no.requestId, 'session-b', 'queue']])
  assert.equal(b.calls.length, 0, 'the agent inbox is not used when the controller exists')
  assert.deepEqual([receipt(ok.dir, ok.uuid).state, receipt(ok.dir, ok.uuid).route], ['delivered', 'session-controller'])
  const r = receipt(no.dir, no.uuid)
  assert.deepEqual([r.state, r.code], ['rejected', 'session/model-unavailable'])
})

test('only the holder drains: a session not live here is not touched, and an envelope for a live other owner waits', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const ctx = fakeCtx([b])
  const other = post(h, 'session-c') // not live here
  // addressed to a live owner process (a real one: presence::verify) whose fresh record lists session-b
  const owner = await startOwnerProcess({ home: h })
  t.after(() => owner.stop())
  await owner.publish({ sessions: ['session-b'], mailbox: true, startedAt: 5 })
  const parent = owner.pid
  const theirs = post(h, 'session-b', { ownerPid: parent, startedAt: 5 })
  const stop = startMailbox(ctx, core, { startedAt: STARTED, dshHome: () => h })
  t.after(stop)
  await sleep(700)
  assert.equal(b.calls.length, 0)
  assert.ok(existsSync(join(other.dir, `${other.uuid}.msg`)))
  assert.ok(existsSync(join(theirs.dir, `${theirs.uuid}.msg`)))
})

test('a receipt that cannot be written holds back neither the envelopes drained after it nor itself for long: each lands once, the failed one settles on a later check', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const c = fakeAgent('session-c')
  const ctx = fakeCtx([b, c])
  // the core's own drain and receipt, the first receipt failing as a full disk would fail it
  const drains = { n: 0 }
  let failures = 0
  const spy = {
    ...core,
    mailboxDrain: (...a) => { drains.n++; return core.mailboxDrain(...a) },
    mailboxSettle: async (...a) => { if (failures++ === 0) throw new Error('ENOSPC: no space left on device'); return core.mailboxSettle(...a) },
  }
  const atCall = []
  for (const agent of [b, c]) {
    const followup = agent.followup
    agent.followup = m => { atCall.push([agent.id, drains.n]); followup(m) }
  }
  const one = post(h, 'session-b', { text: 'one' })
  const two = post(h, 'session-c', { text: 'two' })
  const stop = startMailbox(ctx, spy, { startedAt: STARTED, dshHome: () => h })
  t.after(stop)
  assert.ok(await until(() => receipt(one.dir, one.uuid) && receipt(two.dir, two.uuid)), 'both settled')
  // both were delivered by the first drain's loop: the failed receipt did not end it
  assert.deepEqual(atCall, [['session-b', 1], ['session-c', 1]])
  assert.equal(failures >= 3, true, 'the failed receipt was written on a later check')
  assert.deepEqual([receipt(one.dir, one.uuid).state, receipt(two.dir, two.uuid).state], ['delivered', 'delivered'])
  await sleep(600)
  assert.deepEqual([b.calls.length, c.calls.length], [1, 1], 'nothing landed twice')
})

/**
 * A host double whose `ctx.agents` is a cordis service read through the context: `lookups` counts the reads;
 * setting it replaces the service (cordis then emits `internal/service` 'agents', which the test does by hand).
 */
function countingCtx(agents) {
  const bus = new EventEmitter()
  let registry = { list: () => agents, get: id => agents.find(a => a.id === id) }
  return {
    bus,
    lookups: 0,
    flushed: [],
    get agents() { this.lookups++; return registry },
    set agents(r) { registry = r },
    sessions: { flush: async () => {} },
    on(name, fn) { bus.on(name, fn); return () => bus.off(name, fn) },
    emit(name, ...args) { bus.emit(name, ...args) },
  }
}

test('the agent registry is looked up through the context once across mailbox checks, and again when cordis reports it replaced; the stop unhooks the memo', async (t) => {
  const h = home(t)
  const b = fakeAgent('session-b')
  const ctx = countingCtx([b])
  // the mailbox checks counted by the core's own calls (each check drains, then looks for lost messages)
  const checks = { n: 0 }
  const spy = { ...core, queuedRecover: (...a) => { checks.n++; return core.queuedRecover(...a) } }
  const one = post(h, 'session-b', { text: 'one' })
  const stop = startMailbox(ctx, spy, { startedAt: STARTED, dshHome: () => h })
  let stopped = false
  t.after(() => { if (!stopped) stop() })
  assert.ok(await until(() => receipt(one.dir, one.uuid)), 'delivered into session-b')
  assert.equal(receipt(one.dir, one.uuid).route, 'agent')
  const seen = checks.n
  assert.ok(await until(() => checks.n >= seen + 4), 'four more checks ran')
  // another service changing does not drop the registry; a claim splice reads it too
  ctx.emit('internal/service', 'webServer')
  ctx.emit('session/event', { id: 'session-b' }, { type: 'agent/inbox/spliced', seq: 9, data: { target: 'next-turn', start: 0, removedCount: 1 } })
  const later = checks.n
  assert.ok(await until(() => checks.n >= later + 2))
  assert.equal(ctx.lookups, 1, 'one cordis lookup for every check, delivery and splice so far')
  // the registry replaced at runtime: cordis says so, and the next check drains the new registry's session
  const c = fakeAgent('session-c')
  ctx.agents = { list: () => [c], get: id => (id === 'session-c' ? c : undefined) }
  ctx.emit('internal/service', 'agents')
  const two = post(h, 'session-c', { text: 'two' })
  assert.ok(await until(() => receipt(two.dir, two.uuid)), 'delivered into the new registry\'s session')
  assert.deepEqual(c.calls.map(([how, m]) => [how, m.source.rpcId]), [['followup', two.requestId]])
  assert.equal(b.calls.length, 1)
  const after = checks.n
  assert.ok(await until(() => checks.n >= after + 2))
  assert.equal(ctx.lookups, 2, 'looked up once more, then kept')
  stop()
  stopped = true
  assert.equal(ctx.bus.listenerCount('internal/service') + ctx.bus.listenerCount('session/event'), 0, 'the stop unhooks its listeners')
})
