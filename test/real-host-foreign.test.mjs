// A session live in an rc.8 process that does NOT mount dsh-session-mail (issue 8: "never resume a session
// another process holds"). Such a process publishes no presence and rc.8 has no session lock, so before this
// guard a queue send from another process resumed the session there too and forked its log. The guard
// (crates/core/src/presence/foreign.rs) finds DSH hosts on this home in /proc that publish no presence and
// refuses to wake a session whose log was written after one of them started (creating or resuming a session
// writes its log; test 1b checks the resume half in this very host).
//
// Three rc.8 processes on one DSH_HOME: process 0 (plugin) writes session C and exits; then process 1 (plugin,
// the sender A) and process 2 (profile `plain`, no plugin, holds B live). A → B is refused naming process 2
// and nothing reaches B (one contiguous seq history, B still answers its own process); D, written before
// process 2 started and then resumed there without a turn, is refused too; A → C (written before process 2
// started) wakes C; process 2 exits, then A → B wakes B once.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-foreign.test.mjs
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { cpSync, statSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, packAndInstall, bootWeb, initProfile, callTool, readSessionLog, findSessionLog, waitForLog,
  userTexts, isIdle, turnEndCount, printMetrics, REPO_ROOT, sleep, esc, idleSession, assertOneHistory,
} from './real-host/harness.mjs'

/** User messages of ours (the plugin's request ids) in a session's log. */
function ours(events) {
  return userTexts(events).filter(u => (u.source?.rpcId ?? '').startsWith('dsh-session-mail:'))
}

describe('a session live in an rc.8 process without dsh-session-mail is never woken here', () => {
  let box, web1, web2, A, B, C, D
  const m = {}

  before(async () => {
    box = await makeSandbox()
    const pdir = initProfile(box, 'web')
    // profile `plain`: the same web profile without this plugin (copied before the plugin is installed)
    cpSync(pdir, box.profileDir('plain'), { recursive: true, verbatimSymlinks: true })
    packAndInstall(pdir, REPO_ROOT, { mode: 'manual' })
    // C: written by a process that has exited before the others start (truly cold)
    const web0 = await bootWeb(box)
    C = await idleSession(web0, box.mkdir('ws-c'), 'hello from C')
    // D: also written before the others start; process 2 will resume it without a turn
    D = await idleSession(web0, box.mkdir('ws-d'), 'hello from D')
    await web0.stop()
    await sleep(1000) // C is last written well before the next processes start
    ;[web1, web2] = await Promise.all([bootWeb(box), bootWeb(box, { profile: 'plain' })])
    A = await idleSession(web1, box.ws, 'hello from A')
    B = await idleSession(web2, box.mkdir('ws-b'), 'hello from B')
  })
  after(async () => {
    printMetrics('session-mail-foreign', m)
    await box?.cleanup()
  })

  test('1. A → B (live in the plugin-less process): refused held-elsewhere naming it; nothing reaches B; one history', async () => {
    const before = readSessionLog(findSessionLog(box.home, B)).length
    const t0 = Date.now()
    const r = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'FOREIGN-ONE' })
    m.refusedToolMs = Date.now() - t0
    assert.match(r.text, new RegExp(`^refused \\(held-elsewhere\\): "${esc(B)}" may be live in another DSH process on this home \\(pid ${web2.pid}, profile plain\\) that does not run dsh-session-mail`), r.text)
    assert.match(r.text, /Nothing was sent\./)
    assert.match(r.text, new RegExp(`stop pid ${web2.pid} and send again`))
    // B's owner never got it, and B is still its own process's: a prompt there lands and the log stays one history
    await sleep(500)
    const hist = await web2.history(B)
    assert.equal(userTexts(hist).filter(u => JSON.stringify(u).includes('FOREIGN-ONE')).length, 0)
    assert.equal(ours(readSessionLog(findSessionLog(box.home, B))).length, 0)
    await web2.prompt(B, 'B carries on')
    await web2.waitFor(B, ev => turnEndCount(ev) >= 2 && isIdle(ev))
    const after = await waitForLog(box.home, B, ev => turnEndCount(ev) >= 2)
    assert.ok(after.length > before)
    assertOneHistory(box.home, B)
    // the send path refused without resuming: web1 does not hold B (its listing shows B cold, not live here)
    const list = await callTool(web1, A, 'sessions_list', { query: B })
    assert.doesNotMatch(list.text, new RegExp(`^- ${esc(B)} \\[live, top-level, (idle|running)\\]`, 'm'), list.text)
  })

  test('1b. A → D, a session the plugin-less process only resumed (no turn): refused too; resuming appended session/end-seed', async () => {
    const before = readSessionLog(findSessionLog(box.home, D))
    // rc.8 session.create with a stored id resumes it (apiproxy ensureSession), and appends one event to its log
    const r = await web2.rpc('session.create', { sessionId: D, cwd: join(box.dir, 'ws-d') })
    assert.equal(r.sessionId, D)
    const resumed = await waitForLog(box.home, D, ev => ev.length > before.length)
    assert.deepEqual(resumed.slice(before.length).map(e => e.type), ['session/end-seed'])
    const s = await callTool(web1, A, 'sessions_send', { session_id: D, message: 'FOREIGN-D' })
    assert.match(s.text, new RegExp(`^refused \\(held-elsewhere\\): "${esc(D)}" may be live in another DSH process on this home \\(pid ${web2.pid}, profile plain\\)`), s.text)
    await sleep(300)
    assert.equal(ours(readSessionLog(findSessionLog(box.home, D))).length, 0)
    assertOneHistory(box.home, D)
  })

  test('2. A → C (cold, last written before the plugin-less process started): woken here, once', async () => {
    assert.ok(statSync(findSessionLog(box.home, C)).mtimeMs < Date.now() - 2000)
    const r = await callTool(web1, A, 'sessions_send', { session_id: C, message: 'COLD-C' })
    assert.match(r.text, new RegExp(`^accepted for ${esc(C)} \\| mode=queue \\| chars=\\d+ \\(woke a cold session\\)`), r.text)
    const rid = /^request: (dsh-session-mail:\S+)$/m.exec(r.text)[1]
    await web1.waitFor(C, ev => userTexts(ev).some(u => u.source?.rpcId === rid) && isIdle(ev))
    const onDisk = await waitForLog(box.home, C, ev => userTexts(ev).filter(u => u.source?.rpcId === rid).length === 1)
    assert.equal(userTexts(onDisk).filter(u => u.source?.rpcId === rid).length, 1)
    assertOneHistory(box.home, C)
  })

  test('3. the plugin-less process exits: A → B wakes B here, once; one history', async () => {
    await web2.stop()
    const r = await callTool(web1, A, 'sessions_send', { session_id: B, message: 'FOREIGN-TWO' })
    assert.match(r.text, new RegExp(`^accepted for ${esc(B)} \\| mode=queue \\| chars=\\d+ \\(woke a cold session\\)`), r.text)
    const rid = /^request: (dsh-session-mail:\S+)$/m.exec(r.text)[1]
    await web1.waitFor(B, ev => userTexts(ev).some(u => u.source?.rpcId === rid) && isIdle(ev))
    await sleep(500)
    assert.equal(userTexts(await web1.history(B)).filter(u => u.source?.rpcId === rid).length, 1)
    const onDisk = await waitForLog(box.home, B, ev => userTexts(ev).filter(u => u.source?.rpcId === rid).length === 1)
    assert.equal(ours(onDisk).length, 1, 'the refused send never landed; the second one landed once')
    assertOneHistory(box.home, B)
  })
})
