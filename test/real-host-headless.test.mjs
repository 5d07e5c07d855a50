// A session live in a DSH 0.1.0-rc.8 process WITHOUT a web server (the one-shot headless profile,
// `dsh --profile headless "<task>"`, whose turn the fake LLM keeps running for seconds), the plugin mounted
// in it and in a `dsh web` process on the same DSH_HOME (issue 8 point 3: headless owners, durable hand-off).
// A send from the web process goes through the mailbox the headless process drains and lands in its
// session exactly once, with the owner's answer in the tool result; a sender SIGKILLed right after the
// hand-off (the owner frozen with SIGSTOP until then, so the delivery surely happens after the sender died)
// still lands once. An owner SIGKILLed before it drained: the envelope waits, and the next process to hold the
// session (woken by a queue send in the web process) delivers it once.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-headless.test.mjs
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, bootWeb, callTool, readSessionLog, findSessionLog, isIdle, printMetrics, REPO_ROOT, sleep, esc,
  requestIdOf, landedCount, headlessOwner, runHeadless, webAndHeadless, idleSession,
} from './real-host/harness.mjs'

function assertOneHistory(events, id) {
  const seqs = events.map(e => e.seq).filter(s => s !== undefined)
  for (let i = 1; i < seqs.length; i++) assert.ok(seqs[i] > seqs[i - 1], `seq ${seqs[i]} after ${seqs[i - 1]} in ${id}`)
}

describe('dsh-session-mail: a send to a session live in a headless rc.8 process (no web server)', () => {
  let box, web1, A
  const m = {}

  before(async () => {
    box = await makeSandbox()
    ;({ web: web1, A } = await webAndHeadless(box))
  })
  after(async () => {
    printMetrics('session-mail-headless', m)
    await box?.cleanup()
  })

  test('1. queue and steer from the web process land once in the headless session through its mailbox', async () => {
    const h = runHeadless(box, '@@sleep 9000')
    const owner = await headlessOwner(box.home)
    const H = owner.sessions[0].id
    assert.equal(owner.baseUrl, null)
    assert.equal(owner.mailbox, true)
    const list = await callTool(web1, A, 'sessions_list', { query: H })
    assert.match(list.text, new RegExp(`^- ${esc(H)} \\[live, top-level, running, in pid ${owner.pid}, profile headless\\] \\| .* \\| send: delivered by its own process \\(pid ${owner.pid}\\)$`, 'm'), list.text)
    const q = await callTool(web1, A, 'sessions_send', { session_id: H, message: 'HEADLESS-QUEUE one' })
    m.queueToolMs = q.result.time - q.call.time
    assert.match(q.text, new RegExp(`^accepted for ${esc(H)} \\| mode=queue \\| chars=\\d+\\n`), q.text)
    assert.ok(!q.text.includes('woke a cold session'), q.text)
    assert.match(q.text, new RegExp(`note: routed: that session is live in another DSH process without a web server \\(pid ${owner.pid}, profile headless\\); that process took the message from its mailbox`), q.text)
    const s = await callTool(web1, A, 'send_session_message', { toSessionId: H, message: 'HEADLESS-STEER two', urgent: true })
    assert.match(s.text, new RegExp(`^accepted for ${esc(H)} \\| mode=steer`), s.text)
    assert.match(s.text, /that process took the message from its mailbox/, s.text)
    const rq = requestIdOf(q.text)
    const rs = requestIdOf(s.text)
    const out = await h.done
    m.headlessExit = out.code
    assert.equal(out.code, 0, `headless exited ${out.code}: ${out.stderr}`)
    const events = readSessionLog(findSessionLog(box.home, H))
    assert.equal(landedCount(events, rq), 1, 'the queued message landed once')
    assert.equal(landedCount(events, rs), 1, 'the steer landed once')
    assertOneHistory(events, H)
    // the web process never held H
    assert.ok(!readFileSync(join(box.home, 'dsh-session-mail', 'presence', `${web1.pid}.json`), 'utf8').includes(H))
    // verify confirms each landing from the log
    for (const rid of [rq, rs]) {
      const v = execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', rid], { env: { ...box.env }, encoding: 'utf8' })
      assert.match(v, new RegExp(`^landed in ${esc(H)} at seq \\d+`), v)
    }
    // the mailbox holds receipts only: no envelope, no claim, and no in-memory record (`<uuid>.held-<pid>`,
    // crates/core/src/mailbox/queued.rs) of the two landed messages. The headless process exits right after
    // the landing turn, before its next pass would have cleared them; rc.8 ends the run through the root
    // fiber's dispose (apps/cli/src/profile-boot.ts `headlessIo.exit` → process-shutdown.ts), where the plugin
    // removes its records of the messages the host published as landed (queued::sweep_mine).
    const shard = join(box.home, 'dsh-session-mail', 'mailbox', H)
    assert.deepEqual(readdirSync(shard).filter(n => !n.endsWith('.done')), [])
  })

  test('2. the sender is SIGKILLed right after the hand-off: the message still lands once', async () => {
    const web3 = await bootWeb(box)
    const C = await idleSession(web3, box.mkdir('ws-c'), 'hello from C')
    const h = runHeadless(box, '@@sleep 9000')
    const owner = await headlessOwner(box.home)
    const H = owner.sessions[0].id
    // freeze the owner: it cannot drain until the sender is dead
    process.kill(owner.pid, 'SIGSTOP')
    let stopped = true
    try {
      const shard = join(box.home, 'dsh-session-mail', 'mailbox', H)
      await web3.prompt(C, `@@call sessions_send ${JSON.stringify({ session_id: H, message: 'HEADLESS-ORPHAN three', mode: 'steer' })}`)
      let envelope
      const t0 = Date.now()
      while (envelope === undefined) {
        const names = existsSync(shard) ? readdirSync(shard).filter(n => n.endsWith('.msg')) : []
        if (names.length > 0) envelope = names[0]
        else if (Date.now() - t0 > 20_000) throw new Error('no envelope was posted')
        else await sleep(5)
      }
      m.handOffMs = Date.now() - t0
      const web3Pid = web3.child.pid
      process.kill(web3Pid, 'SIGKILL')
      await new Promise(r => (web3.child.exitCode !== null || web3.child.signalCode !== null) ? r() : web3.child.once('exit', r))
      const env = JSON.parse(readFileSync(join(shard, envelope), 'utf8'))
      assert.equal(env.sessionId, H)
      assert.equal(env.ownerPid, owner.pid)
      assert.ok(!existsSync(join(shard, envelope.replace(/\.msg$/, '.done'))), 'nothing was delivered before the sender died')
      process.kill(owner.pid, 'SIGCONT')
      stopped = false
      const out = await h.done
      assert.equal(out.code, 0, `headless exited ${out.code}: ${out.stderr}`)
      const events = readSessionLog(findSessionLog(box.home, H))
      assert.equal(landedCount(events, env.requestId), 1, 'landed once after its sender died')
      assertOneHistory(events, H)
      // the sender's tool call never returned: its turn has no tool result
      const cEvents = readSessionLog(findSessionLog(box.home, C))
      const call = cEvents.find(e => e.type === 'tool/call' && e.data?.name === 'sessions_send')
      assert.ok(call === undefined || !cEvents.some(e => e.type === 'tool/result' && e.data?.message?.source?.callId === call.data.callId))
      const v = execFileSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', env.requestId], { env: { ...box.env }, encoding: 'utf8' })
      assert.match(v, new RegExp(`^landed in ${esc(H)} at seq \\d+`), v)
    } finally {
      if (stopped) try { process.kill(owner.pid, 'SIGCONT') } catch {}
    }
  })

  test('3. the owner dies before draining: the envelope waits, and the next holder of the session delivers it once', async () => {
    const h = runHeadless(box, '@@sleep 9000')
    const owner = await headlessOwner(box.home)
    const H = owner.sessions[0].id
    process.kill(owner.pid, 'SIGSTOP')
    let q
    try {
      q = await callTool(web1, A, 'sessions_send', { session_id: H, message: 'HEADLESS-ORPHAN four' })
    } finally {
      process.kill(owner.pid, 'SIGKILL')
      process.kill(owner.pid, 'SIGCONT')
    }
    await h.done
    // accepted and durable, but the owner never answered
    assert.match(q.text, new RegExp(`^accepted for ${esc(H)} \\| mode=queue`), q.text)
    assert.match(q.text, /The message waits in the mailbox of the DSH process that holds that session\./, q.text)
    // one route, one story (issue 16 #9): no outcome of a host that never answered
    assert.match(q.text, /outcome: waiting in that process's mailbox/, q.text)
    assert.doesNotMatch(q.text, /the host starts that turn now/, q.text)
    const r1 = requestIdOf(q.text)
    // not landed yet: verify exits non-zero and says where it waits
    const v1 = spawnSync(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), 'verify', r1], { env: { ...box.env }, encoding: 'utf8' }).stdout
    assert.match(v1, new RegExp(`^waiting: ${esc(r1)} is in the mailbox of ${esc(H)}`), v1)
    // H is cold now (its owner is dead): a queue send wakes it in the web process, which then drains the orphan.
    // The accepted send also left a queued record naming the dead owner (tools/send/mod.rs Queueing::of), which
    // web1's wake pass (lib/mailbox.js queuedWake, about once a second) may adopt first: then H is already live in
    // web1 by r1's re-delivery, and the wake send is delivered into it there. Either way each lands once, in one
    // history (the regex takes both headers: with and without '(woke a cold session)').
    const w = await callTool(web1, A, 'sessions_send', { session_id: H, message: 'HEADLESS-WAKE five' })
    assert.match(w.text, new RegExp(`^accepted for ${esc(H)} \\| mode=queue \\| chars=\\d+`), w.text)
    const r2 = requestIdOf(w.text)
    const t0 = Date.now()
    let events
    for (;;) {
      events = readSessionLog(findSessionLog(box.home, H))
      if (landedCount(events, r1) >= 1 && landedCount(events, r2) >= 1) break
      assert.ok(Date.now() - t0 < 30_000, 'the orphan and the wake both land')
      await sleep(200)
    }
    m.orphanLandedMs = Date.now() - t0
    await web1.waitFor(H, isIdle)
    await sleep(500)
    events = readSessionLog(findSessionLog(box.home, H))
    assert.equal(landedCount(events, r1), 1)
    assert.equal(landedCount(events, r2), 1)
    assertOneHistory(events, H)
    const shard = join(box.home, 'dsh-session-mail', 'mailbox', H)
    assert.deepEqual(readdirSync(shard).filter(n => !n.endsWith('.done')), [])
  })
})
