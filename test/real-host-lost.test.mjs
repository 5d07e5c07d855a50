// Nothing lost when the owner stops (issue 19), in the real DSH 0.1.0-rc.8 host.
//
// rc.8 keeps a session's inbox in the memory of the process that holds it (packages/core/agent/src/inbox.ts;
// the log records each change as `agent/inbox/spliced`). A graceful stop disposes every agent, and disposal is
// a cancel without keepInbox (packages/core/agent-loop/src/index.ts `dispose` → `machine.cancel({kind:
// 'disposed'})`; packages/core/agent-loop/src/agent.ts `cancel` → `inbox.clear()`): the log records the clear
// as `outcome: 'canceled'` and nothing replays it. A crash leaves the insertions in the log (a resume replays
// those, packages/core/agent/src/inbox.ts constructor) except the ones the write-behind had not written yet.
//
// 1./2. Two processes on one home, B live (and busy) in process 2; four sessions of process 1 send 40 queued
//    messages to B, 4 in flight; after the 12th accepted receipt process 2 is stopped (SIGTERM, then SIGKILL
//    in a fresh home), B is woken again from process 1. Every accepted message lands in B exactly once, none
//    twice, and the time from B being live again to the last landing is printed (bench/README.md).
// 3. The human removes one queued message from B's queue (the queue dock's row delete: `session.updateQueue`
//    `{kind:'remove'}`, packages/host/apiproxy/src/api-proxy.ts `updateQueue` → `agent.inbox.remove`), then
//    the holder is stopped: that message stays removed (verify says so), the others land once. Right after the
//    stop, the holder's shard is as it should have left it: each kept message's record handed back (`stop`) and
//    none retired by the stopping process itself (on failure the shard and B's inbox splices are printed).
// 4. One process alone, quit with messages queued, started again on the same home: each lands once.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-lost.test.mjs
//
// KEEP_TMP=1 keeps the sandboxes. Timings print as `# metrics {...}`.
import { describe, test, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, installPlugin, bootWeb, callTool, readSessionLog, findSessionLog, userTexts,
  isIdle, printMetrics, REPO_ROOT, sleep, esc, requestIdIn, presenceRecords, idleSession, assertOneHistory,
} from './real-host/harness.mjs'

const ROW = 'dsh-session-mail'
/** The refusal code of a send's first line (`refused (<code>): …`), else its first words. */
const whyNot = line => /^refused \(([^)]+)\)/.exec(line)?.[1] ?? line.slice(0, 40)
/** How many of `lines` were refused with each code. */
const tally = lines => Object.fromEntries(lines.reduce((m, l) => m.set(whyNot(l), (m.get(whyNot(l)) ?? 0) + 1), new Map()))
/** The first line of each kind of answer, in full (the first of each code). */
const firstOfEach = lines => Object.fromEntries(lines.reduce((m, l) => (m.has(whyNot(l)) ? m : m.set(whyNot(l), l)), new Map()))

/** How long every accepted message gets to land after B is live again (a bound for the test, not a measurement). */
const LAND_BOUND_MS = 60_000

const m = {}
after(() => printMetrics('session-mail-lost', m))

/** rpcId -> how many user messages of `events` carry it (each delivery lands as exactly one). */
function landings(events) {
  const n = new Map()
  for (const u of userTexts(events)) {
    const id = u.source?.rpcId
    if (typeof id === 'string' && id.startsWith('dsh-session-mail:')) n.set(id, (n.get(id) ?? 0) + 1)
  }
  return n
}

async function waitUntil(what, fn, timeout = 30_000, interval = 50) {
  const t0 = Date.now()
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() - t0 > timeout) throw new Error(`${what}: not after ${timeout} ms`)
    await sleep(interval)
  }
}

/** The pid whose presence record lists `id` with `status` (any status when omitted). */
function holderOf(home, id, status) {
  for (const [pid, r] of presenceRecords(home)) {
    if (r.sessions?.some(s => s.id === id && (status === undefined || s.status === status))) return pid
  }
  return undefined
}

function verify(box, rid) {
  try {
    return execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', rid], {
      env: { ...box.env }, encoding: 'utf8',
    })
  } catch (e) {
    return String(e.stdout ?? '') + String(e.stderr ?? '')
  }
}

/**
 * What B's mailbox shard holds (records `<key>.held-<pid>` with who holds them and whether they were handed
 * back; tombstones `<key>.removed` with why) and the inbox splices of B's log: what a failure prints, so a
 * run's log says what the stop left behind.
 */
function shardState(home, id) {
  const dir = join(home, ROW, 'mailbox', id)
  const out = { records: [], removed: [] }
  let names = []
  try { names = readdirSync(dir) } catch { return out }
  for (const n of names.sort()) {
    let v
    try { v = JSON.parse(readFileSync(join(dir, n), 'utf8')) } catch { continue }
    if (n.includes('.held-')) out.records.push({ name: n, rid: v.requestId, holderPid: v.holderPid, handedBack: v.handedBack ?? null })
    else if (n.endsWith('.removed')) out.removed.push({ rid: v.requestId, why: v.why, seq: v.seq })
  }
  return out
}

/** B's inbox splices and turn ends as one line each (`seq type target start+removed inserted outcome`). */
function inboxTrace(home, id) {
  let events = []
  try { events = readSessionLog(findSessionLog(home, id)) } catch (e) { return [`no log: ${e.message}`] }
  return events.filter(e => e.type === 'agent/inbox/spliced' || e.type === 'turn/end' || e.type === 'turn/start').map(e => e.type === 'agent/inbox/spliced'
    ? `${e.seq} splice ${e.data.target} ${e.data.start}+${e.data.removedCount ?? 0} [${(e.data.inserted ?? []).map(u => u.source?.rpcId ?? '-').join(',')}] ${e.data.outcome ?? ''}`
    : `${e.seq} ${e.type} ${JSON.stringify(e.data?.reason ?? e.data?.outcome ?? '')}`)
}

/** A sandbox whose plugin row has no budget, stacking or relay limit (40 sends to one target are the point here). */
async function sandbox() {
  const box = await makeSandbox()
  const pdir = installPlugin(box)
  writeFileSync(join(pdir, 'cordis.patch.yml'),
    `- id: ${ROW}\n  config: ${JSON.stringify({ budgetPerPair: 0, budgetPerSender: 0, maxStackedPerSender: 0, maxRelayHops: 0 })}\n`)
  return box
}

/** `fn(box)` in a fresh sandbox(), cleaned up after it whatever it does. */
async function inSandbox(fn) {
  const box = await sandbox()
  try {
    return await fn(box)
  } finally {
    await box.cleanup()
  }
}

/** Start a long turn in B (the fake LLM sleeps, abort-aware): every queued message waits in B's inbox. */
async function keepBusy(web, B) {
  await web.prompt(B, '@@sleep 600000')
  await web.waitFor(B, ev => ev.some(e => e.type === 'turn/start') && !isIdle(ev))
}

/** `n` queued sends from A (in `web`) to B, `<prefix>-<k>`, each accepted: their receipts. */
async function sendAccepted(web, A, B, prefix, n) {
  const texts = []
  for (let k = 0; k < n; k++) {
    const r = await callTool(web, A, 'sessions_send', { session_id: B, message: `${prefix}-${k}` })
    assert.match(r.text, /^accepted for /, r.text)
    texts.push(r.text)
  }
  return texts
}

async function stopProcess(web, signal) {
  const exited = new Promise(r => (web.child.exitCode !== null || web.child.signalCode !== null) ? r() : web.child.once('exit', r))
  web.child.kill(signal)
  const timer = setTimeout(() => web.child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

/**
 * Wait until every accepted request id has landed in B (read from the log on disk, the durable history), then
 * a little longer (several drain periods) so a second landing would show; resolves to the landing counts.
 */
async function landedOnce(box, B, accepted, bound = LAND_BOUND_MS) {
  const t0 = Date.now()
  let counts
  let missing = []
  for (;;) {
    try { counts = landings(readSessionLog(findSessionLog(box.home, B))) } catch { counts = new Map() }
    missing = accepted.filter(r => !counts.has(r))
    if (missing.length === 0) break
    if (Date.now() - t0 > bound) break
    await sleep(100)
  }
  const ms = Date.now() - t0
  await sleep(2000)
  counts = landings(readSessionLog(findSessionLog(box.home, B)))
  return { counts, ms, missing: accepted.filter(r => !counts.has(r)) }
}

function assertExactlyOnce(box, accepted, counts, label) {
  const lost = accepted.filter(r => !counts.has(r))
  const twice = [...counts].filter(([, n]) => n > 1)
  const verdicts = lost.slice(0, 3).map(r => `${r}: ${verify(box, r).trim()}`).join('\n')
  assert.deepEqual({ lost: lost.length, twice: twice.length }, { lost: 0, twice: 0 },
    `${label}: of ${accepted.length} accepted messages ${lost.length} never landed and ${twice.length} landed twice\n${verdicts}`)
}

for (const signal of ['SIGTERM', 'SIGKILL']) {
  describe(`${signal} of the process holding B (two processes on one home)`, () => {
    test(`40 queued sends, 4 in flight, holder ${signal}ed after the 12th receipt: every accepted message lands in B exactly once after B is live again`, async () => {
      await inSandbox(async (box) => {
        const [web1, web2] = await Promise.all([bootWeb(box), bootWeb(box)])
        const senders = []
        for (let i = 0; i < 4; i++) senders.push(await idleSession(web1, box.ws, `hello from sender ${i}`))
        const B = await idleSession(web2, box.mkdir('ws-b'), 'hello from B')
        await keepBusy(web2, B)
        await waitUntil('process 2 lists B running', () => holderOf(box.home, B, 'running') === web2.pid)
        const accepted = []
        const others = []
        let stopping
        let stoppedAt
        const worker = async (i) => {
          for (let k = 0; k < 10; k++) {
            const r = await callTool(web1, senders[i], 'sessions_send', { session_id: B, message: `LOST-${signal}-${i}-${k}` }, { timeout: 60_000 })
            const rid = requestIdIn(r.text)
            if (r.text.startsWith('accepted for ')) {
              accepted.push(rid)
              if (accepted.length === 12 && stopping === undefined) {
                stopping = stopProcess(web2, signal).then(() => { stoppedAt = Date.now() })
              }
            } else {
              others.push(r.text.split('\n')[0])
            }
          }
        }
        await Promise.all([0, 1, 2, 3].map(worker))
        await stopping
        m[`${signal}Accepted`] = accepted.length
        m[`${signal}NotAccepted`] = others.length
        // why each send that was not accepted was not: its refusal code (`refused (<code>): …`), with the
        // first refusal of each code in full, so a run's log says what held them back
        m[`${signal}NotAcceptedCodes`] = tally(others)
        if (others.length > 0) console.log(`${signal}: ${others.length} of 40 sends not accepted: ${JSON.stringify(firstOfEach(others))}`)
        assert.ok(accepted.length >= 12, `at least 12 accepted: ${accepted.length}; others: ${others.slice(0, 3)}`)
        // B is woken again from process 1 (if no send after the stop did already)
        await waitUntil('B drops out of process 2', () => holderOf(box.home, B) !== web2.pid, 15_000)
        if (holderOf(box.home, B) !== web1.pid) {
          const w = await callTool(web1, senders[0], 'sessions_send', { session_id: B, message: `LOST-${signal}-wake` }, { timeout: 60_000 })
          assert.match(w.text, /^accepted for /, w.text)
          accepted.push(requestIdIn(w.text))
        }
        const liveAt = await waitUntil('B live in process 1', () => holderOf(box.home, B) === web1.pid && Date.now(), 30_000)
        const { counts, ms } = await landedOnce(box, B, accepted)
        m[`${signal}RecoveryMs`] = ms
        m[`${signal}LiveAfterStopMs`] = liveAt - stoppedAt
        assertExactlyOnce(box, accepted, counts, signal)
        assertOneHistory(box.home, B)
        // verify tells the truth afterwards: each accepted request landed
        for (const rid of accepted.slice(0, 3)) assert.match(verify(box, rid), new RegExp(`^landed in ${esc(B)} at seq \\d+`, 'm'))
      })
    })
  })
}

describe('a human decision is final', () => {
  test('a queued message the human removed from B\'s queue (updateQueue remove) is never re-delivered after the holder stops; the others land once', async () => {
    await inSandbox(async (box) => {
      const [web1, web2] = await Promise.all([bootWeb(box), bootWeb(box)])
      const A = await idleSession(web1, box.ws, 'hello from A')
      const B = await idleSession(web2, box.mkdir('ws-b'), 'hello from B')
      await keepBusy(web2, B)
      await waitUntil('process 2 lists B running', () => holderOf(box.home, B, 'running') === web2.pid)
      const receipts = await sendAccepted(web1, A, B, 'HUMAN', 3)
      // each receipt says where it waits: in process 2's memory, until B's turn starts (issue 19 #4)
      for (const text of receipts) {
        assert.match(text, new RegExp(`^note: in memory: until its turn starts it waits in that session's inbox, which lives in the memory of DSH process pid ${web2.pid};`, 'm'), text)
      }
      const rids = receipts.map(requestIdIn)
      // and so does verify, from another process (the CLI)
      assert.match(verify(box, rids[2]), new RegExp(`^queued (in|for) ${esc(B)}.*waiting in the memory of DSH process pid ${web2.pid}`, 'm'))
      // the queue dock's row delete of the second one, as the web client sends it
      const events = await web2.history(B)
      const inserted = events.filter(e => e.type === 'agent/inbox/spliced').flatMap(e => e.data.inserted ?? [])
      const item = inserted.find(u => u.source?.rpcId === rids[1])
      assert.ok(item, 'the second message is in B\'s inbox')
      await web2.rpc('session.updateQueue', { sessionId: B, itemId: item.id, action: { kind: 'remove' } })
      await web2.waitFor(B, ev => ev.some(e => e.type === 'agent/inbox/spliced' && e.data.outcome === 'canceled'))
      await stopProcess(web2, 'SIGTERM')
      // what process 2's stop left: each kept message's record handed back, the clear in the log after it
      const left = { shard: shardState(box.home, B), log: inboxTrace(box.home, B), stderr: web2.stderr().slice(-2000) }
      const why = () => `rids ${JSON.stringify(rids)}\nafter the stop: ${JSON.stringify(left, null, 1)}\nnow: ${JSON.stringify(shardState(box.home, B))}`
      // the stop handed both kept messages back and retired neither (the flake: a drain pass of the stopping
      // process read the clear and retired them as nobody's hand-back)
      for (const rid of [rids[0], rids[2]]) {
        const rec = left.shard.records.find(r => r.rid === rid)
        assert.equal(rec?.handedBack?.why, 'stop', `${rid} handed back at the stop; ${why()}`)
        assert.ok(!left.shard.removed.some(r => r.rid === rid), `${rid} not retired by the stopping process; ${why()}`)
      }
      await waitUntil('B drops out of process 2', () => holderOf(box.home, B) !== web2.pid, 15_000)
      const w = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'HUMAN-wake' })
      assert.match(w.text, /^accepted for /, w.text)
      const wake = requestIdIn(w.text)
      const { counts } = await landedOnce(box, B, [rids[0], rids[2], wake])
      assertExactlyOnce(box, [rids[0], rids[2], wake], counts, `kept; ${why()}`)
      assert.equal(counts.get(rids[1]) ?? 0, 0, 'the message the human removed never lands')
      assert.match(verify(box, rids[1]), /removed from the queue by the human/)
    })
  })
})

describe('one process alone', () => {
  test('quit (SIGTERM) with messages queued, started again on the same home: each lands once', async () => {
    await inSandbox(async (box) => {
      const web = await bootWeb(box)
      const A = await idleSession(web, box.ws, 'hello from A')
      const B = await idleSession(web, box.mkdir('ws-b'), 'hello from B')
      await keepBusy(web, B)
      const rids = (await sendAccepted(web, A, B, 'ALONE', 3)).map(requestIdIn)
      await stopProcess(web, 'SIGTERM')
      const t0 = Date.now()
      const again = await bootWeb(box)
      const { counts, ms } = await landedOnce(box, B, rids)
      m.aloneRestartToLandedMs = Date.now() - t0
      m.aloneLandedAfterBootMs = ms
      assertExactlyOnce(box, rids, counts, 'restart')
      assert.ok(holderOf(box.home, B) === again.pid, 'the restarted process holds B')
      assertOneHistory(box.home, B)
    })
  })
})
