// Issue 32 #3-#5 end to end against the npm-installed DSH 0.1.0-rc.8, without a browser: the routes are called
// the way the web client calls them (a Connection RPC POST to /dsh-session-mail/<endpoint>), the agents send with
// the real tools (the fake LLM calls send_session_message).
//   - C is on hold; "always allow from A" (rules.set) lets A's message land in C while B's is held;
//   - held.counts shows C's one waiting message; held mail expires after heldTtlMs: the first look past it
//     rejects it, B's `verify` says expired and the ledger has its `expired` line;
//   - held.decideMany approves all of B's other held messages at once: each lands in C exactly once.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-rules.test.mjs
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { makeSandbox, packAndInstall, bootWeb, initProfile, userTexts, requestIdOf, sleep, REPO_ROOT, clientRoute } from './real-host/harness.mjs'

describe('standing rules, held expiry, counts and bulk decisions in rc.8', () => {
  let box, web, A, B, C

  const route = (endpoint, payload = {}) => clientRoute(web, endpoint, payload)
  const sendTo = async (from, to, message) => {
    const r = await web.callTool(from, 'send_session_message', { toSessionId: to, message })
    return { text: r.text, rid: requestIdOf(r.text) }
  }
  const landedIn = async (id, rid) => userTexts(await web.history(id)).filter(u => u.source?.rpcId === rid).length
  const verify = rid => JSON.parse(execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', rid, '--json'],
    { env: { ...process.env, DSH_HOME: box.home }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).toString() || 'null')
  const verifyLoose = rid => {
    try { return verify(rid) } catch (e) { return JSON.parse(e.stdout) } // a fate that is not "landed" exits non-zero
  }

  before(async () => {
    box = await makeSandbox()
    const pdir = initProfile(box, 'web')
    packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
    web = await bootWeb(box)
    A = await web.createSession(box.mkdir('ws-a'))
    B = await web.createSession(box.mkdir('ws-b'))
    C = await web.createSession(box.mkdir('ws-c'))
    await route('policy.set', { sessionId: C, inbound: 'hold' })
  })

  after(async () => { await box?.cleanup() })

  test('"always allow from A" lets A\'s message through the held session C while B\'s is held; counts show it', async () => {
    const rules = await route('rules.set', { sender: A, inbound: 'accept' })
    assert.deepEqual(rules.senders, { [A]: 'accept' })
    const a = await sendTo(A, C, 'from A: the schema is ready')
    assert.match(a.text, /^accepted for /m, a.text)
    const b = await sendTo(B, C, 'from B: please wait for me')
    assert.match(b.text, /^held for the human: /m, b.text)
    for (let i = 0; i < 100 && await landedIn(C, a.rid) === 0; i++) await sleep(100)
    assert.equal(await landedIn(C, a.rid), 1, 'A\'s message landed in C')
    assert.equal(await landedIn(C, b.rid), 0, 'B\'s did not')
    const counts = await route('held.counts')
    assert.deepEqual(counts.sessions.map(c => [c.sessionId, c.held]), [[C, 1]])
    assert.equal(counts.total, 1)
    const view = await route('view', { sessionId: C })
    const card = view.held.find(h => h.requestId === b.rid)
    assert.equal(card.state, 'held')
    assert.ok(card.msLeft > 23 * 3600_000 && card.msLeft <= 24 * 3600_000, `24 h left by default: ${card.msLeft}`)
    assert.equal(card.senderRule, null)
    // clear it for the next test: reject B's message
    assert.equal((await route('held.decideMany', { filter: { sender: B }, decision: 'reject' })).items[0].state, 'rejected')
  })

  test('held mail expires after heldTtlMs: the first look rejects it, B\'s verify says expired, the ledger says so', async () => {
    await route('policy.set', { heldTtlMs: 1500 })
    const b = await sendTo(B, C, 'from B: this one will expire')
    assert.match(b.text, /^held for the human: /m, b.text)
    assert.equal(verifyLoose(b.rid).state, 'held')
    await sleep(1600)
    // before anyone looks, verify already says expired; the count (a look) writes it
    assert.equal(verifyLoose(b.rid).state, 'expired')
    assert.equal((await route('held.counts')).total, 0)
    const v = verifyLoose(b.rid)
    assert.equal(v.state, 'expired')
    assert.match(v.text, /^expired: /)
    const ledger = readFileSync(join(box.home, 'dsh-session-mail', 'ledger.jsonl'), 'utf8').trim().split('\n').map(l => JSON.parse(l))
    assert.deepEqual(ledger.filter(l => l.requestId === b.rid).map(l => l.outcome), ['held', 'expired'])
    assert.equal(await landedIn(C, b.rid), 0, 'never delivered')
    await route('policy.set', { heldTtlMs: 24 * 3600_000 })
  })

  test('held.decideMany approves all of B\'s held messages at once; each lands once', async () => {
    const b1 = await sendTo(B, C, 'from B: first of two')
    const b2 = await sendTo(B, C, 'from B: second of two')
    assert.equal((await route('held.counts')).total, 2)
    const r = await route('held.decideMany', { filter: { sender: B }, decision: 'approve' })
    assert.deepEqual(r.items.map(i => [i.requestId, i.state, i.posted]).sort(), [[b1.rid, 'approved', true], [b2.rid, 'approved', true]].sort())
    assert.deepEqual((await route('held.decideMany', { filter: { sender: B }, decision: 'approve' })).items, [], 'taken once')
    for (const { rid } of [b1, b2]) {
      for (let i = 0; i < 150 && await landedIn(C, rid) === 0; i++) await sleep(100)
      assert.equal(await landedIn(C, rid), 1, `${rid} landed once`)
    }
  })
})
