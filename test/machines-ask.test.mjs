// What the core asks this process's host when a linked machine's request arrives (src/lib.rs `here_of`,
// core `remote::Ask`), as the shim reads it (lib/machines.js `askOf`, module-private: read through `startMachines`): a send's facts are its target's and
// sender's live entries alone (a local send's), a read names its session, anything else asks for all.
//
//   node --test test/machines-ask.test.mjs
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { sendFactsOf, startMachines } from '../lib/machines.js'

/** The ask `here` receives when the core serves with `asked` (startMachines → askOf). */
async function askOf(asked) {
  let served = null
  const core = { machinesStart: async () => true, machinesStop: async () => {}, machinesServeWith: (_home, fn) => { served = fn } }
  let got
  const stop = startMachines(core, { here: async (ask) => { got = ask; return '{}' } })
  await served(asked)
  stop()
  return got
}

test('askOf: the core\'s JSON ask, an older addon\'s read id, and junk', async () => {
  assert.deepEqual(await askOf('{"send":"session-t","sender":"session-s"}'), { read: null, send: 'session-t', sender: 'session-s' })
  assert.deepEqual(await askOf('{"send":"session-t"}'), { read: null, send: 'session-t', sender: null })
  assert.deepEqual(await askOf('{"read":"session-r"}'), { read: 'session-r', send: null, sender: null })
  assert.deepEqual(await askOf('{}'), { read: null, send: null, sender: null })
  // a send is never a read too, whatever else the JSON holds
  assert.deepEqual(await askOf('{"send":"session-t","read":"session-r"}'), { read: null, send: 'session-t', sender: null })
  // fields that are not strings are left out: the whole facts are asked for
  assert.deepEqual(await askOf('{"send":7,"read":["x"],"sender":{}}'), { read: null, send: null, sender: null })
  // an older addon passed a read's session id, '' for any other request
  assert.deepEqual(await askOf('session-r'), { read: 'session-r', send: null, sender: null })
  assert.deepEqual(await askOf(''), { read: null, send: null, sender: null })
  for (const junk of ['null', '[]', '"x"', '3']) assert.deepEqual(await askOf(junk), { read: null, send: null, sender: null }, junk)
})

test('startMachines hands the shim\'s here the ask the core sent, parsed', async () => {
  let served = null
  const core = {
    machinesStart: async () => true,
    machinesStop: async () => {},
    machinesServeWith: (_home, fn) => { served = fn },
  }
  const asks = []
  const stop = startMachines(core, { here: async (ask) => { asks.push(ask); return '{}' } })
  assert.equal(typeof served, 'function')
  assert.equal(await served('{"send":"session-t","sender":"session-s"}'), '{}')
  await served('{"read":"session-r"}')
  assert.deepEqual(asks, [
    { read: null, send: 'session-t', sender: 'session-s' },
    { read: 'session-r', send: null, sender: null },
  ])
  stop()
})

test('a here that answers at once is handed back at once, not as a Promise (src/lib.rs HereFn: no second trip)', () => {
  let served = null
  const core = { machinesStart: async () => true, machinesStop: async () => {}, machinesServeWith: (_home, fn) => { served = fn } }
  const stop = startMachines(core, { here: (ask) => JSON.stringify({ facts: ask.send }) })
  assert.equal(served('{"send":"session-t"}'), '{"facts":"session-t"}')
  stop()
})

test('startMachines hands here the home the core serves (the one it registered), not the home the environment names now', async () => {
  const before = process.env.DSH_HOME
  let registered = null
  let served = null
  const core = { machinesStart: async () => true, machinesStop: async () => {}, machinesServeWith: (home, fn) => { registered = home; served = fn } }
  const homes = []
  try {
    process.env.DSH_HOME = '/nonexistent/served-home'
    const stop = startMachines(core, { here: (_ask, home) => { homes.push(home); return '{}' } })
    process.env.DSH_HOME = '/nonexistent/another-home'
    served('{"send":"session-t"}')
    stop()
  } finally {
    if (before === undefined) delete process.env.DSH_HOME
    else process.env.DSH_HOME = before
  }
  assert.equal(registered, '/nonexistent/served-home')
  assert.deepEqual(homes, ['/nonexistent/served-home'])
})

test('sendFactsOf: the request a send\'s facts make, its unchanging part made again only when a host field changes, the live entries read each time', () => {
  const made = []
  const facts = sendFactsOf((host) => {
    made.push(host)
    // a `live` the request carries is replaced by the entries of the arrival
    return { tool: 'sessions_send', args: {}, config: { maxSendChars: 10 }, host: { ...host, profile: null }, live: ['stale'], liveSeq: null }
  })
  const host = { dshHome: '/h', baseUrl: 'http://127.0.0.1:1', secret: null }
  const a = [{ id: 'session-t', status: 'idle', header: { cwd: '/w' } }]
  const parsed = JSON.parse(facts(host, a))
  assert.deepEqual(parsed, { tool: 'sessions_send', args: {}, config: { maxSendChars: 10 }, host: { ...host, profile: null }, liveSeq: null, live: a })
  // the next arrival: the same host, a live entry changed since (never a copy of the last)
  const b = [{ id: 'session-t', status: 'running', header: { cwd: '/w' } }, { id: 'session-s', status: 'idle', header: {} }]
  assert.deepEqual(JSON.parse(facts({ ...host }, b)).live, b)
  assert.equal(made.length, 1)
  // a changed secret, web server URL or home is in the next facts at once
  assert.equal(JSON.parse(facts({ ...host, secret: 's3cret' }, a)).host.secret, 's3cret')
  assert.equal(JSON.parse(facts({ ...host, secret: 's3cret', baseUrl: 'http://127.0.0.1:2' }, a)).host.baseUrl, 'http://127.0.0.1:2')
  assert.equal(JSON.parse(facts({ ...host, secret: 's3cret', baseUrl: 'http://127.0.0.1:2', dshHome: '/h2' }, a)).host.dshHome, '/h2')
  assert.equal(JSON.parse(facts(host, [])).host.secret, null)
  assert.equal(made.length, 5)
})
