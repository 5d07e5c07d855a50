// Pure parts of the listing-slot features (issue 9) in the shim: awaiting-user and file activity folded from
// session events, the idle-notice bounds, and the sendTools switch. The behaviour in the real host is proven
// by test/real-host-slot.test.mjs; these pin the edge cases a real host run cannot reach cheaply.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { callerOf, followSessions, liveAgents } from '../lib/host.js'
import { IdleNotices } from '../lib/notice.js'

const NOTICE_PREFIX = 'dsh-session-mail:notice:'
/** Reads of a session's event array (must stay 0). */
const logReads = { n: 0 }
/** A plugin context whose sessions publish `events` on `session/event` as the host does (rc.8 Session.append). */
function published(events, { id = 's', status = 'running' } = {}) {
  const listeners = []
  // the shim must never read the log out of the host (rc.8 `events` copies it, 0.1.7 `snapshotEvents` is deprecated)
  const session = { id, get events() { logReads.n++; return [] }, snapshotEvents() { logReads.n++; return [] } }
  const ctx = { on: (name, fn) => listeners.push([name, fn]), agents: { list: () => [{ id, status, session }] } }
  followSessions(ctx)
  const emit = e => listeners.filter(([k]) => k === 'session/event').forEach(([, fn]) => fn(session, e))
  for (const e of events) emit(e)
  return { ctx, session, emit, listeners }
}
/** The shim's view of one running agent whose session published these events (lib/host.js liveAgents). */
const liveOf = events => liveAgents(published(events).ctx)[0]
const awaitingUser = events => liveOf(events).status === 'awaiting-user'
const fileActivityOf = events => liveOf(events).files
const turnMessagesOf = events => {
  const { ctx, session } = published(events)
  return callerOf({ agent: { id: session.id, session } }, { sessions: followSessions(ctx) }).turn
}
import { toolSpecs } from '../lib/tools.js'
import { installOverlapNotice } from '../lib/overlap.js'

const call = (seq, name, callId, args) => ({ type: 'tool/call', seq, time: Date.now(), data: { callId, name, arguments: JSON.stringify(args) } })
const result = (seq, callId, isError = false) => ({ type: 'tool/result', seq, time: Date.now(), data: { message: { role: 'user', source: { kind: 'tool', callId }, content: [{ type: 'tool-result', isError, content: [] }] } } })

test('awaiting-user: an open approval or a pending ask_user_question in the running turn, nothing else', () => {
  const start = { type: 'turn/start', seq: 1 }
  assert.equal(awaitingUser([start, { type: 'approval/asked', seq: 2, data: { id: 'a1' } }]), true)
  assert.equal(awaitingUser([start, { type: 'approval/asked', seq: 2, data: { id: 'a1' } }, { type: 'approval/decided', seq: 3, data: { id: 'a1' } }]), false)
  assert.equal(awaitingUser([start, call(2, 'ask_user_question', 'c1', {})]), true)
  assert.equal(awaitingUser([start, call(2, 'ask_user_question', 'c1', {}), result(3, 'c1')]), false)
  // an ask of an earlier turn does not count
  assert.equal(awaitingUser([call(0, 'ask_user_question', 'c0', {}), start, call(2, 'bash', 'c1', {})]), false)
  assert.equal(awaitingUser([]), false)
})

test('file activity: successful write/edit calls, newest first, deduplicated; views and failures ignored', () => {
  const ev = [
    call(1, 'write', 'w1', { file_path: '/r/a.md', content: 'x' }), result(2, 'w1'),
    call(3, 'edit', 'e1', { file_path: 'src/b.rs' }), result(4, 'e1', true),
    call(5, 'str_replace_editor', 's1', { command: 'view', path: '/r/c' }), result(6, 's1'),
    call(7, 'str_replace_editor', 's2', { command: 'str_replace', path: '/r/d' }), result(8, 's2'),
    call(9, 'write', 'w2', { file_path: '/r/a.md' }), result(10, 'w2'),
    call(11, 'write', 'w3', { file_path: '/r/pending' }),
  ]
  assert.deepEqual(fileActivityOf(ev).map(f => f.path), ['/r/a.md', '/r/d'])
  // older than 30 minutes: not recent
  const old = ev.map(e => ({ ...e, time: Date.now() - 31 * 60_000 }))
  assert.deepEqual(fileActivityOf(old), [])
  // 0.1.7 names the call on the result message as `toolCallId` (peer-sessions/src/index.ts observeSessionEvent)
  const v017 = { type: 'tool/result', seq: 2, time: Date.now(), data: { message: { role: 'tool', toolCallId: 'w9', isError: false, content: [] } } }
  assert.deepEqual(fileActivityOf([call(1, 'edit', 'w9', { file_path: 'src/x.rs' }), v017]).map(f => f.path), ['src/x.rs'])
})

test('idle notice for a target whose turn with the message already ended: fires at once, from the published events', async () => {
  const { ctx, emit } = published([], { id: 'peer', status: 'idle' })
  const delivered = []
  const agents = new Map([['peer', { id: 'peer', status: 'idle', session: { id: 'peer', seq: 9 } }], ['me', { id: 'me', followup: m => delivered.push(m) }]])
  ctx.agents.get = id => agents.get(id)
  const n = new IdleNotices(ctx, { sessions: followSessions(ctx) })
  emit({ type: 'turn/start', seq: 5 })
  emit({ type: 'user/message', seq: 6, data: { source: { kind: 'user', rpcId: 'dsh-session-mail:r7' }, content: [{ type: 'text', text: 'hi' }] } })
  n.watch({ watcher: 'me', target: 'peer', requestId: 'dsh-session-mail:r7' })
  await new Promise(resolve => setImmediate(resolve))
  assert.equal(delivered.length, 0, 'the turn has not ended yet')
  emit({ type: 'turn/end', seq: 7 })
  n.watch({ watcher: 'me2', target: 'peer', requestId: 'dsh-session-mail:r7' })
  agents.set('me2', { id: 'me2', followup: m => delivered.push(m) })
  await new Promise(resolve => setImmediate(resolve))
  assert.equal(delivered.length, 1)
  assert.equal(delivered[0].source.rpcId, `${NOTICE_PREFIX}dsh-session-mail:r7`)
})

test('the loop guard evidence: user messages of the current turn only, newest last; none for a turn not seen whole', () => {
  const um = (seq, source, text) => ({ type: 'user/message', seq, data: { message: { role: 'user', source, content: [{ type: 'text', text }] } } })
  const events = [um(0, { kind: 'user' }, 'old'), { type: 'turn/end', seq: 1 }, { type: 'turn/start', seq: 2 }, um(3, { kind: 'user', rpcId: 'dsh-session-mail:x' }, 'framed')]
  assert.deepEqual(turnMessagesOf(events), [{ seq: 3, kind: 'user', rpcId: 'dsh-session-mail:x', plugin: null, form: null, text: 'framed' }])
  // first seen mid-turn (the plugin mounted while it ran): unknown, not "the human", until the next turn
  assert.equal(turnMessagesOf([um(5, { kind: 'user', rpcId: 'dsh-session-mail:y' }, 'relay')]), null)
  assert.deepEqual(turnMessagesOf([um(5, { kind: 'user' }, 'a'), { type: 'turn/start', seq: 6 }, um(7, { kind: 'user' }, 'b')]).map(m => m.text), ['b'])
  assert.equal(callerOf({ agent: { id: 'z', session: { id: 'z' } } }, { sessions: followSessions({ on: () => {} }) }).turn, null)
})

test('session state is bounded and dropped with its agent', () => {
  const { ctx, emit, listeners } = published([{ type: 'turn/start', seq: 0 }])
  const sessions = followSessions(ctx)
  for (let i = 0; i < 500; i++) emit({ type: 'user/message', seq: i + 1, data: { source: { kind: 'user' }, content: [{ type: 'text', text: 'x'.repeat(500) }] } })
  const turn = sessions.turnOf('s')
  assert.equal(turn.length, 64)
  assert.equal(turn.at(-1).seq, 500)
  assert.equal(turn[0].text.length, 80)
  listeners.filter(([k]) => k === 'agent/disposed').forEach(([, fn]) => fn({ agent: { id: 's', session: { id: 's' } } }))
  assert.equal(sessions.turnOf('s'), null)
  assert.equal(sessions.states.size, 0)
})

test('no tool path reads a session\'s event array (every test above ran through published events)', () => {
  assert.equal(logReads.n, 0)
})

test('idle notices: the facts only the shim knows (one per pair, the pending count, expiry), once, dropped when the caller is gone', async () => {
  const listeners = []
  const delivered = []
  const agents = new Map()
  let now = 1_000_000
  const ctx = { on: (name, fn) => listeners.push([name, fn]), agents: { get: id => agents.get(id) } }
  const peer = { id: 'peer', status: 'running', session: { seq: 40, events: [] } }
  agents.set('peer', peer)
  agents.set('me', { id: 'me', followup: m => delivered.push(m) })
  const n = new IdleNotices(ctx, { maxWatches: 2, ttlMs: 60_000, now: () => now })
  const emit = status => listeners.filter(([k]) => k === 'agent/status').forEach(([, fn]) => fn({ agent: peer, status }))
  // what the core decides with (crates/core/src/mail/notice.rs `decide`; the binding adds whether the target is live here)
  assert.deepEqual(n.factsFor({ watcher: 'me', target: 'peer', turn: [] }), { hasWatcher: true, turn: [], alreadyPending: false, pending: 0, maxWatches: 2, ttlMs: 60_000 })
  assert.deepEqual(n.factsFor({ watcher: null, target: 'peer', turn: 'not a turn' }), { hasWatcher: false, turn: null, alreadyPending: false, pending: 0, maxWatches: 2, ttlMs: 60_000 })
  n.watch({ watcher: 'me', target: 'peer', requestId: 'dsh-session-mail:r1' })
  assert.equal(n.factsFor({ watcher: 'me', target: 'peer', turn: [] }).alreadyPending, true, 'one per pair')
  assert.equal(n.factsFor({ watcher: 'other', target: 'peer', turn: [] }).alreadyPending, false)
  assert.equal(n.factsFor({ watcher: 'other', target: 'peer', turn: [] }).pending, 1)
  emit('idle')
  emit('running')
  emit('idle')
  assert.equal(delivered.length, 1, 'once')
  assert.equal(delivered[0].source.rpcId, `${NOTICE_PREFIX}dsh-session-mail:r1`)
  assert.match(delivered[0].content[0].text, /"since_seq": 39/)
  assert.ok(Object.isFrozen(delivered[0]) && Object.isFrozen(delivered[0].content[0]), 'frozen like the host\'s own messages')
  assert.equal(n.factsFor({ watcher: 'me', target: 'peer', turn: [] }).pending, 0, 'a fired notice is no longer pending')
  // the caller is gone by the time the peer idles: dropped, nothing thrown
  agents.delete('me')
  n.watch({ watcher: 'me', target: 'peer', requestId: 'r3' })
  emit('running'); emit('idle')
  assert.equal(delivered.length, 1)
  // expired: no longer counted, never delivered
  agents.set('me', { id: 'me', followup: m => delivered.push(m) })
  n.watch({ watcher: 'me', target: 'peer', requestId: 'r4' })
  now += 60_001
  assert.equal(n.factsFor({ watcher: 'me', target: 'peer', turn: [] }).pending, 0, 'expired watches are pruned')
  emit('running'); emit('idle')
  assert.equal(delivered.length, 1)
})

test('sendTools registers one send tool when asked', () => {
  assert.deepEqual(toolSpecs().map(s => s.name), ['send_session_message', 'sessions_list', 'sessions_read', 'sessions_send'])
  assert.deepEqual(toolSpecs({ sendTools: 'sessions_send' }).map(s => s.name), ['sessions_list', 'sessions_read', 'sessions_send'])
  assert.deepEqual(toolSpecs({ sendTools: 'send_session_message' }).map(s => s.name), ['send_session_message', 'sessions_list', 'sessions_read'])
})

test('overlap notice (opt-in): once per (session, peer, path), only after a successful write, as additional context', async () => {
  let listener
  const ctx = { on: (name, fn) => { if (name === 'tools/post-execute') listener = fn } }
  let rows = [{ id: 'peer', overlap: ['src/a.rs'] }]
  installOverlapNotice(ctx, async () => rows)
  const agent = { id: 'me' }
  const next = async () => ({ kind: 'continue', additionalContexts: [{ id: 'theirs' }] })
  const first = await listener({ name: 'write', agent, arguments: { file_path: '/r/src/a.rs' } }, { isError: false }, next)
  assert.equal(first.additionalContexts.length, 2)
  assert.match(first.additionalContexts[0].content[0].text, /^Overlap notice \(dsh-session-mail\): .*src\/a\.rs \(also changed by peer\)/)
  assert.deepEqual({ ...first.additionalContexts[0].source }, { kind: 'plugin', plugin: 'dsh-session-mail', form: 'notice', summary: 'file overlap with a peer' })
  assert.match(first.additionalContexts[0].content[0].text, /\(also changed by peer\)\. Coordinate \(sessions_read \/ sessions_send\) before editing it further\.$/)
  assert.equal(first.additionalContexts[1].id, 'theirs', 'other listeners keep their context')
  // told once; a failed write, a read tool, a view: nothing
  const edit = { file_path: '/r/src/b.rs' }
  assert.equal((await listener({ name: 'write', agent, arguments: { file_path: '/r/src/a.rs' } }, {}, next)).additionalContexts.length, 1)
  rows = [{ id: 'peer', overlap: ['src/a.rs', 'src/b.rs'] }]
  assert.equal((await listener({ name: 'edit', agent, arguments: edit }, { isError: true }, next)).additionalContexts.length, 1)
  assert.equal((await listener({ name: 'read', agent, arguments: edit }, {}, next)).additionalContexts.length, 1)
  assert.equal((await listener({ name: 'str_replace_editor', agent, arguments: { command: 'view', path: '/r/src/b.rs' } }, {}, next)).additionalContexts.length, 1)
  // a write that names no file changed none (the rule file activity uses: lib/observe.js writtenPath)
  assert.equal((await listener({ name: 'edit', agent, arguments: {} }, {}, next)).additionalContexts.length, 1)
  const second = await listener({ name: 'edit', agent, arguments: JSON.stringify(edit) }, {}, next)
  assert.match(second.additionalContexts[0].content[0].text, /src\/b\.rs/)
  assert.doesNotMatch(second.additionalContexts[0].content[0].text, /src\/a\.rs/)
})

test('idle notices look the agent registry up once, and again when cordis reports the agents service replaced', () => {
  const listeners = []
  const delivered = []
  const peer = { id: 'peer', status: 'running', session: { seq: 3 } }
  let registry = new Map([['peer', peer], ['me', { id: 'me', followup: m => delivered.push(['old', m]) }]])
  let lookups = 0
  const ctx = {
    on: (name, fn) => listeners.push([name, fn]),
    get agents() { lookups++; const r = registry; return { get: id => r.get(id) } },
  }
  const n = new IdleNotices(ctx, { ttlMs: 60_000 })
  const emit = (name, ...args) => listeners.filter(([k]) => k === name).forEach(([, fn]) => fn(...args))
  n.watch({ watcher: 'me', target: 'peer', requestId: 'dsh-session-mail:m1' })
  emit('agent/status', { agent: peer, status: 'idle' })
  assert.deepEqual(delivered.map(([r]) => r), ['old'])
  assert.equal(lookups, 1, 'the watch and the notice share one lookup')
  // the registry replaced at runtime: cordis says so (internal/service), and the next notice goes to the new one
  registry = new Map([['peer', peer], ['me', { id: 'me', followup: m => delivered.push(['new', m]) }]])
  emit('internal/service', 'agents')
  n.watch({ watcher: 'me', target: 'peer', requestId: 'dsh-session-mail:m2' })
  emit('agent/status', { agent: peer, status: 'running' })
  emit('agent/status', { agent: peer, status: 'idle' })
  assert.deepEqual(delivered.map(([r]) => r), ['old', 'new'])
  assert.equal(delivered[1][1].source.rpcId, `${NOTICE_PREFIX}dsh-session-mail:m2`)
  assert.equal(lookups, 2)
})
