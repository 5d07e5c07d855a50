// Two DSH 0.1.0-rc.8 processes on one DSH_HOME (issue 8): presence, reads and sends across processes.
// Session B lives in process 2; process 1's session A lists it as live there, reads it from disk and mails it
// (queue and steer): B's owner receives each message exactly once, B's log keeps one seq history,
// and process 1 never holds B (it would resume it and fork the log: rc.8 has no session lock). Then process 2
// is SIGKILLed: B drops to cold within a bounded time and a queue send wakes it in process 1, once. Then a
// new process 2' and process 1 send to one target at the same time: each request lands once. Last, the HTTP
// hand-off is durable: a routed POST that reached a frozen owner lands once although its sender was SIGKILLed
// before any answer (docs/delivery.md "Routing a send to the owner").
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-peers.test.mjs
//
// KEEP_TMP=1 keeps the sandbox. Timings print as `# metrics {...}`.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, installPlugin, bootWeb, callTool, readSessionLog, findSessionLog, waitForLog,
  userTexts, isIdle, turnEndCount, printMetrics, REPO_ROOT, sleep, esc, requestIdOf, landedCount,
  presenceRecords, assertOneHistory,
} from './real-host/harness.mjs'

/** The pid whose presence record lists `id` (waits for it). */
async function ownerPid(home, id, timeout = 10_000) {
  const t0 = Date.now()
  for (;;) {
    for (const [pid, r] of presenceRecords(home)) if (r.sessions?.some(s => s.id === id)) return pid
    if (Date.now() - t0 > timeout) throw new Error(`no presence record lists ${id} after ${timeout} ms`)
    await sleep(100)
  }
}

/** The record of `pid` once it lists `id` with `status`, at most `maxAgeMs` old (bounded poll of the file, not a sleep). */
async function presenceStatus(home, pid, id, status, timeout = 10_000, maxAgeMs = Infinity) {
  const t0 = Date.now()
  for (;;) {
    const r = presenceRecords(home).get(pid)
    if (r?.sessions?.some(s => s.id === id && s.status === status) && Date.now() - r.updatedAt < maxAgeMs) return r
    if (Date.now() - t0 > timeout) throw new Error(`pid ${pid} does not list ${id} as ${status} after ${timeout} ms: ${JSON.stringify(r?.sessions)}`)
    await sleep(20)
  }
}

/**
 * Bytes received and not yet read by the process, on established TCP connections to local `port`
 * (/proc/net/tcp{,6}: `tx_queue:rx_queue`, state 01): what a request sent to a frozen server leaves there.
 */
function unreadBytesOn(port) {
  let sum = 0
  for (const f of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(f)) continue
    for (const line of readFileSync(f, 'utf8').split('\n').slice(1)) {
      const c = line.trim().split(/\s+/)
      if (c.length < 5 || c[3] !== '01') continue
      if (parseInt(c[1].split(':').pop(), 16) !== port) continue
      sum += parseInt(c[4].split(':')[1], 16)
    }
  }
  return sum
}

describe('dsh-session-mail in two rc.8 processes on one DSH_HOME', () => {
  let box, web1, web2, A, B, pid1, pid2
  const m = {}

  before(async () => {
    box = await makeSandbox()
    installPlugin(box)
    ;[web1, web2] = await Promise.all([bootWeb(box), bootWeb(box)])
    A = await web1.createSession(box.ws)
    B = await web2.createSession(box.mkdir('ws-b'))
    // B has a history on disk before anyone mails it
    await web2.prompt(B, 'hello from B')
    await web2.waitFor(B, ev => turnEndCount(ev) >= 1 && isIdle(ev))
    await web1.prompt(A, 'hello from A')
    await web1.waitFor(A, ev => turnEndCount(ev) >= 1 && isIdle(ev))
    pid2 = await ownerPid(box.home, B)
    pid1 = await ownerPid(box.home, A)
    assert.notEqual(pid1, pid2)
  })
  after(async () => {
    printMetrics('session-mail-peers', m)
    await box?.cleanup()
  })

  test('1. process 1 lists B as live in process 2 and reads it from disk without touching it', async () => {
    // B went idle in process 2 (its turn ended); process 2 republishes that (lib/presence.js), wait for it
    await presenceStatus(box.home, pid2, B, 'idle')
    const list = await callTool(web1, A, 'sessions_list', {})
    const row = new RegExp(`^- ${esc(B)} \\[live, top-level, idle, in pid ${pid2}, profile web\\] \\| .* \\| send: delivered by its own process \\(pid ${pid2}\\)$`, 'm')
    assert.match(list.text, row)
    const read = await callTool(web1, A, 'sessions_read', { session_id: B })
    assert.match(read.text, new RegExp(`^session ${esc(B)} \\[live, top-level\\]`))
    assert.match(read.text, /\nhello from B\n/)
    assert.match(read.text, new RegExp(`note: live in another DSH process \\(pid ${pid2}, profile web, idle\\)`))
    assert.ok(!presenceRecords(box.home).get(pid1).sessions.some(s => s.id === B), 'process 1 does not hold B')
  })

  test('1b. B running, then idle again: process 2 republishes each status and process 1 lists it', async () => {
    // a turn the fake LLM keeps running: B goes running, then idle again; each shows in process 2's record
    await web2.prompt(B, '@@sleep 2500')
    await presenceStatus(box.home, pid2, B, 'running')
    let list = await callTool(web1, A, 'sessions_list', { query: B })
    assert.match(list.text, new RegExp(`^- ${esc(B)} \\[live, top-level, running, in pid ${pid2}`, 'm'), list.text)
    await web2.waitFor(B, ev => turnEndCount(ev) >= 2 && isIdle(ev))
    await presenceStatus(box.home, pid2, B, 'idle')
    list = await callTool(web1, A, 'sessions_list', { query: B })
    assert.match(list.text, new RegExp(`^- ${esc(B)} \\[live, top-level, idle, in pid ${pid2}`, 'm'), list.text)
  })

  test('2. queue and steer from process 1 land in B in process 2 exactly once; one history', async () => {
    const t0 = Date.now()
    const q = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'PEER-QUEUE one' })
    m.routedQueueToolMs = q.result.time - q.call.time
    assert.match(q.text, new RegExp(`^accepted for ${esc(B)} \\| mode=queue \\| chars=\\d+\\n`), q.text)
    assert.ok(!q.text.includes('woke a cold session'), q.text)
    assert.match(q.text, new RegExp(`note: routed: that session is live in another DSH process \\(pid ${pid2}, profile web\\)`))
    const rq = requestIdOf(q.text)
    let events = await web2.waitFor(B, ev => landedCount(ev, rq) >= 1)
    m.queueLandedMs = Date.now() - t0
    await web2.waitFor(B, isIdle)
    const s = await callTool(web1, A, 'send_session_message', { toSessionId: B, message: 'PEER-STEER two', urgent: true })
    assert.match(s.text, new RegExp(`^accepted for ${esc(B)} \\| mode=steer`), s.text)
    const rs = requestIdOf(s.text)
    events = await web2.waitFor(B, ev => landedCount(ev, rs) >= 1 && isIdle(ev))
    await sleep(500)
    events = await web2.history(B)
    assert.equal(landedCount(events, rq), 1)
    assert.equal(landedCount(events, rs), 1)
    // the owner's file has them once too, with one contiguous seq run
    const onDisk = await waitForLog(box.home, B, ev => landedCount(ev, rs) === 1)
    assert.equal(landedCount(onDisk, rq), 1)
    assertOneHistory(box.home, B)
    // process 1 never held B: its presence never listed it, and B is still listed as live in process 2
    assert.ok(!presenceRecords(box.home).get(pid1).sessions.some(x => x.id === B))
    const list = await callTool(web1, A, 'sessions_list', { query: B })
    assert.match(list.text, new RegExp(`^- ${esc(B)} \\[live, top-level, \\w+, in pid ${pid2}`, 'm'))
    // the CLI's verify confirms each landing from the log (the audit ledger of process 1 names the target)
    for (const rid of [rq, rs]) {
      const out = execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', rid], {
        env: { ...box.env }, encoding: 'utf8',
      })
      assert.match(out, new RegExp(`^landed in ${esc(B)} at seq \\d+`), out)
    }
    const read = await callTool(web1, A, 'sessions_read', { session_id: B })
    assert.match(read.text, new RegExp(`request=${esc(rq)}\\) ---\\n`))
  })

  test('3. SIGKILL process 2: B is listed cold within a bounded time, and a queue send wakes it in process 1 once', async () => {
    const t0 = Date.now()
    process.kill(pid2, 'SIGKILL')
    if (web2.child.pid !== pid2) web2.child.kill('SIGKILL')
    let list
    for (;;) {
      list = await callTool(web1, A, 'sessions_list', { query: B })
      if (new RegExp(`^- ${esc(B)} \\[cold, top-level\\]`, 'm').test(list.text)) break
      assert.ok(Date.now() - t0 < 15_000, `B still listed live 15 s after SIGKILL:\n${list.text}`)
      await sleep(250)
    }
    m.coldAfterKillMs = Date.now() - t0
    const w = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'PEER-WAKE three' })
    assert.match(w.text, new RegExp(`^accepted for ${esc(B)} \\| mode=queue \\| chars=\\d+ \\(woke a cold session\\)`), w.text)
    const rw = requestIdOf(w.text)
    await web1.waitFor(B, ev => landedCount(ev, rw) >= 1 && isIdle(ev))
    await sleep(500)
    assert.equal(landedCount(await web1.history(B), rw), 1)
    const onDisk = await waitForLog(box.home, B, ev => landedCount(ev, rw) === 1)
    assert.ok(userTexts(onDisk).filter(u => (u.source?.rpcId ?? '').startsWith('dsh-session-mail:')).length >= 3)
    assertOneHistory(box.home, B)
  })

  test('4. concurrent sends from both processes to one target: each request lands exactly once', async () => {
    const web3 = await bootWeb(box)
    const C = await web3.createSession(box.mkdir('ws-c'))
    // B is live in process 1 now; C in process 3 sends to it at the same moment as A in process 1
    const [a, c] = await Promise.all([
      callTool(web1, A, 'sessions_send', { session_id: B, message: 'PEER-RACE from A' }),
      (async () => {
        await ownerPid(box.home, C)
        // process 3 must see B live in process 1 before it sends (presence refresh ≤ 1 s)
        return callTool(web3, C, 'sessions_send', { session_id: B, message: 'PEER-RACE from C' })
      })(),
    ])
    assert.match(a.text, new RegExp(`^accepted for ${esc(B)} `), a.text)
    assert.match(c.text, new RegExp(`^accepted for ${esc(B)} `), c.text)
    assert.ok(!c.text.includes('woke a cold session'), `process 3 must not resume B:\n${c.text}`)
    assert.match(c.text, new RegExp(`note: routed: that session is live in another DSH process \\(pid ${pid1}, profile web\\)`))
    const ra = requestIdOf(a.text)
    const rc = requestIdOf(c.text)
    await web1.waitFor(B, ev => landedCount(ev, ra) >= 1 && landedCount(ev, rc) >= 1 && isIdle(ev), { timeout: 30_000 })
    await sleep(500)
    const events = await web1.history(B)
    assert.equal(landedCount(events, ra), 1)
    assert.equal(landedCount(events, rc), 1)
    await waitForLog(box.home, B, ev => landedCount(ev, rc) === 1 && landedCount(ev, ra) === 1)
    assertOneHistory(box.home, B)
  })

  test('5. HTTP hand-off: the owner frozen, the sender\'s POST reaches it and the sender is SIGKILLed before any answer; thawed, the owner lands the message once (rc.8 host/apiproxy prompt has no abort signal)', async () => {
    // B is live in process 1 (woken there in test 3); the sender is a fourth process whose agent calls the tool
    const web4 = await bootWeb(box)
    const D = await web4.createSession(box.mkdir('ws-d'))
    await web4.prompt(D, 'hello from D')
    await web4.waitFor(D, ev => turnEndCount(ev) >= 1 && isIdle(ev))
    await web1.waitFor(B, isIdle)
    // freeze the owner right after it refreshed its record: the sender drops a record 5 s old, and its
    // whole turn (a fake-LLM round trip) must fit in that, also under load
    const fresh = await presenceStatus(box.home, pid1, B, 'idle', 10_000, 300)
    const port = Number(new URL(web1.base).port)
    const text = 'HTTP-ORPHAN six'
    assert.equal(unreadBytesOn(port), 0, 'nothing waits on the owner\'s port before the send')
    process.kill(pid1, 'SIGSTOP')
    let stopped = true
    try {
      await web4.prompt(D, `@@call sessions_send ${JSON.stringify({ session_id: B, message: text })}`)
      // the POST is in the owner's socket buffer (the kernel accepts for a stopped process) once bytes wait
      // there and stop growing; the owner cannot have answered, so the sender's tool call is still waiting.
      // Had the sender not routed it there while the owner's record was fresh (it drops a record 5 s old), it
      // would have answered D without the owner (a refusal or a cold wake): D's tool call has no result meanwhile.
      const t0 = Date.now()
      let last = 0
      let stableSince = null
      for (;;) {
        const n = unreadBytesOn(port)
        if (n > 0 && n === last) stableSince ??= Date.now()
        else stableSince = null
        last = n
        if (stableSince !== null && Date.now() - stableSince >= 300) break
        const answered = (await web4.history(D)).find(e => e.type === 'tool/result')
        assert.equal(answered, undefined, `the sender answered before its POST reached the owner's port (unread bytes ${n}): ${JSON.stringify(answered?.data?.message?.content)}`)
        // a hang guard, not a speed check: neither an answer nor the POST for this long means the send hangs
        if (Date.now() - t0 > 30_000) throw new Error(`no answer and no POST at the owner's port after 30 s (unread bytes ${n})`)
        await sleep(10)
      }
      m.httpHandOffMs = Date.now() - t0
      m.httpHandOffBytes = last
      web4.child.kill('SIGKILL')
      await new Promise(r => (web4.child.exitCode !== null || web4.child.signalCode !== null) ? r() : web4.child.once('exit', r))
      process.kill(pid1, 'SIGCONT')
      stopped = false
    } finally {
      if (stopped) try { process.kill(pid1, 'SIGCONT') } catch {}
    }
    // the sender's tool call never returned: its log has no tool result for it
    const dEvents = readSessionLog(findSessionLog(box.home, D))
    const call = dEvents.find(e => e.type === 'tool/call' && e.data?.name === 'sessions_send')
    assert.ok(call === undefined || !dEvents.some(e => e.type === 'tool/result' && e.data?.message?.source?.callId === call.data.callId), 'the sender got no answer')
    const carries = ev => userTexts(ev).filter(u => u.text.includes(text))
    await web1.waitFor(B, ev => carries(ev).length >= 1 && isIdle(ev), { timeout: 30_000 })
    await sleep(500)
    const landed = carries(await web1.history(B))
    assert.equal(landed.length, 1, 'landed exactly once')
    assert.match(landed[0].source?.rpcId ?? '', /^dsh-session-mail:/, 'delivered by the routed send (its request id)')
    // through the owner's HTTP route, not the mailbox: no envelope or receipt carries that request id
    const uuid = landed[0].source.rpcId.slice('dsh-session-mail:'.length)
    const shard = join(box.home, 'dsh-session-mail', 'mailbox', B)
    assert.ok(!existsSync(shard) || !readdirSync(shard).some(n => n.startsWith(uuid)), 'no mailbox file for it')
    const onDisk = await waitForLog(box.home, B, ev => carries(ev).length === 1)
    assert.equal(carries(onDisk).length, 1)
    assertOneHistory(box.home, B)
  })
})
