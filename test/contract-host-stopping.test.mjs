// `session/writer-held` from a holder that is stopping: two contract-host instances on one DSH_HOME stand in
// for two 0.1.5+ host processes. Session B is live in instance 2, which holds B's write lease until its
// process exits (test/contract-host/index.mjs `WRITER_LEASES`, after 0.1.7
// packages/session-persistence-jsonl `acquireLease`: a kernel flock on `session.lock`, released on process
// death; a resume blocked by it answers `session/writer-held` with the session id, kilinthecode/deepseek-harness
// packages/api/session-controller/README.md). The plugin in "process 1" does not see B in presence when it
// plans, so it sends to its own host, which answers writer-held; the plugin then waits for the holder's
// presence, and the record that shows up says the holder is stopping (what a process publishes from its stop
// signal on, lib/presence.js: stopping, no web server, no mailbox). The send is refused as the checks refuse a
// stopping owner — "that process is stopping … Send it again in a few seconds, once that process has exited" —
// not as a holder that "publishes no presence here"; nothing is posted, re-sent or resumed.
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
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

before(async () => { ({ host1, host2 } = await startTwoHosts()) })
after(async () => {
  await host1?.close()
  await host2?.close()
})

test('writer-held, then the holder shows up in presence as stopping: refused as stopping, with the request the host refused; nothing posted, re-sent or resumed', async () => {
  const B = host2.createSession({ cwd: '/tmp/whs', live: true })
  const A = host1.createSession({ cwd: '/tmp/whs', live: true })
  const tools = toolsOf(CONFIG, host1, () => [A])
  // the stand-in holder starts well after B's log was written: a DSH-like process that started within
  // START_SLACK_MS of the log's time counts as its possible writer (crates/core/src/presence/foreign.rs), and
  // the send would be refused by that evidence before it tries (not the writer-held path this test is about)
  await sleep(50)
  const owner = await startOwnerProcess({ home: host1.dshHome, forwardTo: host2.port })
  try {
    // the holder's stopping record appears 300 ms after the send started (after the checks, before the wait ends)
    const late = sleep(300).then(() => owner.publish({ sessions: [B], stopping: true }))
    const out = await tools.sessions_send.execute({ session_id: B, message: 'while it stops' }, execAs(A))
    await late
    const first = promptsTo(host1, B)
    assert.equal(first.length, 1, 'one attempt here')
    assert.equal(first[0].result.error.code, 'session/writer-held')
    assert.deepEqual(first[0].result.error.details, { sessionId: B })
    const rid = first[0].body.payload.args.request.requestId
    assert.equal(out, [
      `refused (held-elsewhere): "${B}" is live in another DSH process (pid ${owner.pid}, profile web), and that process is stopping: it takes no more messages, and this process will not resume the session before that process has exited.`,
      'This process will not resume it: two writers would fork its history. Nothing was sent.',
      'Send it again in a few seconds, once that process has exited (the session is then woken here).',
      `request: ${rid}`,
    ].join('\n'))
    assert.ok(!out.includes('publishes no presence'), out)
    assert.equal(promptsTo(host2, B).length, 0, 'nothing reached the stopping holder')
    assert.equal(landingsOf(host2.events(B), rid).insertions, 0)
    assert.throws(() => host1.state(B), /unknown session/, 'instance 1 never resumed B')
    assert.ok(!existsSync(join(host1.dshHome, 'dsh-session-mail', 'mailbox', B)), 'nothing posted to a mailbox')
  } finally {
    owner.stop()
  }
})
