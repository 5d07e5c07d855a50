// human.sendMany (issue 32 #6) against the npm-installed DSH 0.1.0-rc.8: the human's one message to three
// sessions lands once in each as the human's own prompt (the host's `/api/session.prompt`, source kind
// `user`, a plain UUID rpcId, the text exactly as typed: no From header), each landing reported, and no agent
// mail is recorded (no ledger line). The route is called the way the web client calls it: a Connection RPC
// POST to `/dsh-session-mail/human.sendMany` on the host's own port (lib/client-host.js).
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-sendmany.test.mjs
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeSandbox, packAndInstall, bootWeb, initProfile, userTexts, isIdle, REPO_ROOT } from './real-host/harness.mjs'

describe('human.sendMany in rc.8', () => {
  let box, web
  const ids = []

  async function route(endpoint, payload) {
    const res = await fetch(`${web.base}/dsh-session-mail/${endpoint}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: web.base },
      body: JSON.stringify({ type: 'client-request', rpcId: `e2e-${Date.now()}`, method: endpoint, payload }),
    })
    assert.equal(res.status, 200, await res.clone().text())
    return (await res.json()).result
  }

  before(async () => {
    box = await makeSandbox()
    const pdir = initProfile(box, 'web')
    packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
    web = await bootWeb(box)
    for (const n of [1, 2, 3]) ids.push(await web.createSession(box.mkdir(`ws-${n}`)))
  })

  after(async () => { await box?.cleanup() })

  test('one message to three sessions lands once in each as the human\'s own, each landing reported', async () => {
    const text = 'all of you: the API changed (v2 pages by cursor)'
    const r = await route('human.sendMany', { sessionIds: [...ids, ids[0]], text, mode: 'queue' })
    assert.equal(r.ok, true, JSON.stringify(r))
    assert.deepEqual(r.value.landings.map(l => [l.sessionId, l.state]), ids.map(id => [id, 'accepted']), 'once per distinct session, in order')
    for (const [i, id] of ids.entries()) {
      const rid = r.value.landings[i].requestId
      assert.match(rid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/, 'a plain UUID, not our agent-mail prefix')
      const events = await web.waitFor(id, ev => userTexts(ev).some(u => u.source?.rpcId === rid) && isIdle(ev))
      const mine = userTexts(events).filter(u => u.source?.rpcId === rid)
      assert.equal(mine.length, 1, `${id}: landed once`)
      assert.equal(mine[0].text, text, 'the text exactly as typed: no From header, no frame')
      assert.equal(mine[0].source.kind, 'user', 'the human\'s own prompt')
    }
    const ledger = join(box.home, 'dsh-session-mail', 'ledger.jsonl')
    const lines = existsSync(ledger) ? readFileSync(ledger, 'utf8') : ''
    assert.ok(!r.value.landings.some(l => lines.includes(l.requestId)), 'not agent mail: no ledger line')
  })

  test('a session that does not exist is refused for itself, the others still land', async () => {
    const ghost = 'session-00000000-0000-0000-0000-000000000000'
    const r = await route('human.sendMany', { sessionIds: [ghost, ids[1]], text: 'second note', mode: 'steer' })
    assert.equal(r.ok, true, JSON.stringify(r))
    assert.deepEqual(r.value.landings.map(l => [l.sessionId, l.state, l.code]), [[ghost, 'refused', 'not-found'], [ids[1], 'accepted', null]])
  })
})
