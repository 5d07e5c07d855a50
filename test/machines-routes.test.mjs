// The web half's machines.* routes (issue 31, lib/client-host.js) over the real addon: make an invite on home
// A, use it from home B, list, rename and unlink — in this process, on loopback (relays off), as the human's
// browser would through the host's loopback channel; and bad payloads refused before the core.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test test/machines-routes.test.mjs
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startClientRoutes } from '../lib/client-host.js'

process.env.DSH_SESSION_MAIL_LINK_BIND = '127.0.0.1:0'
// no test may send a packet to a public relay: the core refuses that choice in this process
process.env.DSH_SESSION_MAIL_NO_PUBLIC_NETWORK = '1'
const core = createRequire(import.meta.url)('../binding.cjs')

/** The route handler mounted for `home` (what the host's Connection service would call). */
function handlerFor(home) {
  const seen = []
  const ctx = { get: name => name === 'connection' ? { rpc: { handle: (channel, handler) => { seen.push(handler); return () => {} } } } : undefined }
  startClientRoutes(ctx, core)
  return (endpoint, payload) => {
    process.env.DSH_HOME = home
    return seen[0](endpoint, payload)
  }
}

test('machines.invite / link / list / rename / unlink across two homes; bad payloads refused', async () => {
  const a = mkdtempSync(join(tmpdir(), 'dshm-ra-'))
  const b = mkdtempSync(join(tmpdir(), 'dshm-rb-'))
  const A = handlerFor(a)
  const B = handlerFor(b)
  try {
    for (const [route, payload] of [
      ['machines.invite', { relay: 'ftp://x' }], ['machines.invite', { ttlMinutes: 0 }],
      ['machines.link', { invite: 'hello', name: 'a' }], ['machines.link', { invite: 'dshm1abc', name: 'Not OK' }],
      ['machines.rename', { name: 'a' }], ['machines.unlink', {}],
    ]) assert.equal((await A(route, payload)).error?.code, 'bad-request', `${route} ${JSON.stringify(payload)}`)

    // the public choice passes the route's check and is refused by the core (the guard), typed, nothing bound
    const pub = await A('machines.invite', { relay: 'public' })
    assert.equal(pub.ok, false, JSON.stringify(pub))
    assert.equal(pub.error.code, 'machines')
    assert.match(pub.error.message, /Iroh's public relays are refused here/)

    const inv = await A('machines.invite', { ttlMinutes: 5 })
    assert.equal(inv.ok, true, JSON.stringify(inv))
    assert.match(inv.value.invite, /^dshm1/)
    const linked = await B('machines.link', { invite: inv.value.invite, name: 'home-a' })
    assert.equal(linked.ok, true, JSON.stringify(linked))
    assert.equal(linked.value.link.name, 'home-a')
    const la = await A('machines.list', {})
    const lb = await B('machines.list', { probe: true })
    assert.equal(la.value.links.length, 1)
    assert.equal(la.value.links[0].id, lb.value.id)
    assert.equal(lb.value.links[0].online, true, JSON.stringify(lb.value.links[0]))
    assert.ok(lb.value.links[0].rttMs >= 0)
    // the same invite again: refused by A, as data
    const again = await B('machines.link', { invite: inv.value.invite, name: 'home-a2' })
    assert.equal(again.ok, false)
    assert.equal(again.error.code, 'machines')
    const ren = await B('machines.rename', { name: 'home-a', newName: 'laptop' })
    assert.equal(ren.value.link.name, 'laptop')
    const un = await B('machines.unlink', { name: 'laptop' })
    assert.equal(un.ok, true)
    assert.equal(un.value.told, true, 'A confirmed: both ends unlinked at once')
    assert.equal((await A('machines.list', {})).value.links.length, 0)
    assert.equal((await B('machines.list', {})).value.links.length, 0)
  } finally {
    await core.machinesStop(a)
    await core.machinesStop(b)
    rmSync(a, { recursive: true, force: true })
    rmSync(b, { recursive: true, force: true })
  }
})
