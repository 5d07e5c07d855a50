// Issue 9 ("win the listing slot") proven in the real DSH 0.1.0-rc.8 host with the scripted fake LLM: the
// tool schema size the host actually sends, the causal loop guard (A↔B ping-pong, a P→Q→R→P cycle, a human
// opening a new chain at once), awaiting-user presence while a turn waits on an ask, the idle notice,
// repository scope with two worktrees of one repository and a third repository, the file-overlap line, and
// delta reads with since_seq. Run from the repo root (the addon must be built):
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-slot.test.mjs
//
// The agents that "forward every peer message" are the fake LLM's `@@relay [ids…]` directive: a session whose
// newest message carries it calls sessions_send to the next id of the list with the same line, so the relay
// travels on by itself until something stops it. KEEP_TMP=1 keeps the sandbox.
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync, readFileSync, writeFileSync, existsSync, renameSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, packAndInstall, bootWeb, initProfile, callTool, isIdle, turnEndCount, userTexts, printMetrics,
  messageText, waitForLog, FIXTURES, REPO_ROOT, sleep, esc,
} from './real-host/harness.mjs'

const SLOW = join(FIXTURES, 'slow-tool-plugin')
const OURS = ['send_session_message', 'sessions_list', 'sessions_read', 'sessions_send']

describe('dsh-session-mail in rc.8: the listing-slot features (issue 9)', () => {
  let box, web, ledgerFile, pdir
  let A, B, C, P, Q, R
  let repo, wt, other
  const m = {}

  /** The audit ledger's lines (the loop guard's authority). */
  const ledger = () => (existsSync(ledgerFile) ? readFileSync(ledgerFile, 'utf8').split('\n').filter(Boolean).map(l => JSON.parse(l)) : [])

  /** Wait until every listed session is idle and nothing new has started for `quietMs`. */
  async function quiet(ids, quietMs = 1500, timeout = 60_000) {
    const t0 = Date.now()
    let last = ''
    let since = Date.now()
    for (;;) {
      const hist = await Promise.all(ids.map(id => web.history(id)))
      const sig = hist.map(h => `${h.length}:${isIdle(h)}`).join('|')
      if (sig !== last) { last = sig; since = Date.now() }
      if (hist.every(isIdle) && Date.now() - since >= quietMs) return hist
      if (Date.now() - t0 > timeout) throw new Error(`not quiet after ${timeout} ms: ${sig}`)
      await sleep(100)
    }
  }

  /** The tool results (text) of one session's log for a tool name. */
  function toolResults(events, name) {
    const calls = new Map(events.filter(e => e.type === 'tool/call').map(e => [e.data.callId, e.data.name]))
    return events.filter(e => e.type === 'tool/result')
      .filter(e => calls.get(e.data?.message?.source?.callId) === name)
      .map(e => (e.data.message.content ?? []).filter(b => b.type === 'tool-result').flatMap(b => b.content ?? []).map(b => b.text ?? '').join(''))
  }

  before(async () => {
    box = await makeSandbox()
    pdir = initProfile(box, 'web')
    packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
    packAndInstall(pdir, SLOW, { mode: 'manual' })
    // one repository with a second worktree (gitfile gitdir + commondir, as `git worktree add` writes them)
    // and a third, unrelated repository
    repo = box.mkdir('repo')
    mkdirSync(join(repo, '.git', 'worktrees', 'wt'), { recursive: true })
    writeFileSync(join(repo, '.git', 'HEAD'), 'ref: refs/heads/main\n')
    writeFileSync(join(repo, '.git', 'worktrees', 'wt', 'commondir'), '../..\n')
    wt = box.mkdir('wt')
    writeFileSync(join(wt, '.git'), `gitdir: ${join(repo, '.git', 'worktrees', 'wt')}\n`)
    other = box.mkdir('other')
    mkdirSync(join(other, '.git'), { recursive: true })
    web = await bootWeb(box)
    m.webReadyMs = web.readyMs
    ledgerFile = join(box.home, 'dsh-session-mail', 'ledger.jsonl')
    A = await web.createSession(repo)
    B = await web.createSession(wt)
    C = await web.createSession(other)
    P = await web.createSession(box.mkdir('ws-p'))
    Q = await web.createSession(box.mkdir('ws-q'))
    R = await web.createSession(box.mkdir('ws-r'))
  })
  after(async () => {
    printMetrics('listing-slot', m)
    await box?.cleanup()
  })

  test('schema: the four tools as the real host sends them to the model cost ≤ 2.4 kB', async () => {
    await callTool(web, A, 'sessions_list', { limit: 1 })
    const req = box.llm.requestsFor(A).findLast(r => OURS.every(n => n in (r.toolBytes ?? {})))
    assert.ok(req, 'a model request that offered our four tools')
    const sizes = Object.fromEntries(OURS.map(n => [n, req.toolBytes[n]]))
    const total = OURS.reduce((s, n) => s + sizes[n], 0)
    m.schemaBytes = total
    m.schemaBytesPerTool = sizes
    assert.ok(total <= 2400, `the four tool definitions are ${total} bytes: ${JSON.stringify(sizes)}`)
  })

  test('loop guard: an A↔B ping-pong of forwarding agents stops at maxRelayHops (4), a human opens a new chain at once', async () => {
    const before = ledger().length
    await web.prompt(A, `forward this\n@@relay ${JSON.stringify([A, B])}`)
    const [hA] = await quiet([A, B])
    const lines = ledger().slice(before)
    const accepted = lines.filter(l => l.outcome === 'accepted')
    assert.deepEqual(accepted.map(l => [l.sender, l.target, l.hop]), [[A, B, 1], [B, A, 2], [A, B, 3], [B, A, 4]])
    assert.equal(new Set(accepted.map(l => l.chain)).size, 1, 'one chain')
    assert.equal(accepted[0].chain, accepted[0].requestId, 'the chain is named by its first delivery')
    const refused = lines.filter(l => l.outcome === 'refused:relay-limit')
    assert.deepEqual(refused.map(l => [l.sender, l.target]), [[A, B]], 'the fifth hop is refused, in A')
    const refusal = toolResults(hA, 'sessions_send').find(t => t.startsWith('refused (relay-limit)'))
    assert.match(refusal, /^refused \(relay-limit\): this would be agent-to-agent delivery 5 in one conversation chain .*the limit is 4 \(maxRelayHops\)/)
    assert.match(refusal, /Take the conclusion, or the open question, to your human instead\./)
    // every landed relay carries its hop in the frame for the receiving model (information only)
    const hB = await web.history(B)
    assert.ok(userTexts(hB).some(u => /\nrelay: hop 3 of 4 agent-to-agent deliveries in this chain\n/.test(u.text)))
    m.pingPongDeliveries = accepted.length
    // the human writes in A right after the storm: a new chain at once, not refused, not rate-limited
    const r = await callTool(web, A, 'sessions_send', { session_id: B, message: 'the human asks B something new' })
    assert.match(r.text, /^accepted for /, r.text)
    const mine = ledger().at(-1)
    assert.deepEqual([mine.outcome, mine.hop, mine.chain], ['accepted', 1, mine.requestId])
    await quiet([A, B], 800)
  })

  test('loop guard: a P→Q→R→P cycle counts as one chain and stops at the same cap', async () => {
    const before = ledger().length
    await web.prompt(P, `forward this\n@@relay ${JSON.stringify([P, Q, R])}`)
    const [, hQ] = await quiet([P, Q, R])
    const lines = ledger().slice(before)
    const accepted = lines.filter(l => l.outcome === 'accepted')
    assert.deepEqual(accepted.map(l => [l.sender, l.target, l.hop]), [[P, Q, 1], [Q, R, 2], [R, P, 3], [P, Q, 4]])
    assert.equal(new Set(accepted.map(l => l.chain)).size, 1)
    assert.deepEqual(lines.filter(l => l.outcome === 'refused:relay-limit').map(l => [l.sender, l.target]), [[Q, R]])
    assert.ok(toolResults(hQ, 'sessions_send').some(t => new RegExp(`^refused \\(relay-limit\\).* through ${esc(P)}, ${esc(Q)}, ${esc(R)}\\)`).test(t)))
    m.cycleDeliveries = accepted.length
  })

  test('loop guard (issue 16 #3 c): a turn a delivery opened stays agent-opened after 65 harness reminders steered into it (rc.8 agent-loop turn(): the claimed next-turn messages are the turn\'s first user messages)', async () => {
    // D (a human turn) sends E a message that makes E's model run a slow tool; while it runs, 65 user-role
    // `<system-reminder>` messages land in E's turn at its next step, the last one making E reply to D.
    // E's reply is hop 2 of D's chain (on main the delivery had left the 64-message window: hop 1, a new chain).
    // Two sessions of their own: session.history is a bounded window, and E's gets full of reminders.
    const D = await web.createSession(box.mkdir('ws-d'))
    const E = await web.createSession(box.mkdir('ws-e'))
    const first = await callTool(web, D, 'sessions_send', { session_id: E, message: '@@call slow_tool {"ms":5000}' })
    assert.match(first.text, /^accepted for /, first.text)
    await web.waitFor(E, ev => ev.some(e => e.type === 'tool/call' && e.data?.name === 'slow_tool'), { timeout: 20_000 })
    for (let i = 1; i <= 65; i++) {
      const last = i === 65 ? `\n@@call sessions_send ${JSON.stringify({ session_id: D, message: 'reply after the reminders' })}` : ''
      await web.prompt(E, `<system-reminder>reminder ${i}</system-reminder>${last}`, 'steer')
    }
    const t0 = Date.now()
    let reply
    while (!(reply = ledger().find(l => l.sender === E && l.target === D))) {
      if (Date.now() - t0 > 60_000) throw new Error('E never replied')
      await sleep(100)
    }
    const sent = ledger().find(l => l.sender === D && l.target === E)
    assert.deepEqual([reply.outcome, reply.hop, reply.chain], ['accepted', 2, sent.requestId])
    await web.waitFor(E, ev => ev.at(-1)?.type === 'turn/end', { timeout: 30_000 })
    // the host's log of E (session.history is a window): the 65 reminders landed after the delivery, in its turn
    const isReminder = e => e.type === 'user/message' && /^<system-reminder>reminder \d+/.test(messageText(e.data))
    const logE = await waitForLog(box.home, E, ev => ev.filter(isReminder).length === 65, { timeout: 20_000 })
    const landed = logE.find(e => e.type === 'user/message' && e.data?.source?.rpcId === sent.requestId)
    assert.ok(landed && logE.filter(isReminder).every(e => e.seq > landed.seq))
    assert.equal(logE.filter(e => e.type === 'turn/start' && e.seq > landed.seq).length, 0, 'one turn')
    await quiet([D], 800)
  })

  test('presence: a turn waiting on ask_user_question is listed as awaiting-user, with what a send does then', async () => {
    // the host's own web provider (packages/host/apiproxy: registerProvider → a pending question for the
    // browser) holds the ask open until a client answers or the human cancels the turn
    const ask = { questions: [{ id: 'q', question: 'Go on?', options: [{ label: 'yes' }, { label: 'no' }] }] }
    const ends = turnEndCount(await web.history(C))
    await web.prompt(C, `@@call ask_user_question ${JSON.stringify(ask)}`)
    await web.waitFor(C, ev => ev.some(e => e.type === 'tool/call' && e.data?.name === 'ask_user_question'), { timeout: 10_000 })
    const list = await callTool(web, A, 'sessions_list', {})
    const row = new RegExp(`^- ${esc(C)} \\[live, top-level, awaiting-user\\] .*\\| send: waiting on its human; steer lands once they answer, queue after that turn$`, 'm')
    assert.match(list.text, row, list.text)
    // the human cancels the turn from the UI (session.cancel): the ask is aborted, and the row is plain again
    assert.deepEqual(await web.rpc('session.cancel', { sessionId: C }), { accepted: true })
    await web.waitFor(C, ev => turnEndCount(ev) > ends, { timeout: 20_000 })
    const after = await callTool(web, A, 'sessions_list', {})
    assert.doesNotMatch(after.text, /awaiting-user/)
  })

  test('idle notice: lands once in the caller when a slow peer turn ends, and never wakes the idle peer', async () => {
    await quiet([A, B], 300)
    await web.prompt(B, '@@call slow_tool {"ms": 3000}')
    await web.waitFor(B, ev => ev.some(e => e.type === 'tool/call' && e.data?.name === 'slow_tool' && !ev.some(r => r.type === 'tool/result' && r.data?.message?.source?.callId === e.data.callId)), { timeout: 10_000 })
    const r = await callTool(web, A, 'sessions_send', { session_id: B, message: 'tell me when you are done', notify_when_idle: true })
    assert.match(r.text, /\nnote: idle notice set: one message arrives here when that session's running turn ends/, r.text)
    const notices = ev => userTexts(ev).filter(u => u.source?.plugin === 'dsh-session-mail' && u.source?.form === 'notice')
    const hA = await web.waitFor(A, ev => notices(ev).length > 0, { timeout: 30_000 })
    const n = notices(hA)
    assert.equal(n.length, 1)
    assert.match(n[0].text, new RegExp(`^Idle notice \\(dsh-session-mail\\): session ${esc(B)} finished its turn and is idle`))
    assert.match(n[0].source.rpcId, /^dsh-session-mail:notice:dsh-session-mail:/)
    const [hA2, hB2] = await quiet([A, B], 2000)
    assert.equal(notices(hA2).length, 1, 'one notice, not one per edge')
    // the notice went to the caller only: B took its slow turn and the one message A sent, and nothing else
    const bTurns = turnEndCount(hB2)
    await sleep(1000)
    assert.equal(turnEndCount(await web.history(B)), bTurns, 'the idle peer is not woken by the notice machinery')
    assert.equal(userTexts(hB2).filter(u => u.text.includes('tell me when you are done')).length, 1)
  })

  test('repository scope: two worktrees of one repository group together and rank first; a third repository does not', async () => {
    const all = await callTool(web, A, 'sessions_list', {})
    const ids = [...all.text.matchAll(/^- (\S+) \[/gm)].map(x => x[1])
    assert.ok(ids.indexOf(B) < ids.indexOf(C), `the worktree session ranks before the other repository's: ${ids}`)
    assert.match(all.text, new RegExp(`^- ${esc(B)} .* \\| same repo \\| `, 'm'))
    assert.doesNotMatch(all.text, new RegExp(`^- ${esc(C)} .*same repo`, 'm'))
    const scoped = await callTool(web, A, 'sessions_list', { repo_only: true })
    assert.match(scoped.text, new RegExp(`^- ${esc(B)} `, 'm'))
    assert.doesNotMatch(scoped.text, new RegExp(`${esc(C)}|${esc(P)}`))
  })

  test('file activity: after both worktree sessions edit one file, the peer row shows it and the overlap line', async () => {
    const a = await callTool(web, A, 'write', { file_path: join(repo, 'shared.md'), content: 'from A\n' })
    assert.equal(a.isError, false, a.text)
    const b = await callTool(web, B, 'write', { file_path: join(wt, 'shared.md'), content: 'from B\n' })
    assert.equal(b.isError, false, b.text)
    const list = await callTool(web, A, 'sessions_list', { repo_only: true })
    const block = list.text.split('\n- ').find(x => x.includes(B))
    assert.match(block, /\n {2}changed recently: shared\.md(\n|$)/, list.text)
    assert.match(block, /\n {2}overlap: you changed shared\.md recently too; coordinate before editing it further/, list.text)
  })

  test('Config switches: overlapNotice tells the session that writes an overlapping file; sendTools registers one send tool', async () => {
    // nothing was injected so far (the switch is off by default)
    assert.ok(!box.llm.requests().some(r => r.messages.some(x => x.content.startsWith('Overlap notice'))))
    // switch it on through the row's config override (rc.8 re-applies it live); the probe waits until the
    // override's maxSendChars token shows that the plugin runs with it
    const limit = 7123
    const file = join(pdir, 'cordis.patch.yml')
    writeFileSync(`${file}.tmp`, `- id: dsh-session-mail\n  config: ${JSON.stringify({ overlapNotice: true, sendTools: 'sessions_send', maxSendChars: limit })}\n`)
    renameSync(`${file}.tmp`, file)
    const t0 = Date.now()
    for (;;) {
      const r = await callTool(web, P, 'sessions_send', { session_id: 'session-00000000-0000-0000-0000-000000000000', message: 'x'.repeat(limit + 1) })
      if (r.text.includes(`the limit is ${limit} (maxSendChars)`)) break
      assert.ok(Date.now() - t0 < 20_000, `override not live: ${r.text}`)
      await sleep(150)
    }
    const b = await callTool(web, B, 'write', { file_path: join(wt, 'shared.md'), content: 'from B again\n' })
    assert.equal(b.isError, false, b.text)
    const seen = box.llm.requestsFor(B).flatMap(r => r.messages).filter(x => x.content.startsWith('Overlap notice (dsh-session-mail)'))
    assert.equal(new Set(seen.map(x => x.content)).size, 1, 'one notice')
    assert.match(seen[0].content, new RegExp(`shared\\.md \\(also changed by ${esc(A)}\\)`))
    // sendTools: 'sessions_send' — the model is offered three of our tools, without send_session_message
    const last = box.llm.requestsFor(B).at(-1)
    assert.ok(last.tools.includes('sessions_send') && !last.tools.includes('send_session_message'), JSON.stringify(last.tools))
    m.schemaBytesOneSendTool = ['sessions_list', 'sessions_read', 'sessions_send'].reduce((n, t) => n + last.toolBytes[t], 0)
  })

  test('since_seq: a read since an earlier read shows only the new messages', async () => {
    const first = await callTool(web, A, 'sessions_read', { session_id: C })
    const seq = Number(/captured through seq: (\d+)/.exec(first.text)?.[1])
    assert.ok(seq > 0, first.text)
    await callTool(web, C, 'sessions_list', { limit: 1 }, { prefix: 'NEWS AFTER THE FIRST READ' })
    await quiet([C], 300)
    const delta = await callTool(web, A, 'sessions_read', { session_id: C, since_seq: seq })
    assert.match(delta.text, new RegExp(`\\nreadable messages: \\d+ after seq ${seq} \\| captured through seq: \\d+\\n`))
    assert.match(delta.text, /NEWS AFTER THE FIRST READ/)
    assert.doesNotMatch(delta.text, /Go on\?|ask_user_question/, 'nothing from before the first read')
    for (const s of delta.text.matchAll(/^--- \w+ \(seq (\d+),/gm)) assert.ok(Number(s[1]) > seq)
    m.deltaReadBytes = delta.text.length
    m.fullReadBytes = (await callTool(web, A, 'sessions_read', { session_id: C })).text.length
  })
})
