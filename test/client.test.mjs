// The web client half (client/, built by scripts/build-client.mjs into lib/client.js) outside a browser: the bundle registers one factory the way rc.8's
// module system expects (packages/client/modules/src/index.ts `injectBootManifest`: `window.__ModuleLoader__
// .load({id, factory})`), its apply uses only guarded extension points, and its pure parts tell our mail
// from a human's on both host generations. The browser suite (test/real-host-browser.test.mjs) runs it
// against the real rc.8 `dsh web`.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import vm from 'node:vm'
import { REPO_ROOT } from './real-host/harness.mjs'
import { startClientRoutes } from '../lib/client-host.js'
import { buildClient } from '../scripts/build-client.mjs'

/** The handler startClientRoutes mounts on the host's Connection service (rpc.handle(channel, handler, options)). */
function mounted(core) {
  const seen = []
  const ctx = { get: name => name === 'connection' ? { rpc: { handle: (channel, handler, options) => { seen.push({ channel, handler, options }); return () => {} } } } : undefined }
  startClientRoutes(ctx, { mailView: async () => '{}', heldRecover: async () => 0, ...core })
  return seen
}
const routeHandler = (core, { home } = {}) => {
  if (home) process.env.DSH_HOME = home()
  return mounted(core)[0].handler
}

// the bundle as the source builds it now (what `npm run build:client` writes to lib/client.js)
const SOURCE = await buildClient()
const PKG = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'))

const React = {
  createElement: (type, props, ...children) => ({ type, props: props ?? {}, children }),
  useState: v => [v, () => {}],
  useEffect: () => {},
  useCallback: f => f,
}

/** Run the bundle as the page would; returns the registrations and the factory's exports. */
function load({ withLoader = true, fetch } = {}) {
  const registered = []
  const window = withLoader ? { __ModuleLoader__: { load: r => registered.push(r) } } : {}
  vm.runInNewContext(SOURCE, { window, console, setTimeout, clearTimeout, Promise, JSON, Map, Set, Symbol, Object, Array, String, Math, Date, ...(fetch ? { fetch } : {}) })
  if (!withLoader) return { registered }
  const required = []
  const exports = registered[0].factory(spec => {
    required.push(spec)
    if (spec === 'react') return React
    throw new Error(`not a platform module: ${spec}`)
  })
  return { registered, exports, required }
}

test('the bundle registers one factory under the package name, and requires only shell platform modules', () => {
  const { registered, exports, required } = load()
  assert.equal(registered.length, 1)
  assert.equal(registered[0].id, PKG.name, 'the graph row id is the entry name (the bundle patch row)')
  assert.deepEqual(required, ['react'])
  assert.equal(typeof exports.apply, 'function')
  assert.deepEqual([...exports.inject], ['slots', 'sessions', 'locale', 'inputTriggers'])
  assert.equal(PKG.exports['./client'], './lib/client.js')
  assert.equal(PKG.dsh.client.platform, 'web')
  assert.ok(PKG.files.includes('lib/*.js'), 'the bundle ships with the package (a declared, missing bundle fails the host graph)')
})

test('a page without the module system (an older host, another shell) gets nothing and no error', () => {
  assert.deepEqual(load({ withLoader: false }).registered, [])
})

test('agent mail is told by its request id on rc.8 and 0.1.2+ alike; human input and injected context never', () => {
  const { isAgentMail } = load().exports.internals
  // rc.8 (V0 log): the durable source.rpcId is the envelope rpcId we minted (shared/host/session-contract.md)
  assert.equal(isAgentMail({ kind: 'user', rpcId: 'dsh-session-mail:01234567-89ab-cdef-0123-456789abcdef' }), true)
  // 0.1.2+ (V4): the host copies request.requestId into source.rpcId, with clientTimeZone beside it (seed 003)
  assert.equal(isAgentMail({ kind: 'user', rpcId: 'dsh-session-mail:01234567-89ab-cdef-0123-456789abcdef', clientTimeZone: 'UTC' }), true)
  assert.equal(isAgentMail({ kind: 'user', rpcId: '3f1c2a9e-0000-4000-8000-000000000000' }), false, 'a browser-typed message')
  assert.equal(isAgentMail({ kind: 'user' }), false)
  assert.equal(isAgentMail({ kind: 'plugin', plugin: 'x', rpcId: 'dsh-session-mail:x' }), false, 'not a user message')
  assert.equal(isAgentMail(null), false)
  assert.equal(isAgentMail({ kind: 'user', rpcId: 'xdsh-session-mail:1' }), false)
})

test('the sender named by either frame is read for display; a typed body names none', () => {
  const { senderFromText, sessionMention, en, zh } = load().exports.internals
  assert.equal(senderFromText('From session-aaaa-1 ：\nhello'), 'session-aaaa-1')
  assert.equal(senderFromText('Cross-session message from another session of this harness.\nfrom-session: session-bbb ("B")\n'), 'session-bbb')
  assert.equal(senderFromText('please check session-ccc'), null)
  const { bodyOf } = load().exports.internals
  assert.equal(bodyOf('From session-aaaa-1 ：\nhello\nworld'), 'hello\nworld')
  assert.equal(bodyOf('Cross-session message from another session of this harness.\nfrom-session: s\n--- message begins ---\nhi\n--- message ends ---'), 'hi')
  assert.equal(bodyOf('typed by a human'), 'typed by a human')
  assert.equal(sessionMention('session-x', 'Planner'), '@Planner (session session-x)')
  assert.equal(sessionMention('session-x', 'session-x'), '@session session-x')
  assert.deepEqual(Object.keys(zh).sort(), Object.keys(en).sort(), 'en and zh have the same keys')
})

test('every fate a mail row can carry has its label in both locales (binding FateState, crates/core/src/fate.rs)', async () => {
  const { createRequire } = await import('node:module')
  const core = createRequire(import.meta.url)('../binding.cjs')
  const states = Object.values(core.FateState)
  assert.ok(states.includes('expired') && states.includes('lost'), states.join())
  // the dictionaries of the bundle the source builds to (esbuild prints its own quotes: read them as values)
  const { en, zh } = load().exports.internals
  for (const state of states) {
    assert.ok(typeof en[`fate.${state}`] === 'string' && en[`fate.${state}`] !== '', `${state}: en label`)
    assert.ok(typeof zh[`fate.${state}`] === 'string' && zh[`fate.${state}`] !== '', `${state}: zh label`)
  }
})

test('apply shadows the user/steering renderers at priority -1, adds the mail tab and the @ source', () => {
  const { exports } = load()
  const regs = []
  const effects = []
  const sources = []
  const ctx = {
    effect: (fn, label) => { effects.push(label); fn() },
    locale: { register: () => () => {}, bind: () => k => k },
    slots: {
      inject: (name, f) => f(),
      register: (options, component) => { regs.push({ options, component }); return () => {} },
      entries: () => regs,
    },
    sessions: { list: { getSnapshot: () => ({ ids: ['s-a', 's-b', 's-c'], byId: { 's-a': { id: 's-a', displayTitle: 'A', running: true }, 's-b': { id: 's-b', displayTitle: 'B' }, 's-c': { id: 's-c', blank: true } } }), subscribe: () => () => {} }, open: () => {} },
    inputTriggers: { registerSource: s => { sources.push(s); return () => {} } },
  }
  exports.apply(ctx)
  const nodes = regs.filter(r => r.options.name === 'conversation.chat.node')
  assert.deepEqual(nodes.map(r => [r.options.key, r.options.priority, r.options.locale]), [['user', -1, 'conversation'], ['steering', -1, 'conversation']])
  const view = regs.find(r => r.options.name === 'conversation.view')
  assert.equal(view.options.id, 'dsh-session-mail')
  assert.deepEqual({ ...view.options.inject('s-b') }, { sessionId: 's-b' })
  assert.equal(sources.length, 1)
  assert.equal(sources[0].trigger, '@')
  // the home-wide page: its entry beside Settings at the sidebar foot, the page in the frame-wide overlay
  // (rc.8 ui-sidebar contract/slots.ts 'sidebar.footer.action'; ui-layout 'shell.overlay')
  const entry = regs.find(r => r.options.name === 'sidebar.footer.action')
  assert.equal(entry.options.id, 'dsh-session-mail')
  assert.equal(entry.options.label(), 'Agent mail')
  const overlay = regs.find(r => r.options.name === 'shell.overlay')
  assert.equal(overlay.options.id, 'dsh-session-mail-page')
  assert.ok(effects.includes('dsh-session-mail: held counts in the session list'))

  // a human message goes to the built-in renderer (the registration it shadows), with the same props
  const Builtin = () => null
  regs.push({ options: { name: 'conversation.chat.node', key: 'user' }, component: Builtin })
  const human = nodes[0].component({ node: { kind: 'user', data: { source: { kind: 'user', rpcId: 'r-1' }, content: [] } } })
  assert.equal(human.type, Builtin)
  const mail = nodes[0].component({ node: { kind: 'user', data: { source: { kind: 'user', rpcId: 'dsh-session-mail:1' }, content: [] } } })
  assert.notEqual(mail.type, Builtin)
  assert.equal(mail.type.name, 'AgentMailCard')
  return sources[0].candidates({ sessionId: 's-a' }, { query: '' }).then(c => {
    assert.deepEqual([...c.map(x => x.name)], ['@B'], 'not the caller, not a blank session')
    const pick = sources[0].onPick({ candidate: c[0] })
    assert.equal(pick.insert.ref, 's-b')
    assert.equal(pick.insert.appearance, 'session')
  })
})

test('the @ source offers the linked machines\' sessions (machines.sessions) after this home\'s, names their machine, and serializes the id with it', async () => {
  const asked = []
  const far = { machines: [
    { id: 'b'.repeat(64), name: 'home-b', rows: [
      { id: 's-far', title: 'Builder B', live: true, status: 'idle', subagent: false },
      { id: 's-sub', title: 'a subagent', live: true, subagent: true },
      { id: 7, title: 'not a row' },
    ], error: null },
    { id: 'c'.repeat(64), name: 'home-c', rows: [], error: 'no answer in time' },
  ] }
  const fetch = async (url, init) => {
    asked.push([url, JSON.parse(init.body).payload])
    return { ok: true, json: async () => ({ result: { ok: true, value: far } }) }
  }
  const { exports } = load({ fetch })
  const sources = []
  exports.apply({
    effect: (fn) => { fn() },
    locale: { register: () => () => {}, bind: () => k => k },
    sessions: { list: { getSnapshot: () => ({ ids: ['s-a', 's-b'], byId: { 's-a': { id: 's-a', displayTitle: 'A' }, 's-b': { id: 's-b', displayTitle: 'Builder here' } } }), subscribe: () => () => {} } },
    inputTriggers: { registerSource: s => { sources.push(s); return () => {} } },
  })
  const src = sources[0]
  const c = await src.candidates({ sessionId: 's-a' }, { query: 'build' })
  assert.deepEqual([...c.map(x => x.name)], ['@Builder here', '@Builder B'], 'this home first, then the machines\' (no subagent, no malformed row)')
  assert.match(c[1].description, /home-b/)
  assert.match(c[1].description, /s-far/)
  assert.notEqual(c[1].section, c[0].section, 'a section of their own')
  assert.deepEqual(asked.map(a => a[0]), ['/dsh-session-mail/machines.sessions'])
  await src.candidates({ sessionId: 's-a' }, { query: 'home-b' })
  assert.equal(asked.length, 1, 'asked once for a few seconds of typing')
  const byMachine = await src.candidates({ sessionId: 's-a' }, { query: 'home-b' })
  assert.deepEqual([...byMachine.map(x => x.name)], ['@Builder B'], 'a machine\'s name finds its sessions')
  const pick = src.onPick({ candidate: c[1] })
  assert.equal(pick.insert.ref, 's-far')
  assert.equal(pick.insert.label, '@Builder B · home-b')
  assert.equal(pick.insert.clipboardText, '@Builder B (session s-far, machine home-b)')
  assert.equal(await src.codec.serialize('s-far'), '@Builder B (session s-far, machine home-b)', 'the id the send tools take, and where it is')
  assert.equal(await src.codec.serialize('s-b'), '@Builder here (session s-b)')
  const { remoteSessionsOf } = exports.internals
  assert.deepEqual(remoteSessionsOf({ machines: [{ id: 1, name: 'x', rows: [{ id: 's' }] }, null] }).length, 0)
})

test('card / view / mail.list answers carry this home\'s name for each linked machine; machines.sessions checks its payload', async () => {
  const mid = 'a'.repeat(64)
  const core = {
    mailCard: async () => JSON.stringify({ requestId: 'r', sender: 's-far', machine: { id: mid, name: mid.slice(0, 12) } }),
    mailList: async () => JSON.stringify({ rows: [{ requestId: 'r', senderMachine: { id: mid, name: mid.slice(0, 12) }, targetMachine: { id: 'f'.repeat(64), name: 'ffffffffffff' } }], next: null }),
    machinesList: async () => JSON.stringify({ ok: true, links: [{ id: mid, name: 'laptop' }] }),
    machinesSessions: async (home, query, limit) => JSON.stringify({ machines: [], asked: [query, limit] }),
  }
  const handle = routeHandler(core, { home: () => '/h' })
  const card = await handle('card', { requestId: 'dsh-session-mail:01234567-89ab-cdef-0123-456789abcdef' })
  assert.deepEqual(card.value.machine, { id: mid, name: 'laptop' })
  const list = await handle('mail.list', {})
  assert.equal(list.value.rows[0].senderMachine.name, 'laptop')
  assert.equal(list.value.rows[0].targetMachine.name, 'ffffffffffff', 'a machine no longer linked keeps the id\'s start')
  assert.deepEqual((await handle('machines.sessions', { query: 'b' })).value.asked, ['b', 20])
  assert.equal((await handle('machines.sessions', { query: 5 })).error.code, 'bad-request')
  assert.equal((await handle('machines.sessions', { limit: 0 })).error.code, 'bad-request')
  const broken = routeHandler({ ...core, machinesList: async () => { throw new Error('links unreadable') } })
  assert.equal((await broken('card', { requestId: 'dsh-session-mail:01234567-89ab-cdef-0123-456789abcdef' })).value.machine.name, mid.slice(0, 12), 'no names: the card still answers')
})

test('apply survives a context without any of its extension points (it degrades to nothing)', () => {
  const { exports } = load()
  assert.doesNotThrow(() => exports.apply({}))
  assert.doesNotThrow(() => exports.apply({ effect: () => { throw new Error('x') }, slots: {} }))
})

test('the routes mount on the host\'s Connection channel, loopback-only; no Connection service (headless) mounts nothing', () => {
  const [m] = mounted({})
  assert.equal(m.channel, '/dsh-session-mail')
  assert.deepEqual(m.options, { authority: 'loopback' })
  assert.doesNotThrow(() => startClientRoutes({ get: () => undefined, on: () => () => {} }, { mailView: async () => '{}' })())
  assert.doesNotThrow(() => startClientRoutes({}, {})())
})

test('the routes refuse bad input readably and never throw', async () => {
  const calls = []
  const answer = k => async (...a) => { calls.push([k, ...a]); return '{"ok":true,"policy":{},"state":"approved","posted":true}' }
  const core = Object.fromEntries(['mailView', 'mailCard', 'policyApply', 'heldDecide'].map(k => [k, answer(k)]))
  const handle = routeHandler(core, { home: () => '/h' })
  assert.equal((await handle('view', {})).error.code, 'bad-request')
  assert.equal((await handle('view', { sessionId: '../x' })).error.code, 'bad-request')
  assert.equal((await handle('card', { requestId: 'nope' })).error.code, 'bad-request')
  assert.equal((await handle('policy.set', { sessionId: 's-b', inbound: 'maybe' })).error.code, 'bad-request')
  assert.equal((await handle('held.decide', { sessionId: 's-b', requestId: 'dsh-session-mail:01234567-89ab-cdef-0123-456789abcdef', decision: 'sure' })).error.code, 'bad-request')
  assert.equal((await handle('nothing', {})).error.code, 'not-found')
  assert.equal(calls.length, 0, 'nothing reached the core')
  assert.equal((await handle('policy.set', { stopAll: true })).ok, true)
  assert.deepEqual(calls.at(-1), ['policyApply', '/h', '{"stopAll":true}'])
  const boom = routeHandler({ mailView: async () => { throw new Error('disk') } })
  assert.deepEqual(await boom('view', { sessionId: 's-b' }), { ok: false, error: { code: 'internal', message: 'disk' } })
})

test('the page reads the routes\' rows as typed values: unknown fates, wrong types and bare machine ids are normalised, never believed', () => {
  const { mailRow, pageOf, threadOf, countsOf, rulesOf, machinesOf } = load().exports.internals
  const names = { ['a'.repeat(64)]: 'laptop' }
  const r = mailRow({ requestId: 'dsh-session-mail:1', time: 5, sender: 's-a', senderTitle: 'A', senderMachine: 'a'.repeat(64), target: 's-b', fate: 'landed', text: 'hi', hop: 2 }, names)
  assert.deepEqual({ ...r.senderMachine }, { id: 'a'.repeat(64), name: 'laptop' }, 'a bare machine id is named from the links list')
  assert.equal(r.targetMachine, null, 'absent machine: this home')
  assert.equal(r.fate, 'landed')
  assert.equal(mailRow({ requestId: 'x', fate: 'delivered!' }).fate, 'unknown', 'a fate outside the enum reads unknown')
  assert.equal(mailRow({ requestId: 'x', hop: '2', time: 'now' }).hop, null)
  assert.equal(mailRow({ requestId: 7 }), null)
  const page = pageOf({ rows: [{ requestId: 'b', time: 2 }, null, { requestId: 'a', time: 1 }], next: 't1.4' })
  assert.deepEqual([...page.rows.map(x => x.requestId)], ['b', 'a'])
  assert.equal(page.next, 't1.4')
  assert.equal(page.building, null, 'no building state: the index is complete')
  // a rebuild under way (crates/core/src/mailindex IndexStatus.building): the page shows how far, and the rows so far
  const partial = pageOf({ rows: [{ requestId: 'n', time: 9 }], next: null, index: { rows: 200, rebuilt: 'missing', error: null, building: { done: 200, total: 100000 } } })
  assert.deepEqual({ ...partial.building }, { done: 200, total: 100000 })
  assert.equal(partial.rows.length, 1)
  assert.deepEqual({ ...pageOf({ rows: [], index: { building: { done: 'x', total: -1 } } }).building }, { done: 0, total: 0 }, 'wrong types read as nothing done yet, never thrown')
  const th = threadOf({ requestId: 'q', found: true, rows: [{ requestId: 'answer', time: 20 }, { requestId: 'q', time: 10 }], truncated: false })
  assert.deepEqual([...th.rows.map(x => x.requestId)], ['q', 'answer'], 'a thread reads oldest first')
  const c = countsOf({ sessions: [{ sessionId: 's-b', held: 2, nextExpiresAt: 900 }, { sessionId: 's-c', held: 1, nextExpiresAt: 500 }, { sessionId: 's-d', held: -3 }, { held: 4 }], total: 3 })
  assert.deepEqual({ ...c.bySession }, { 's-b': 2, 's-c': 1 })
  assert.equal(c.total, 3)
  assert.equal(c.nextExpiresAt, 500)
  const rules = rulesOf({ order: ['stop-all', 'sender', 'machine', 'session', 'default'], stopAll: false, senders: { 's-a': 'accept', 's-x': 'maybe' }, machines: {}, heldTtlMs: 86400000 })
  assert.deepEqual({ ...rules.senders }, { 's-a': 'accept' }, 'an inbound outside accept|hold|refuse is dropped')
  assert.deepEqual([...rulesOf({}).order], ['stop-all', 'sender', 'machine', 'session', 'default'], 'the one order when a route leaves it out')
  assert.deepEqual([...machinesOf({ machines: [{ id: 'm1', name: 'desk', inbound: 'hold' }, { name: 'no id' }] }).map(m => m.name)], ['desk'])
  // the link crate's `links` answer (machinesList): {links: [{id, name, relay, addrs, linkedAt, online, lastSeen, rttMs, error}]}
  const [laptop] = machinesOf({ ok: true, links: [{ id: 'b'.repeat(64), name: 'laptop', relay: 'none', addrs: [], linkedAt: 5, online: true, rttMs: 3, error: null }] })
  assert.deepEqual({ name: laptop.name, online: laptop.online, rttMs: laptop.rttMs, relay: laptop.relay }, { name: 'laptop', online: true, rttMs: 3, relay: 'none' })
})

test('the page asks mail.list with the index\'s filter shape, and a held card counts down to expiry', () => {
  const { listPayload, timeLeft } = load().exports.internals
  const none = { session: '', fate: '', held: false, since: '', query: '' }
  assert.deepEqual(JSON.parse(JSON.stringify(listPayload(none, 1000, null, 50))), { filter: {}, limit: 50 })
  const all = { session: 's-b', fate: 'held', held: true, since: '1h', query: '  migration ' }
  assert.deepEqual(JSON.parse(JSON.stringify(listPayload(all, 7_200_000, 't5.1', 50))),
    { filter: { session: 's-b', fate: ['held'], held: true, since: 3_600_000 }, limit: 50, query: 'migration', before: 't5.1' })
  assert.deepEqual({ ...timeLeft(1000 + 23 * 3_600_000 + 5 * 60_000, 1000) }, { expired: false, h: 23, m: 5 })
  assert.deepEqual({ ...timeLeft(1000 + 30_000, 1000) }, { expired: false, h: 0, m: 1 }, 'less than a minute left shows a minute, not zero')
  assert.equal(timeLeft(1000, 1000).expired, true)
  assert.equal(timeLeft(null, 1000), null)
})

test('a session row is told by its own node prop, else by a title exactly one session has; never guessed', () => {
  const { sessionIdOfRow } = load().exports.internals
  const snap = { ids: ['s-a', 's-b', 's-c'], byId: { 's-a': { id: 's-a', displayTitle: 'Planner' }, 's-b': { id: 's-b', displayTitle: 'Twin' }, 's-c': { id: 's-c', displayTitle: 'Twin' } } }
  const row = { '__reactFiber$abc': { memoizedProps: { className: 'x' }, return: { memoizedProps: { node: { id: 's-c' } }, return: null } } }
  assert.equal(sessionIdOfRow(row, snap, 'Twin'), 's-c', 'the fiber\'s node prop names the row')
  assert.equal(sessionIdOfRow({}, snap, 'Planner'), 's-a', 'a unique title')
  assert.equal(sessionIdOfRow({}, snap, 'Twin'), null, 'two sessions share the title: no badge rather than a wrong one')
  assert.equal(sessionIdOfRow({ '__reactFiber$x': { memoizedProps: { node: { id: 's-gone' } } } }, snap, null), null)
})

test('held counts are asked when shown, when a session\'s turn ends, and never with nobody subscribed', async () => {
  const asked = []
  const fetch = async (url, init) => {
    asked.push(url)
    const total = asked.length
    return { ok: true, json: async () => ({ type: 'server-response', result: { ok: true, value: { sessions: [{ sessionId: 's-c', held: total, nextExpiresAt: null }], total, truncated: false } } }) }
  }
  const { createHeldCounts } = load({ fetch }).exports.internals
  let rows = { 's-a': { id: 's-a', running: true }, 's-c': { id: 's-c' } }
  const subs = new Set()
  const ctx = { sessions: { list: { getSnapshot: () => ({ ids: Object.keys(rows), byId: rows }), subscribe: fn => { subs.add(fn); return () => subs.delete(fn) } } } }
  const counts = createHeldCounts(ctx)
  const tick = () => new Promise(r => setTimeout(r, 20))
  await tick()
  assert.equal(asked.length, 0, 'nobody shows the counts: nothing is asked')
  const off = counts.subscribe(() => {})
  await tick()
  assert.deepEqual(asked, ['/dsh-session-mail/held.counts'], 'asked once when first shown')
  assert.equal(counts.get().bySession['s-c'], 1)
  rows = { 's-a': { id: 's-a', running: true }, 's-c': { id: 's-c', running: true } }
  subs.forEach(fn => fn())
  await tick()
  assert.equal(asked.length, 1, 'a turn starting changes nothing')
  rows = { 's-a': { id: 's-a' }, 's-c': { id: 's-c', running: true } }
  subs.forEach(fn => fn())
  await tick()
  assert.equal(asked.length, 2, 'A\'s turn ended (it may have sent): asked again')
  assert.equal(counts.get().total, 2)
  off()
  assert.equal(subs.size, 0, 'the last subscriber gone: the session list is left alone')
  rows = { 's-a': { id: 's-a' }, 's-c': { id: 's-c' } }
  await tick()
  assert.equal(asked.length, 2)
})

test('the page store opens and closes the page and names the thread shown', () => {
  const { createPageStore } = load().exports.internals
  const p = createPageStore()
  let n = 0
  const off = p.subscribe(() => { n++ })
  assert.equal(p.isOpen(), false)
  p.open('dsh-session-mail:1')
  assert.equal(p.isOpen(), true)
  assert.equal(p.thread(), 'dsh-session-mail:1')
  p.open()
  assert.equal(p.thread(), 'dsh-session-mail:1', 'opening again keeps the thread')
  p.close()
  off()
  p.open(null)
  assert.equal(n, 3)
  assert.equal(p.thread(), null)
})

// Issue 32's routes against the real core (crates/core/src/human.rs): the payloads and results are its DTOs.
test('rules.set / rules.list / policy.set heldTtlMs / held.counts / held.decideMany / human.sendMany answer with the core\'s DTOs, bad shapes never reach it', async () => {
  const { loadCore } = await import('../lib/native.js')
  const { mkdtempSync, rmSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { core } = loadCore()
  const dir = mkdtempSync(join(tmpdir(), 'dsm-routes-'))
  try {
    const handle = routeHandler(core, { home: () => dir })
    const A = 'session-aaaaaaaa-0000-0000-0000-000000000000'
    const M = 'ab'.repeat(32)
    let r = await handle('rules.set', { sender: A, inbound: 'accept' })
    assert.equal(r.ok, true, JSON.stringify(r))
    assert.deepEqual(r.value.order, ['stop-all', 'sender', 'machine', 'session', 'default'])
    assert.deepEqual(r.value.senders, { [A]: 'accept' })
    assert.equal(r.value.heldTtlMs, 24 * 60 * 60 * 1000)
    r = await handle('rules.set', { machine: M, inbound: 'refuse' })
    assert.deepEqual(r.value.machines, { [M]: 'refuse' })
    r = await handle('rules.set', { sender: A, inbound: null })
    assert.deepEqual(r.value.senders, {}, 'null removes')
    assert.deepEqual((await handle('rules.list', {})).value.machines, { [M]: 'refuse' })
    for (const badRule of [{ inbound: 'hold' }, { sender: A, machine: M, inbound: 'hold' }, { sender: A, inbound: 'always' }, { machine: 'AB'.repeat(32), inbound: 'hold' }, { sender: '../x', inbound: 'hold' }]) {
      assert.equal((await handle('rules.set', badRule)).error.code, 'bad-request', JSON.stringify(badRule))
    }
    r = await handle('policy.set', { heldTtlMs: 2 * 60 * 60 * 1000 })
    assert.equal(r.value.heldTtlMs, 2 * 60 * 60 * 1000)
    assert.equal((await handle('policy.set', { heldTtlMs: 5 })).error.code, 'policy', 'under one second is refused by the core')
    assert.equal((await handle('rules.list', {})).value.heldTtlMs, 2 * 60 * 60 * 1000)
    assert.deepEqual((await handle('held.counts', {})).value, { sessions: [], total: 0, truncated: false })
    assert.deepEqual((await handle('held.decideMany', { filter: { all: true }, decision: 'reject' })).value, { items: [], truncated: false })
    for (const badMany of [{ filter: {}, decision: 'reject' }, { filter: { all: true, sender: A }, decision: 'reject' }, { filter: { sender: A }, decision: 'maybe' }, { filter: { sender: '../x' }, decision: 'reject' }, { decision: 'reject' }]) {
      assert.equal((await handle('held.decideMany', badMany)).error.code, 'bad-request', JSON.stringify(badMany))
    }
    // no session of that id on this home: refused for it, once although named twice, nothing sent
    r = await handle('human.sendMany', { sessionIds: [A, A], text: 'all of you: the API changed', mode: 'queue' })
    assert.equal(r.ok, true, JSON.stringify(r))
    assert.deepEqual(r.value.landings.map(l => [l.sessionId, l.state, l.code, l.requestId]), [[A, 'refused', 'not-found', null]])
    for (const badSend of [{ sessionIds: [], text: 'x', mode: 'queue' }, { sessionIds: [A], text: '  ', mode: 'queue' }, { sessionIds: [A], text: 'x', mode: 'later' }, { sessionIds: ['../x'], text: 'x', mode: 'queue' }]) {
      assert.equal((await handle('human.sendMany', badSend)).error.code, 'bad-request', JSON.stringify(badSend))
    }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

test('mail.list and mail.thread check every field before the core sees it, and pass a clean copy', async () => {
  const calls = []
  const core = {
    mailList: async (...a) => { calls.push(['mailList', ...a]); return '{"rows":[],"next":null,"index":{"rows":0,"rebuilt":null,"error":null}}' },
    mailThread: async (...a) => { calls.push(['mailThread', ...a]); return '{"found":false}' },
  }
  const handle = routeHandler(core, { home: () => '/h' })
  for (const bad of [
    { filter: [] }, { filter: { session: '../x' } }, { filter: { fate: ['sent'] } }, { filter: { held: 'yes' } },
    { filter: { since: -1 } }, { filter: { until: 1.5 } }, { query: 7 }, { query: 'x'.repeat(513) },
    { before: 'drop table' }, { limit: 0 }, { limit: 'all' },
  ]) assert.equal((await handle('mail.list', bad)).error.code, 'bad-request', JSON.stringify(bad))
  assert.equal((await handle('mail.thread', { requestId: 'nope' })).error.code, 'bad-request')
  assert.equal(calls.length, 0, 'nothing reached the core')
  const page = await handle('mail.list', { filter: { session: 's-b', fate: 'held', since: 5, extra: 1 }, query: 'migration', before: 't1.2', limit: 900, other: true })
  assert.deepEqual(page.value, { rows: [], next: null, index: { rows: 0, rebuilt: null, error: null } })
  assert.deepEqual(calls[0], ['mailList', '/h', JSON.stringify({ filter: { session: 's-b', fate: ['held'], since: 5 }, query: 'migration', before: 't1.2', limit: 200 })])
  await handle('mail.list', {})
  assert.deepEqual(calls[1], ['mailList', '/h', '{"filter":{}}'])
  const rid = 'dsh-session-mail:01234567-89ab-4def-8123-456789abcdef'
  assert.deepEqual(await handle('mail.thread', { requestId: rid }), { ok: true, value: { found: false } })
  assert.deepEqual(calls[2], ['mailThread', '/h', rid])
})

test('the page\'s routes over the real core: every message with its text, a word finds it, its thread in order', async () => {
  const { createRequire } = await import('node:module')
  const { mkdtempSync, mkdirSync, writeFileSync, rmSync } = await import('node:fs')
  const os = await import('node:os')
  const core = createRequire(import.meta.url)('../binding.cjs')
  const home = mkdtempSync(join(os.tmpdir(), 'dsh-mail-page-'))
  try {
    const sid = c => `session-0000000${c}-0000-4000-8000-00000000000${c}`
    const rid = n => `dsh-session-mail:00000000-0000-4000-8000-00000000000${n}`
    const T = Date.UTC(2026, 10, 1)
    // the ledger as the senders' cores write it, and each delivery landed in its target's rc.8 V0 log
    const lines = [[1, 'a', 'b', rid(1), 1], [2, 'b', 'a', rid(1), 2], [3, 'a', 'c', rid(3), 1]].map(([n, f, t, chain, hop]) =>
      JSON.stringify({ time: new Date(T + n * 1000).toISOString(), sender: sid(f), target: sid(t), tool: 'sessions_send', mode: 'queue', requestId: rid(n), outcome: 'accepted', bodyChars: 1, bodySha256: '0', chain, hop }))
    mkdirSync(join(home, 'dsh-session-mail'), { recursive: true, mode: 0o700 })
    writeFileSync(join(home, 'dsh-session-mail', 'ledger.jsonl'), lines.join('\n') + '\n', { mode: 0o600 })
    const bodies = { 1: 'what about the migration?', 2: 'the schema is migrated', 3: 'unrelated: deploy at noon' }
    const into = { a: [2], b: [1], c: [3] }
    for (const [s, ns] of Object.entries(into)) {
      let seq = 0
      const ev = (type, data, surface) => JSON.stringify({ type, seq: seq++, time: T + seq, data, ...(surface ? { surfaceOp: 'append' } : {}) })
      const rows = [JSON.stringify({ type: 'session', version: 0, id: sid(s), createdAt: T - 1000, cwd: '/w', delegationDepth: 0, agentPreset: 'standard' })]
      ns.forEach((n, i) => {
        const from = n === 2 ? 'b' : 'a'
        const msg = { content: [{ type: 'text', text: `From ${sid(from)} \uFF1A\n${bodies[n]}` }], source: { kind: 'user', rpcId: rid(n) }, role: 'user', id: `m-${n}` }
        rows.push(ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [msg] }), ev('turn/start', { turn: i + 1 }),
          ev('agent/inbox/spliced', { target: 'next-turn', start: 0, removedCount: 1, inserted: [] }), ev('step/start', { turn: i + 1, step: 1 }),
          ev('user/message', msg, true), ev('session/title', { title: `Planner ${s.toUpperCase()}`, messageSeqs: [seq - 1], source: { kind: 'fallback' } }))
      })
      mkdirSync(join(home, 'sessions', '--w--', sid(s)), { recursive: true })
      writeFileSync(join(home, 'sessions', '--w--', sid(s), 'session.jsonl'), rows.join('\n') + '\n')
    }
    const handle = routeHandler(core, { home: () => home })
    const started = (await handle('mail.list', { limit: 2 })).value
    assert.equal(started.index.rebuilt, 'missing', 'the first call starts building the index')
    assert.ok(started.index.building && started.index.building.done <= started.index.building.total, 'and answers at once with how far the rebuild is')
    // the page asks again while `building` stands (crates/core/src/mailindex feed: a thread of its own)
    let all = started
    for (let i = 0; i < 600 && all.index.building; i++) {
      await new Promise(resolve => setTimeout(resolve, 20))
      all = (await handle('mail.list', { limit: 2 })).value
    }
    assert.equal(all.index.building, null, 'the rebuild ends')
    assert.deepEqual(all.rows.map(r => [r.requestId, r.text, r.fate, r.senderTitle]), [[rid(3), bodies[3], 'landed', 'Planner A'], [rid(2), bodies[2], 'landed', 'Planner B']])
    const rest = (await handle('mail.list', { limit: 2, before: all.next })).value
    assert.deepEqual(rest.rows.map(r => r.requestId), [rid(1)])
    assert.equal(rest.next, null)
    const found = (await handle('mail.list', { query: 'migration' })).value
    assert.deepEqual(found.rows.map(r => r.requestId), [rid(1)], 'a word in its body')
    assert.deepEqual((await handle('mail.list', { filter: { session: sid('c') } })).value.rows.map(r => r.requestId), [rid(3)])
    const t = (await handle('mail.thread', { requestId: rid(2) })).value
    assert.equal(t.found, true)
    assert.equal(t.chain, rid(1))
    assert.deepEqual(t.rows.map(r => r.text), [bodies[1], bodies[2]], 'both sides, in order')
    assert.deepEqual(t.sessions.map(s => [s.id, s.title]), [[sid('a'), 'Planner A'], [sid('b'), 'Planner B']])
  } finally {
    rmSync(home, { recursive: true, force: true })
  }
})
