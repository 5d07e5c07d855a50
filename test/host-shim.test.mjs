// What the shim reads from the host on a send's critical path (lib/host.js): only the target's agent, no
// service lookup while the services stay as they are (serviceMemo), and the credentials records API looked up once per TTL when the host has none. The send itself in the real host: test/real-host*.test.mjs; the
// time: bench/send.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { baseUrlOf, liveAgents, secretReader, serviceMemo } from '../lib/host.js'

/** A host-like object that counts the reads of its properties. */
function counted(obj, counts, name) {
  return new Proxy(obj, {
    get(target, prop, receiver) {
      const key = `${name}.${String(prop)}`
      counts[key] = (counts[key] ?? 0) + 1
      return Reflect.get(target, prop, receiver)
    },
  })
}

function agent(id, status, counts, events = []) {
  return counted({ id, status, inbox: { nextTurn: [], nextStep: [] }, session: counted({ id, header: { id, cwd: '/w' }, events }, counts, `session ${id}`) }, counts, `agent ${id}`)
}

test('a send reads its target alone: registry.get, never list(), and no other agent is touched', () => {
  const counts = {}
  const agents = { a: agent('a', 'idle', counts), b: agent('b', 'running', counts), c: agent('c', 'idle', counts) }
  const registry = counted({ get: id => agents[id], list: () => Object.values(agents) }, counts, 'registry')
  const ctx = counted({ agents: registry }, counts, 'ctx')
  const live = liveAgents(ctx, { files: false, only: 'b' })
  assert.deepEqual(live.map(l => l.id), ['b'])
  assert.equal(counts['ctx.agents'], 1, 'one service lookup')
  assert.equal(counts['registry.list'], undefined)
  assert.equal(Object.keys(counts).some(k => k.startsWith('agent a') || k.startsWith('agent c')), false)
  // not live here: nothing, and still no list()
  assert.deepEqual(liveAgents(ctx, { files: false, only: 'zzz' }), [])
  assert.equal(counts['registry.list'], undefined)
  // a registry whose get() answers another id (not rc.8's map) does not make that agent the target
  const odd = { agents: { get: () => agents.a, list: () => Object.values(agents) } }
  assert.deepEqual(liveAgents(odd, { files: false, only: 'b' }), [])
  // a registry without get(): the list, filtered to the id
  const listOnly = { agents: { list: () => Object.values(agents) } }
  assert.deepEqual(liveAgents(listOnly, { files: false, only: 'c' }).map(l => l.id), ['c'])
  // without `only` (list, presence): every agent
  assert.deepEqual(liveAgents(ctx, { files: false }).map(l => l.id), ['a', 'b', 'c'])
})

test('a send\'s registry lookup reads the service behind cordis\' traceable proxy (cordis 4.0.1 src/utils.ts symbols.original), never a method through it', () => {
  const counts = {}
  const agents = { a: agent('a', 'idle', counts), b: agent('b', 'running', counts) }
  const raw = counted({ get(id) { return this === raw ? agents[id] : undefined }, list: () => Object.values(agents) }, counts, 'raw')
  // cordis' proxy: the original behind Symbol.for('cordis.original'); every other read counted (each builds a shadow context there)
  const traced = new Proxy({}, {
    get(_t, prop) {
      if (prop === Symbol.for('cordis.original')) return raw
      counts[`traced.${String(prop)}`] = (counts[`traced.${String(prop)}`] ?? 0) + 1
      return Reflect.get(raw, prop)
    },
  })
  assert.deepEqual(liveAgents({ agents: traced }, { files: false, only: 'b' }).map(l => [l.id, l.status]), [['b', 'running']])
  assert.deepEqual(Object.keys(counts).filter(k => k.startsWith('traced.')), [], 'nothing read through the proxy')
  assert.equal(counts['raw.get'], 1, 'the registry\'s own get, called on the registry')
  // a proxy without the key (another cordis): through the proxy, as before
  const plain = new Proxy({}, { get: (_t, prop) => Reflect.get({ get: id => agents[id] }, prop) })
  assert.deepEqual(liveAgents({ agents: plain }, { files: false, only: 'a' }).map(l => l.id), ['a'])
})

test('secretReader: a host without a records API is looked up once per TTL; one with records is read every time', async () => {
  let now = 1_000
  const counts = {}
  const rc8 = counted({ credentials: undefined }, counts, 'ctx')
  const read = secretReader(rc8, { ttlMs: 30_000, now: () => now })
  assert.equal(read(), null)
  assert.equal(read(), null)
  assert.equal(counts['ctx.credentials'], 1, 'remembered: no second lookup within the TTL')
  now += 30_001
  assert.equal(read(), null)
  assert.equal(counts['ctx.credentials'], 2, 'looked up again after the TTL')

  let records = 0
  const v2 = { credentials: { readRecord: async key => { records++; assert.equal(key, 'client-connection/browser-session'); return { kind: 'grant', payload: { version: 1, secret: 'c2VjcmV0' } } } } }
  const readV2 = secretReader(v2, { now: () => now })
  assert.equal(await readV2(), 'c2VjcmV0')
  assert.equal(await readV2(), 'c2VjcmV0')
  assert.equal(records, 2, 'a secret is never cached: the host may rotate it')
  const broken = secretReader({ credentials: { readRecord: async () => { throw new Error('locked') } } })
  assert.equal(await broken(), null)
})

test('serviceMemo: a service is looked up once and again only after cordis reports that service changed', () => {
  const counts = {}
  const listeners = []
  let web = { port: 4100, host: '127.0.0.1' }
  let registry = { get: () => undefined }
  const ctx = counted({
    get webServer() { return web },
    get agents() { return registry },
    on: (name, fn) => { assert.equal(name, 'internal/service'); listeners.push(fn); return () => {} },
  }, counts, 'ctx')
  const cfg = { port: 0, host: '' }
  const baseUrl = serviceMemo(ctx, 'webServer', () => baseUrlOf(ctx, cfg))
  const agents = serviceMemo(ctx, 'agents', () => ctx.agents)
  assert.equal(baseUrl(), 'http://127.0.0.1:4100')
  assert.equal(baseUrl(), 'http://127.0.0.1:4100')
  assert.equal(counts['ctx.webServer'], 1, 'kept: one lookup')
  assert.equal(liveAgents(ctx, { files: false, only: 'x', registryOf: agents }).length, 0)
  liveAgents(ctx, { files: false, only: 'x', registryOf: agents })
  assert.equal(counts['ctx.agents'], 1, 'the registry is kept too')
  // another service changed: both kept
  for (const fn of listeners) fn('credentials')
  assert.equal(baseUrl(), 'http://127.0.0.1:4100')
  assert.equal(counts['ctx.webServer'], 1)
  // the web server was replaced (a restart on another port): looked up again
  web = { port: 4200, host: '0.0.0.0' }
  for (const fn of listeners) fn('webServer')
  assert.equal(baseUrl(), 'http://127.0.0.1:4200')
  assert.equal(counts['ctx.webServer'], 2)
  assert.equal(counts['ctx.agents'], 1)
  // removed: nothing to keep, so every call looks again until one is there
  web = undefined
  for (const fn of listeners) fn('webServer')
  assert.equal(baseUrl(), null)
  assert.equal(baseUrl(), null)
  assert.equal(counts['ctx.webServer'], 4)
  web = { port: 4300, host: '127.0.0.1' }
  assert.equal(baseUrl(), 'http://127.0.0.1:4300')
  assert.equal(baseUrl(), 'http://127.0.0.1:4300')
  assert.equal(counts['ctx.webServer'], 5)
  registry = { get: id => (id === 'x' ? { id: 'x', status: 'idle' } : undefined) }
  for (const fn of listeners) fn('agents')
  assert.deepEqual(liveAgents(ctx, { files: false, only: 'x', registryOf: agents }).map(a => a.id), ['x'])
  // a context without `on` (a test double) is read every time: nothing can tell it changed
  const plain = counted({ webServer: { port: 1, host: '127.0.0.1' } }, counts, 'plain')
  const once = serviceMemo(plain, 'webServer', () => baseUrlOf(plain, cfg))
  once(); once()
  assert.equal(counts['plain.webServer'], 2)
})
