// `session/writer-held` → the owner: two contract-host instances on one DSH_HOME stand in for two 0.1.5+
// host processes. Session B is live in instance 2 (it holds B's write lease); the plugin in "process 1"
// (bound to instance 1) does not see B in presence when it plans, so it sends to its own host, which
// answers `session/writer-held` (test/contract-host/index.mjs `WRITER_LEASES`, after 0.1.7
// session-persistence-jsonl `acquireLease` and packages/api/session-controller/README.md). The plugin then
// waits (≤ 1.5 s) for the owner's presence record and re-sends there with the same request id: B lands
// once, in its owner; instance 1 never resumes it. Without an owner in presence: a readable refusal.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { execAs, landingsOf, toolsOf } from './helpers/plugin-harness.mjs'
import { startOwnerProcess } from './helpers/owner-process.mjs'
import { startTwoHosts, promptsTo } from './helpers/two-hosts.mjs'

const CONFIG = {
  hostApi: 'v2', connectTimeoutMs: 500, requestTimeoutMs: 1500,
  budgetWindowSecs: 0, budgetPerPair: 0, budgetPerSender: 0, maxStackedPerSender: 0,
}
const sleep = ms => new Promise(r => setTimeout(r, ms))

let host1, host2
const ids = []

before(async () => { ({ host1, host2 } = await startTwoHosts()) })
after(async () => {
  await host1?.close()
  await host2?.close()
})

/** The presence record `pid` has in `home` (crates/core/src/presence: `dsh-session-mail/presence/<pid>.json`), or null. */
function presenceIn(home, pid) {
  try {
    return JSON.parse(readFileSync(join(home, 'dsh-session-mail', 'presence', `${pid}.json`), 'utf8'))
  } catch {
    return null
  }
}

/** Resolves once `host` has answered a prompt for `id` with `session/writer-held`, or when `settled` says to stop. */
async function writerHeldAnswered(host, id, settled) {
  while (!settled()) {
    if (promptsTo(host, id).some(r => r.result?.error?.code === 'session/writer-held')) return true
    await sleep(5)
  }
  return false
}

test('the contract host answers session/writer-held for a session another instance holds; with no owner in presence the plugin refuses readably', async () => {
  const B = host2.createSession({ cwd: '/tmp/wh', live: true })
  const tools = toolsOf(CONFIG, host1, () => [])
  // with no presence at all, process 1's own host refuses: writer-held → held-elsewhere, nothing resumed
  const A = host1.createSession({ cwd: '/tmp/wh', live: true })
  ids.push(A)
  const out = await tools.sessions_send.execute({ session_id: B, message: 'no owner known' }, execAs(A))
  assert.match(out, new RegExp(`^refused \\(held-elsewhere\\): "${B}" is live in another DSH process \\(one that publishes no presence here`), out)
  const tried = promptsTo(host1, B)
  assert.equal(tried.length, 1)
  assert.equal(tried[0].result.ok, false)
  assert.equal(tried[0].result.error.code, 'session/writer-held')
  assert.deepEqual(tried[0].result.error.details, { sessionId: B })
  assert.throws(() => host1.state(B), /unknown session/, 'instance 1 never resumed B')
  assert.equal(landingsOf(host2.events(B), tried[0].body.payload.args.request.requestId).insertions, 0)
})

test('writer-held, then the owner shows up in presence: re-sent there with the same request id, lands once', async () => {
  const B = host2.createSession({ cwd: '/tmp/wh2', live: true })
  const A = ids[0]
  const tools = toolsOf(CONFIG, host1, () => ids)
  // The owner publishes presence before the send, listing nothing yet: a process on this home that runs no
  // plugin is a foreign holder of B when it started within a clock tick of B's log write
  // (crates/core/src/presence/foreign.rs `holder_among`), and the send would then be refused before it
  // reached instance 1; with its record in the home it is a peer that says what it holds.
  const owner = await startOwnerProcess({ home: host1.dshHome, forwardTo: host2.port })
  try {
    await owner.publish({ sessions: [] })
    const record = presenceIn(host1.dshHome, owner.pid)
    assert.equal(record?.pid, owner.pid, 'the owner\'s presence record is in the home before the send')
    assert.deepEqual(record.sessions, [])
    // B shows up in the owner's record only after instance 1 answered writer-held, and 300 ms later (the
    // owner's next refresh): the plugin has to wait for it
    let settled = false
    const late = writerHeldAnswered(host1, B, () => settled)
      .then(async held => { if (held) { await sleep(300); await owner.publish({ sessions: [B] }) } })
    const t0 = Date.now()
    const out = await tools.sessions_send.execute({ session_id: B, message: 'to the owner', mode: 'steer' }, execAs(A))
    const ms = Date.now() - t0
    settled = true
    await late
    assert.match(out, new RegExp(`^accepted for ${B} \\| mode=steer \\| chars=12\\n`), out)
    assert.ok(!out.includes('woke a cold session'), out)
    assert.match(out, new RegExp(`note: routed: that session is live in another DSH process \\(pid ${owner.pid}, profile web\\); that process's own host took the message`), out)
    const rid = /^request: (\S+)$/m.exec(out)[1]
    // instance 1 answered writer-held to the first attempt; the owner got the same request id once
    const first = promptsTo(host1, B)
    assert.equal(first.length, 1)
    assert.equal(first[0].result.error.code, 'session/writer-held')
    assert.equal(first[0].body.payload.args.request.requestId, rid)
    const routed = promptsTo(host2, B)
    assert.equal(routed.length, 1)
    assert.equal(routed[0].body.payload.args.request.requestId, rid)
    assert.deepEqual(routed[0].result, { ok: true, value: { accepted: true } })
    assert.equal(landingsOf(host2.events(B), rid).insertions, 1)
    assert.throws(() => host1.state(B), /unknown session/, 'instance 1 never resumed B')
    console.log(`metrics ${JSON.stringify({ writerHeldResendMs: ms })}`)
  } finally {
    owner.stop()
  }
})
