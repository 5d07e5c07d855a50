#!/usr/bin/env node
// `node bench/dispatch.mjs`: what the plugin's `session/event` observers cost the host's main thread per event,
// measured through the host's own dispatch: real cordis 4 (the host's peer, linked by scripts/link-host-peers.mjs),
// and rc.8's path for every appended event (packages/core/session/src/index.ts: `collectSessionCallbacks` =
// `[...ctx.events.dispatch('emit', ['session/event', session, event])]`, then `invokeContainedSessionObservers`:
// each callback called in a try, its return wrapped in `Promise.resolve(…).catch(…)`). cordis calls each listener
// through its tracing proxy (`bind`). A listener costs that wrapping on every event, whatever it does.
//
// Rows (each the p50 over --rounds interleaved rounds of --n events, µs per event):
//   k listeners        k no-op listeners on one plugin context (k = 0..4): the dispatch alone, and the price of one
//                      more listener
//   plugin             the plugin's observers as lib/ registers them now (lib/observe.js fold, lib/presence.js,
//                      lib/mailbox.js drain and hand-back), over a realistic event mix; their listener count
// The event mix: a queued message's life in rc.8 (inbox insert, claim splice, turn/start, step/start, user/message,
// assistant/message, step/end, turn/end) for session ids cycling over 4 live sessions.
import { Context } from '@deepseek-ai/cordis'
import { followSessions } from '../lib/host.js'
import { startPresence } from '../lib/presence.js'
import { startHandBack, startMailbox } from '../lib/mailbox.js'
import { EventEmitter } from 'node:events'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const argv = process.argv.slice(2)
const opt = (name, dflt) => argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : dflt
const N = opt('--n', 20_000)
const ROUNDS = opt('--rounds', 15)
const q50 = xs => [...xs].sort((a, b) => a - b)[xs.length >> 1]

/** A plugin context of a fresh cordis root (its registry double: `agents` with 4 live sessions). */
async function pluginCtx () {
  const root = new Context()
  let ctx
  await root.plugin({ name: 'dsh-session-mail-dispatch-bench', apply (c) { ctx = c } })
  return { root, ctx }
}

const ids = ['session-a', 'session-b', 'session-c', 'session-d']
const sessions = ids.map(id => ({ id, seq: 1 }))
const msg = i => ({ id: `m${i}`, role: 'user', content: [{ type: 'text', text: `From session-x ：\nburst ${i}` }], source: { kind: 'user', rpcId: `dsh-session-mail:${i}` } })
/** The events of one queued message's life (rc.8 agent-loop and inbox), for session `k`. */
const life = (i, k) => [
  { type: 'agent/inbox/spliced', seq: 1, data: { target: 'next-turn', start: 0, removedCount: 0, inserted: [msg(i)] } },
  { type: 'agent/inbox/spliced', seq: 2, data: { target: 'next-turn', start: 0, removedCount: 1, inserted: [] } },
  { type: 'turn/start', seq: 3, data: { turn: i } },
  { type: 'step/start', seq: 4, data: { step: 0 } },
  { type: 'user/message', seq: 5, data: msg(i) },
  { type: 'assistant/message', seq: 6, data: { message: { role: 'assistant', content: [{ type: 'text', text: 'ok' }] } } },
  { type: 'step/end', seq: 7, data: {} },
  { type: 'turn/end', seq: 8, data: { turn: i } },
].map(e => [sessions[k], e])
const mix = []
for (let i = 0; i < 64; i++) mix.push(...life(i, i % 4))

/** rc.8's dispatch of one appended event to the listeners of `root`. */
function append (root, session, event) {
  const callbacks = [...root.events.dispatch('emit', ['session/event', session, event])]
  for (const callback of callbacks) {
    try {
      const returned = callback(session, event)
      Promise.resolve(returned).catch(() => {})
    } catch {}
  }
}

function time (root) {
  const t0 = performance.now()
  for (let i = 0; i < N; i++) { const [s, e] = mix[i % mix.length]; append(root, s, e) }
  return ((performance.now() - t0) * 1000) / N
}

const variants = []
for (let k = 0; k <= 4; k++) {
  const { root, ctx } = await pluginCtx()
  for (let j = 0; j < k; j++) ctx.on('session/event', () => {})
  variants.push({ name: `${k} no-op listener${k !== 1 ? 's' : ''}`, root, listeners: k })
}
const home = mkdtempSync(join(tmpdir(), 'dispatch-bench-'))
{
  const { root, ctx } = await pluginCtx()
  // the registry the plugin reads (its mailbox's claim splice looks the agent up)
  const agents = ids.map(id => ({ id, status: 'running', session: sessions[ids.indexOf(id)], inbox: { nextTurn: [msg(0)], nextStep: [] } }))
  root.provide('agents', { list: () => agents, get: id => agents.find(a => a.id === id) }, true)
  // the timers of presence and the mailbox never fire during the timed loops (an hour; the core is not called)
  const core = { publishPresence: async () => true, mailboxDrain: async () => [], queuedHandBack: () => {} }
  followSessions(ctx)
  const stops = [
    startPresence(ctx, core, { hostVersion: '0.1.0-rc.8', baseUrl: () => null, dshHome: () => home, refreshMs: 3_600_000, debounceMs: 3_600_000 }),
    startHandBack(ctx, core, { startedAt: 1, dshHome: () => home, proc: new EventEmitter() }),
    startMailbox(ctx, core, { startedAt: 1, dshHome: () => home }),
  ]
  const listeners = [...root.events.dispatch('emit', ['session/event', sessions[0], { type: 'x' }])].length
  variants.push({ name: 'plugin (lib/ as it is)', root, listeners, stops })
}
const results = variants.map(() => [])
for (const v of variants) time(v.root) // warm-up
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 ? [...variants.keys()].reverse() : [...variants.keys()]
  for (const i of order) results[i].push(time(variants[i].root))
}
console.log(`\nthe host's dispatch of one session/event (real cordis, rc.8's path), µs per event, p50 of ${ROUNDS} rounds × ${N} events`)
console.log('| observers | listeners on session/event | µs per event |')
console.log('|---|---|---|')
variants.forEach((v, i) => console.log(`| ${v.name} | ${v.listeners} | ${q50(results[i]).toFixed(2)} |`))
const per = (q50(results[4]) - q50(results[1])) / 3
const plugin = q50(results.at(-1)) - q50(results[0])
console.log(`one more listener: ${per.toFixed(2)} µs per event (the 1 → 4 no-op rows ÷ 3); the plugin's observers: ${plugin.toFixed(2)} µs per event over the dispatch with none`)
for (const v of variants) for (const s of v.stops ?? []) s()
rmSync(home, { recursive: true, force: true })
process.exit(0)
