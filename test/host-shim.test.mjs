// What the shim reads from the host on a send's critical path (lib/host.js): only the target's agent, one
// service lookup per call, and the credentials records API looked up once per TTL when the host has none. The send itself in the real host: test/real-host*.test.mjs; the
// time: bench/send.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { liveAgents, secretReader } from '../lib/host.js'

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
