// The holder's hand-back at stop (lib/mailbox.js startHandBack over crates/core/src/mailbox/queued.rs), with the
// real core and a host double: at the signal the host handles, before the host's own handler runs, every
// pending message of this plugin is written back to the target's mailbox shard with its hand-back; a notice
// or another plugin's message is not; a process whose host does not handle the signal gets no listener.
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
import { startHandBack } from '../lib/mailbox.js'

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
  return { ctx: { agents: { list: () => [agent] } }, agent, ours, steer }
}

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
