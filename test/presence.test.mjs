// lib/presence.js over the real core: a live session's status change, and a session created or disposed,
// are republished when the host says so (its rc.8 events: toninfo/deepseek-harness
// packages/core/agent/src/runtime-types.ts `agent/status`, `agent/created`, `agent/disposed`; awaiting-user
// from `session/event`, lib/observe.js), not only on the periodic refresh. The refresh is set to an hour
// here, so only the event-driven republish can make the record change: each check is a bounded poll of
// the record on disk, never a timed assertion. The real-host side is test/real-host-peers.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EventEmitter } from 'node:events'
import { startPresence } from '../lib/presence.js'
import { startHandBack, startMailbox } from '../lib/mailbox.js'
import { followSessions } from '../lib/host.js'
import { onSessionEvent } from '../lib/observe.js'

const core = createRequire(import.meta.url)('../binding.cjs')
const sleep = ms => new Promise(r => setTimeout(r, ms))
const HOUR = 3_600_000
/** lib/presence.js DEBOUNCE_MS: the negative checks wait several of it */
const DEBOUNCE_MS = 50

/** The registry double over `agents` (rc.8 `AgentRegistry` `list` / `get`). */
const registryOf = agents => ({ list: () => agents, get: id => agents.find(a => a.id === id) })

/**
 * A host double with rc.8's event names (cordis `ctx.on` returns the listener's disposer). `ctx.agents` is a
 * service read through the context: `lookups` counts them; setting it replaces the service (cordis then
 * emits `internal/service` 'agents', which a test does by hand).
 */
function fakeCtx(agents) {
  const bus = new EventEmitter()
  let registry = registryOf(agents)
  return {
    bus,
    lookups: 0,
    get agents() { this.lookups++; return registry },
    set agents(r) { registry = r },
    on(name, fn) { bus.on(name, fn); return () => bus.off(name, fn) },
    emit(name, ...args) { bus.emit(name, ...args) },
  }
}

const agent = (id, status = 'idle') => ({ id, status, session: { id, seq: 1 }, inbox: { nextTurn: [], nextStep: [] } })

function setup(t, agents, opts = {}) {
  const home = mkdtempSync(join(tmpdir(), 'presence-'))
  const ctx = fakeCtx(agents)
  followSessions(ctx)
  const writes = { n: 0 }
  const counting = { ...core, publishPresence: (...a) => { writes.n++; return (writes.last = core.publishPresence(...a)) } }
  const stop = startPresence(ctx, counting, { hostVersion: '0.1.0-rc.8', baseUrl: () => null, dshHome: () => home, refreshMs: HOUR, ...opts })
  // a stop after the signal writes once more: the home goes once that write is done
  t.after(async () => { stop(); await writes.last?.catch(() => {}); rmSync(home, { recursive: true, force: true }) })
  return { home, ctx, writes, stop, file: join(home, 'dsh-session-mail', 'presence', `${process.pid}.json`) }
}

function record(file) {
  try { return JSON.parse(readFileSync(file, 'utf8')) } catch { return null }
}

/** Poll the record on disk until `pred` holds; fails with the last record after `ms`. */
async function until(file, pred, what, ms = 10_000) {
  const t0 = Date.now()
  let r
  for (;;) {
    r = record(file)
    if (r !== null && pred(r)) return r
    assert.ok(Date.now() - t0 < ms, `${what}; the record says ${JSON.stringify(r?.sessions)}`)
    await sleep(10)
  }
}

const statusOf = (r, id) => r.sessions.find(s => s.id === id)?.status

test('a status change (agent/status) is republished without waiting for the periodic refresh', async t => {
  const a = agent('sess-a', 'running')
  const { file, ctx } = setup(t, [a])
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'the first record lists sess-a running')
  a.status = 'idle'
  ctx.emit('agent/status', { agent: a, status: 'idle' })
  await until(file, r => statusOf(r, 'sess-a') === 'idle', 'idle was republished after agent/status')
  a.status = 'running'
  ctx.emit('agent/status', { agent: a, status: 'running' })
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'running was republished after agent/status')
})

test('a session created or disposed is republished; a status no event announced is not (the refresh picks it up)', async t => {
  const agents = [agent('sess-a')]
  const { file, ctx } = setup(t, agents)
  await until(file, r => r.sessions.length === 1, 'the first record')
  const b = agent('sess-b', 'running')
  agents.push(b)
  ctx.emit('agent/created', { agent: b })
  await until(file, r => statusOf(r, 'sess-b') === 'running', 'sess-b appears after agent/created')
  agents.splice(0, 1)
  ctx.emit('agent/disposed', { agent: { id: 'sess-a', session: { id: 'sess-a' } } })
  await until(file, r => r.sessions.length === 1 && statusOf(r, 'sess-a') === undefined, 'sess-a is gone after agent/disposed')
  // the control: a change with no event stays unpublished (so the checks above are the events' doing)
  b.status = 'idle'
  await sleep(DEBOUNCE_MS * 6)
  assert.equal(statusOf(record(file), 'sess-b'), 'running')
})

test('awaiting-user, folded from session/event, is republished; a burst of events is one write, and an unchanged record is not rewritten', async t => {
  const a = agent('sess-a', 'running')
  const { file, ctx, writes } = setup(t, [a])
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'the first record')
  ctx.emit('session/event', a.session, { type: 'turn/start', seq: 2 })
  ctx.emit('session/event', a.session, { type: 'approval/asked', seq: 3, data: { id: 'ask-1' } })
  await until(file, r => statusOf(r, 'sess-a') === 'awaiting-user', 'awaiting-user was republished after approval/asked')
  ctx.emit('session/event', a.session, { type: 'approval/decided', seq: 4, data: { id: 'ask-1' } })
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'running again after approval/decided')
  const before = writes.n
  // events that change nothing listed: no write (each arms the debounce; the gathered record is unchanged)
  for (let i = 0; i < 50; i++) ctx.emit('session/event', a.session, { type: 'tool/call', seq: 5 + i, data: { callId: `c${i}`, name: 'read' } })
  ctx.emit('agent/status', { agent: a, status: 'running' })
  await sleep(DEBOUNCE_MS * 6)
  assert.equal(writes.n, before, 'an unchanged record is not rewritten')
  // assistant token events never arm it
  ctx.emit('session/event', a.session, { type: 'assistant/delta', seq: 60 })
  a.status = 'idle'
  await sleep(DEBOUNCE_MS * 6)
  assert.equal(statusOf(record(file), 'sess-a'), 'running')
})

test('the agent registry is looked up through the context once, and again when cordis reports the agents service replaced', async t => {
  const a = agent('sess-a', 'running')
  const { file, ctx } = setup(t, [a])
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'the first record')
  const first = ctx.lookups
  assert.ok(first >= 1)
  // republishes (each gathers the record) and another service changing: the registry kept
  for (const status of ['idle', 'running', 'idle']) {
    a.status = status
    ctx.emit('agent/status', { agent: a, status })
    await until(file, r => statusOf(r, 'sess-a') === status, `${status} was republished`)
  }
  ctx.emit('internal/service', 'webServer')
  a.status = 'running'
  ctx.emit('agent/status', { agent: a, status: 'running' })
  await until(file, r => statusOf(r, 'sess-a') === 'running', 'running was republished')
  assert.equal(ctx.lookups, first, 'no lookup per republish: the registry is kept')
  // the registry replaced at runtime (a host that restarts its agents service): cordis says so, and the
  // next record lists the new registry's sessions
  ctx.agents = registryOf([agent('sess-b', 'running')])
  ctx.emit('internal/service', 'agents')
  ctx.emit('agent/created', { agent: { id: 'sess-b' } })
  const r = await until(file, r => statusOf(r, 'sess-b') === 'running', 'the new registry is read')
  assert.deepEqual(r.sessions.map(s => s.id), ['sess-b'])
  assert.equal(ctx.lookups, first + 1, 'looked up once more')
})

test('stop withdraws the record and unhooks the listeners', async t => {
  const a = agent('sess-a', 'running')
  const { file, ctx, stop, writes } = setup(t, [a])
  await until(file, r => r.sessions.length === 1, 'the first record')
  stop()
  assert.ok(!existsSync(file), 'withdrawn')
  const n = writes.n
  a.status = 'idle'
  ctx.emit('agent/status', { agent: a, status: 'idle' })
  await sleep(DEBOUNCE_MS * 6)
  assert.equal(writes.n, n)
  assert.ok(!existsSync(file))
  // lib/observe.js keeps its own session/event and agent/disposed listeners; presence's are gone (the
  // registry memo's internal/service one too)
  assert.equal(ctx.bus.listenerCount('agent/status') + ctx.bus.listenerCount('agent/created') + ctx.bus.listenerCount('internal/service'), 0)
  assert.equal(ctx.bus.listenerCount('session/event'), 1)
})

/** The stop signal as rc.8 delivers it: the host's own SIGTERM handler, and lib/mailbox.js's, prepended. */
function signalled(t, ctx, home) {
  const proc = new EventEmitter()
  proc.on('SIGTERM', () => {})
  const stopHandBack = startHandBack(ctx, core, { startedAt: 1, dshHome: () => home, proc })
  t.after(stopHandBack)
  return () => proc.emit('SIGTERM')
}

test('at the stop signal the record says stopping (no web server, no mailbox) and keeps listing what it held', async t => {
  const agents = [agent('sess-a', 'running')]
  const { file, home, ctx } = setup(t, agents, { baseUrl: () => 'http://127.0.0.1:9', mailbox: true })
  const first = await until(file, r => r.sessions.length === 1, 'the first record')
  assert.deepEqual([first.stopping, first.baseUrl, first.mailbox], [false, 'http://127.0.0.1:9', true])
  signalled(t, ctx, home)()
  const r = await until(file, r => r.stopping === true, 'the signal republished (refresh: an hour, no event)')
  assert.deepEqual([r.baseUrl, r.mailbox, r.sessions.map(s => s.id)], [null, false, ['sess-a']])
  // the stop disposes sess-a: still listed (the process holds it until it exits)
  agents.splice(0, 1)
  ctx.emit('agent/disposed', { agent: { id: 'sess-a', session: { id: 'sess-a' } } })
  await sleep(DEBOUNCE_MS * 6)
  assert.deepEqual(record(file).sessions.map(s => s.id), ['sess-a'])
  assert.equal(record(file).stopping, true)
})

test('a dispose after the signal writes the stopping record once more, with every session it held, instead of withdrawing; the exit withdraws it', async t => {
  const agents = [agent('sess-a', 'running'), agent('sess-b')]
  const exitBefore = process.listenerCount('exit')
  const { file, home, ctx, stop, writes } = setup(t, agents)
  await until(file, r => r.sessions.length === 2, 'the first record')
  signalled(t, ctx, home)()
  await until(file, r => r.stopping === true, 'the record at the signal')
  await writes.last
  // unannounced: sess-a disposed, sess-c live (so only the dispose's write can list sess-c)
  agents.splice(0, 1, agent('sess-c'))
  const n = writes.n
  stop()
  const last = await until(file, r => r.sessions.length === 3, 'the dispose wrote the stopping record again')
  assert.equal(writes.n, n + 1)
  assert.deepEqual([last.stopping, last.baseUrl, last.mailbox], [true, null, false])
  assert.deepEqual(last.sessions.map(s => s.id).sort(), ['sess-a', 'sess-b', 'sess-c'])
  assert.equal(process.listenerCount('exit'), exitBefore + 1, 'the exit still withdraws it')
  assert.equal(ctx.bus.listenerCount('agent/status'), 0, 'the listeners are gone')
})

test('a dispose without a signal (the plugin unmounted, the host goes on) withdraws at once', async t => {
  const exitBefore = process.listenerCount('exit')
  const { file, home, ctx, stop } = setup(t, [agent('sess-c')])
  signalled(t, ctx, home)
  await until(file, r => r.sessions.length === 1, 'the record')
  stop()
  assert.ok(!existsSync(file), 'withdrawn')
  assert.equal(process.listenerCount('exit'), exitBefore)
})

test('the plugin observes session/event through one host listener: the fold, presence, the mailbox and the hand-back share it; a throwing observer keeps none from the event; the last stop removes it', async t => {
  // rc.8 calls every session/event listener per appended event through cordis' tracing proxy and a promise of
  // its own (packages/core/session/src/index.ts invokeContainedSessionObservers): one listener, not four
  const a = agent('sess-a', 'running')
  const { ctx, file, stop } = setup(t, [a])
  const home = mkdtempSync(join(tmpdir(), 'presence-mb-'))
  t.after(() => rmSync(home, { recursive: true, force: true }))
  const proc = new EventEmitter()
  proc.on('SIGTERM', () => {})
  const stopHandBack = startHandBack(ctx, core, { startedAt: 1, dshHome: () => home, proc })
  const stopMailbox = startMailbox(ctx, core, { startedAt: 1, dshHome: () => home })
  assert.equal(ctx.bus.listenerCount('session/event'), 1, 'one listener for the fold, presence, the mailbox and the hand-back')
  // an observer that throws (the host's event malformed for it) does not keep the others from the event
  const hostile = { get type() { throw new Error('hostile getter') } }
  ctx.emit('session/event', a.session, hostile)
  ctx.emit('session/event', a.session, { type: 'turn/start', seq: 2 })
  ctx.emit('session/event', a.session, { type: 'approval/asked', seq: 3, data: { id: 'ask-1' } })
  await until(file, r => statusOf(r, 'sess-a') === 'awaiting-user', 'awaiting-user folded and republished through the shared listener')
  stopMailbox()
  stopHandBack()
  stop()
  assert.equal(ctx.bus.listenerCount('session/event'), 1, 'the fold still follows the sessions')
})

test('onSessionEvent: observers in the order they came, one throwing keeps the next from nothing, an observer unsubscribed twice removes only itself', () => {
  const ctx = fakeCtx([])
  const seen = []
  const offA = onSessionEvent(ctx, () => { seen.push('a'); throw new Error('a throws') })
  const offB = onSessionEvent(ctx, (_s, e) => seen.push(`b${e.seq}`))
  ctx.emit('session/event', { id: 's' }, { type: 'turn/start', seq: 1 })
  assert.deepEqual(seen, ['a', 'b1'])
  offA(); offA()
  ctx.emit('session/event', { id: 's' }, { type: 'turn/end', seq: 2 })
  assert.deepEqual(seen, ['a', 'b1', 'b2'])
  assert.equal(ctx.bus.listenerCount('session/event'), 1)
  offB()
  assert.equal(ctx.bus.listenerCount('session/event'), 0, 'the last one gone: the host listener too')
  const offC = onSessionEvent(ctx, (_s, e) => seen.push(`c${e.seq}`))
  ctx.emit('session/event', { id: 's' }, { type: 'turn/start', seq: 3 })
  assert.deepEqual(seen, ['a', 'b1', 'b2', 'c3'], 'a new observer after that hooks it again')
  offC()
  assert.equal(onSessionEvent({}, () => {}), null, 'a context without on: nothing observed')
})
