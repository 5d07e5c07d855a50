// The holder's hand-back at stop (lib/mailbox.js startHandBack over crates/core/src/mailbox/queued.rs), with the
// real core and a host double: at the signal the host handles, before the host's own handler runs, every
// pending message of this plugin is written back to the target's mailbox shard with its hand-back; a notice
// or another plugin's message is not; a process whose host does not handle the signal gets no listener. From the
// signal on, the host's clear itself hands back what it takes of ours (a message accepted after the signal too), a
// dispose before that clear hands back as the stop's, and the drain delivers nothing more into the process.
// The re-delivery rules are in the Rust tests (mailbox::queued::tests); the real rc.8 proof is
// test/real-host-lost.test.mjs.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { EventEmitter } from 'node:events'
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomUUID } from 'node:crypto'
import { startHandBack, startMailbox } from '../lib/mailbox.js'

const core = createRequire(import.meta.url)('../binding.cjs')
const STARTED = 4321

function home(t) {
  const h = mkdtempSync(join(tmpdir(), 'held-'))
  t.after(() => rmSync(h, { recursive: true, force: true }))
  return h
}

const msg = (rpcId, text) => ({ id: randomUUID(), role: 'user', content: [{ type: 'text', text }], source: { kind: 'user', rpcId } })

function hostDouble() {
  const ours = `dsh-session-mail:${randomUUID()}`
  const steer = `dsh-session-mail:${randomUUID()}`
  const agent = {
    id: 'session-b',
    session: { seq: 41 },
    inbox: {
      nextTurn: [msg(ours, 'From session-a ：\nqueued'), msg('other-plugin:1', 'not ours'), msg(`dsh-session-mail:notice:${ours}`, 'a notice')],
      nextStep: [msg(steer, 'From session-a ：\nsteered')],
    },
  }
  const listeners = []
  const ctx = {
    agents: { list: () => [agent], get: id => (id === agent.id ? agent : undefined) },
    on: (name, fn) => { listeners.push([name, fn]); return () => listeners.splice(listeners.findIndex(([, f]) => f === fn), 1) },
    /** A splice of B's inbox as rc.8 publishes it: observers first, then the list changes (inbox.ts `mutate`). */
    splice(seq, target, start, removedCount, outcome) {
      for (const [name, fn] of [...listeners]) {
        if (name === 'session/event') fn(agent.session, { type: 'agent/inbox/spliced', seq, data: { target, start, removedCount, inserted: [], ...(outcome ? { outcome } : {}) } })
      }
      const list = target === 'next-step' ? agent.inbox.nextStep : agent.inbox.nextTurn
      list.splice(start, removedCount)
    },
    listenerCount: () => listeners.length,
  }
  agent.session.id = agent.id
  return { ctx, agent, ours, steer }
}

const shardOf = h => join(h, 'dsh-session-mail', 'mailbox', 'session-b')
const recordOf = (h, id) => JSON.parse(readFileSync(join(shardOf(h), `${id.slice('dsh-session-mail:'.length)}.held-${process.pid}`), 'utf8'))

test('at SIGTERM the pending messages are handed back before the host\'s own handler runs; dispose after that writes nothing more', (t) => {
  const h = home(t)
  const { ctx, agent, ours, steer } = hostDouble()
  const proc = new EventEmitter()
  let seenByHost = null
  // the host's handler, installed first (apps/cli/src/profile-boot.ts): it clears the inbox, as disposal does
  proc.on('SIGTERM', () => {
    seenByHost = readdirSync(join(h, 'dsh-session-mail', 'mailbox', 'session-b')).filter(n => n.includes('.held-')).length
    agent.inbox.nextTurn = []
    agent.inbox.nextStep = []
  })
  const stop = startHandBack(ctx, core, { startedAt: STARTED, dshHome: () => h, proc })
  proc.emit('SIGTERM')
  assert.equal(seenByHost, 2, 'both records were written before the host\'s handler ran')
  const dir = join(h, 'dsh-session-mail', 'mailbox', 'session-b')
  const rec = id => JSON.parse(readFileSync(join(dir, `${id.slice('dsh-session-mail:'.length)}.held-${process.pid}`), 'utf8'))
  const q = rec(ours)
  assert.equal(q.text, 'From session-a ：\nqueued')
  assert.equal(q.mode, 'queue')
  assert.equal(q.holderPid, process.pid)
  assert.equal(q.holderStartedAt, STARTED)
  assert.deepEqual({ seq: q.handedBack.seq, why: q.handedBack.why }, { seq: 41, why: 'stop' })
  assert.equal(rec(steer).mode, 'steer')
  assert.equal(rec(steer).text, 'From session-a ：\nsteered')
  // a notice and another plugin's message are not handed back: only the two records
  assert.deepEqual(readdirSync(dir).filter(n => n.includes('.held-')).sort(),
    [ours, steer].map(id => `${id.slice('dsh-session-mail:'.length)}.held-${process.pid}`).sort())
  stop()
  assert.equal(proc.listenerCount('SIGTERM'), 1, 'its listener is gone, the host\'s stays')
  assert.equal(readdirSync(dir).filter(n => n.includes('.held-')).length, 2)
})

test('a process whose host does not handle the signals gets no listener of ours; dispose hands back as an unmount', (t) => {
  const h = home(t)
  const { ctx, ours } = hostDouble()
  const proc = new EventEmitter()
  const stop = startHandBack(ctx, core, { startedAt: STARTED, dshHome: () => h, proc })
  assert.equal(proc.listenerCount('SIGTERM') + proc.listenerCount('SIGINT'), 0)
  stop()
  const dir = join(h, 'dsh-session-mail', 'mailbox', 'session-b')
  const q = JSON.parse(readFileSync(join(dir, `${ours.slice('dsh-session-mail:'.length)}.held-${process.pid}`), 'utf8'))
  assert.equal(q.handedBack.why, 'unmount')
})

test('after the signal, the clear itself hands back what it takes of ours, a message accepted after the signal too, with the clear\'s seq; before it, a cancel hands back nothing', (t) => {
  const h = home(t)
  const { ctx, agent, ours } = hostDouble()
  const proc = new EventEmitter()
  proc.on('SIGTERM', () => {}) // the host's handler: its disposal comes later (75–370 ms in rc.8)
  const stop = startHandBack(ctx, core, { startedAt: STARTED, dshHome: () => h, proc })
  // the human's row delete while the process runs: nothing written
  const deleted = agent.inbox.nextStep[0].source.rpcId
  ctx.splice(42, 'next-step', 0, 1, 'canceled')
  assert.throws(() => readdirSync(shardOf(h)), /ENOENT/, 'a cancel before any stop writes no record')
  proc.emit('SIGTERM')
  assert.equal(recordOf(h, ours).handedBack.seq, 41)
  // the host's route still accepts one after the signal (the disposal has not reached the agent yet) …
  const late = `dsh-session-mail:${randomUUID()}`
  agent.inbox.nextTurn.push(msg(late, 'From session-a ：\naccepted after the signal'))
  // … a turn claims nothing (a claim is no cancel) …
  ctx.splice(44, 'next-turn', 1, 1)
  // … then the disposal clears the inbox: everything of ours it takes is handed back at that seq
  ctx.splice(57, 'next-turn', 0, agent.inbox.nextTurn.length, 'canceled')
  const r = recordOf(h, late)
  assert.deepEqual({ text: r.text, seq: r.handedBack.seq, why: r.handedBack.why, holder: r.holderPid }, { text: 'From session-a ：\naccepted after the signal', seq: 57, why: 'stop', holder: process.pid })
  assert.equal(recordOf(h, ours).handedBack.seq, 57)
  assert.ok(!readdirSync(shardOf(h)).some(n => n.startsWith(deleted.slice('dsh-session-mail:'.length))), 'the row the human deleted before the stop is not handed back')
  stop()
  assert.equal(ctx.listenerCount(), 0, 'its observer is gone with the plugin')
})

test('a dispose that comes after the signal but before the agents\' clear hands back what is pending as the stop\'s, not as an unmount', (t) => {
  const h = home(t)
  const { ctx, agent, ours } = hostDouble()
  const proc = new EventEmitter()
  proc.on('SIGTERM', () => {})
  const stop = startHandBack(ctx, core, { startedAt: STARTED, dshHome: () => h, proc })
  proc.emit('SIGTERM')
  const late = `dsh-session-mail:${randomUUID()}`
  agent.inbox.nextTurn.push(msg(late, 'From session-a ：\nlate'))
  agent.session.seq = 50
  stop()
  assert.deepEqual({ seq: recordOf(h, late).handedBack.seq, why: recordOf(h, late).handedBack.why }, { seq: 50, why: 'stop' })
  assert.equal(recordOf(h, ours).handedBack.why, 'stop')
})

test('once the signal came, the drain delivers nothing more into this process: a claimed envelope goes back to the mailbox', async (t) => {
  const h = home(t)
  const { ctx, agent } = hostDouble()
  const proc = new EventEmitter()
  proc.on('SIGTERM', () => {})
  startHandBack(ctx, core, { startedAt: STARTED, dshHome: () => h, proc })
  const followed = []
  agent.followup = m => followed.push(m)
  agent.steer = m => followed.push(m)
  let released
  const done = new Promise(r => { released = r })
  const env = { requestId: `dsh-session-mail:${randomUUID()}`, sessionId: agent.id, mode: 'queue', text: 'From session-a ：\nhi', landed: false }
  const spy = {
    // the signal arrives while the drain's claim is on the worker pool
    mailboxDrain: async () => { proc.emit('SIGTERM'); return [env] },
    mailboxRelease: async (s, r) => released([s, r]),
    mailboxSettle: async () => assert.fail('nothing is settled as delivered'),
  }
  const stopMailbox = startMailbox(ctx, spy, { startedAt: STARTED, dshHome: () => h })
  t.after(stopMailbox)
  assert.deepEqual(await done, [env.sessionId, env.requestId])
  assert.deepEqual(followed, [])
})
