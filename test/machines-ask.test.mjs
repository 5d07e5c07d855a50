// What the core asks this process's host when a linked machine's request arrives (src/lib.rs `here_of`,
// core `remote::Ask`), as the shim reads it (lib/machines.js `askOf`, module-private: read through `startMachines`): a send's facts are its target's and
// sender's live entries alone (a local send's), a read names its session, anything else asks for all.
//
//   node --test test/machines-ask.test.mjs
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { startMachines } from '../lib/machines.js'

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
