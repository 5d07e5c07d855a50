// A send to a session whose holder is stopping, in the real DSH 0.1.0-rc.8 host.
//
// After SIGTERM rc.8 disposes the plugin, then exits (apps/cli/src/profile-boot.ts `process.on('SIGTERM')`,
// apps/cli/src/process-shutdown.ts: forced within PROCESS_SHUTDOWN_TIMEOUT_MS, 5 s). Until it has exited it
// still holds its sessions, so lib/presence.js's last record says `stopping` instead of being withdrawn, and a
// send from another process is refused as stopping — before, it found no owner, the /proc scan found the pid
// and the refusal said that process "does not run dsh-session-mail".
//
// Two processes on one home, B idle in process 2. Process 2 gets SIGTERM and, as soon as its record says
// stopping, SIGSTOP: frozen inside its stop, it holds B (a real stopping window that does not end before the
// send is made). Process 2 also runs the slow-tool fixture with a 3 s dispose (DSH_FIXTURE_SLOW_DISPOSE_MS): a
// neighbour slow to stop keeps it in its stop long enough to be seen there. Without it rc.8's stop took a few
// ms and a loaded CI machine (2 cores, two hosts, this loop) once descheduled the loop across the whole window:
// the record went from `stopping: false` straight to withdrawn (CI run of 9c8efd5). A → B: refused
// (held-elsewhere) as stopping, nothing reaches B. Then SIGCONT: process 2 exits, and A → B wakes B here once;
// B's log is one history.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-stopping.test.mjs
import { test, after } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, installPlugin, bootWeb, callTool, readSessionLog, findSessionLog, esc, sleep,
  idleSession, assertOneHistory, userTexts, printMetrics, packAndInstall, SLOW_PLUGIN,
} from './real-host/harness.mjs'

const m = {}
after(() => printMetrics('session-mail-stopping', m))

test('a send to a session whose holder is stopping is refused as stopping, and wakes it here once that process has exited', async () => {
  const box = await makeSandbox()
  try {
    const pdir = installPlugin(box)
    packAndInstall(pdir, SLOW_PLUGIN, { mode: 'manual' })
    const [web1, web2] = await Promise.all([bootWeb(box), bootWeb(box, { env: { DSH_FIXTURE_SLOW_DISPOSE_MS: '3000' } })])
    const A = await idleSession(web1, box.ws, 'hello from A')
    const B = await idleSession(web2, box.mkdir('ws-b'), 'hello from B')
    const exited = new Promise(r => web2.child.once('exit', r))
    const file = join(box.home, 'dsh-session-mail', 'presence', `${web2.pid}.json`)
    web2.child.kill('SIGTERM')
    // Freeze process 2 the moment its record says stopping: read in a synchronous loop (its stop can take
    // only milliseconds), then SIGSTOP. Process 2 is still a child of this one while the loop runs (nothing
    // reaps it), so a record that vanished is the proof it exited first.
    const t0 = Date.now()
    let seen = null
    let text = null
    for (;;) {
      let now = null
      try { now = readFileSync(file, 'utf8') } catch {}
      if (now === null && text !== null) break // withdrawn: it exited
      if (now !== null && now !== text) {
        text = now
        try { seen = JSON.parse(now) } catch {}
        if (seen?.stopping === true) {
          process.kill(web2.pid, 'SIGSTOP')
          break
        }
      }
      if (Date.now() - t0 > 10_000) break
    }
    m.stoppingSeenMs = Date.now() - t0
    assert.equal(seen?.stopping, true, `process 2's record said stopping before it exited; last record: ${text}`)
    try {
      assert.deepEqual([seen.baseUrl, seen.mailbox, seen.sessions.some(s => s.id === B)], [null, false, true], JSON.stringify(seen))
      const before = readSessionLog(findSessionLog(box.home, B)).length
      const r = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'STOPPING-ONE' })
      assert.equal(r.text, `refused (held-elsewhere): "${B}" is live in another DSH process (pid ${web2.pid}, profile web), and that process is stopping: it takes no more messages, and this process will not resume the session before that process has exited.\n`
        + 'This process will not resume it: two writers would fork its history. Nothing was sent.\n'
        + 'Send it again in a few seconds, once that process has exited (the session is then woken here).')
      assert.equal(readSessionLog(findSessionLog(box.home, B)).length, before, 'nothing reached B')
    } finally {
      web2.child.kill('SIGCONT')
    }
    await exited
    const w = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'STOPPING-TWO' }, { timeout: 60_000 })
    assert.match(w.text, new RegExp(`^accepted for ${esc(B)}`), w.text)
    const t1 = Date.now()
    for (;;) {
      const texts = userTexts(readSessionLog(findSessionLog(box.home, B))).map(u => JSON.stringify(u))
      if (texts.some(t => t.includes('STOPPING-TWO'))) {
        assert.ok(!texts.some(t => t.includes('STOPPING-ONE')), 'the refused message never lands')
        break
      }
      assert.ok(Date.now() - t1 < 60_000, 'STOPPING-TWO lands in B')
      await sleep(100)
    }
    assertOneHistory(box.home, B)
    await web1.stop()
  } finally {
    await box.cleanup()
  }
})
