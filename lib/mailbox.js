// The owner's half of the mailbox (crates/core/src/mailbox): a send to a session live in this process
// from a process that cannot reach it over HTTP (this profile has no web server) is posted as a file
// under $DSH_HOME/dsh-session-mail/mailbox/<session>/. Every DRAIN_MS this process asks the core (on a
// worker thread) for the envelopes of the sessions it holds live, delivers each in-process, flushes the
// session, and has the core write the receipt the sender waits for. The file work, the claim and the
// hostile-input checks are the core's; this file only talks to the host.
import { attempt } from './attempt.js'
import { flushSession, pendingOf, service, serviceMemo, userMessage } from './host.js'
import { resolveDshHome } from './home.js'
import { onSessionEvent } from './observe.js'

const DRAIN_MS = 250
/** Every how many ticks a cold session a lost message waits for is looked for (about once a second). */
const WAKE_EVERY = 4
/** Every how many ticks the records of gone holders' landed messages are swept (about every 10 s). */
const SWEEP_EVERY = 40
const PROMPT_TIMEOUT_MS = 5000
const FLUSH_TIMEOUT_MS = 1000
/** Request ids this process delivered (a claim it could not settle comes back: never delivered twice). */
const REMEMBER = 4096

function errorCode(e) {
  const code = attempt(() => e?.code ?? e?.error?.code, undefined)
  return typeof code === 'string' && code !== '' ? code : 'internal'
}

/**
 * Deliver one claimed envelope in-process. Prefers the host's session controller (0.1.7:
 * `ctx.sessionController.prompt(request, signal)` keeps request-id dedup and admission,
 * kilinthecode/deepseek-harness packages/api/session-controller/README.md); else the live agent's inbox
 * (`agent.steer` / `agent.followup`, what rc.8's route and 0.1.7's built-in peer sessions call), deduped
 * here: by this process's memory, the inbox's pending ids, and the log (`env.landed`, the core's lookup).
 * null: the session is not live here any more (the envelope goes back for its next holder).
 * `registry()` is the agent registry (the mailbox's serviceMemo).
 */
async function deliverEnvelope(ctx, registry, env, delivered) {
  if (env.landed || delivered.has(env.requestId)) return { state: 'delivered', route: 'already-delivered' }
  const agent = attempt(() => registry()?.get?.(env.sessionId), undefined)
  if (agent === undefined || agent === null) return null
  if (pendingOf(agent).rpcIds.includes(env.requestId)) return { state: 'delivered', route: 'already-delivered' }
  const mode = env.mode === 'steer' ? 'steer' : 'queue'
  let route
  // Looked up, not injected: rc.8 has no such service, and an optional inject of an unknown service
  // leaves the plugin pending there ("waiting for service: sessionController").
  const controller = service(ctx, 'sessionController')
  if (typeof controller?.prompt === 'function') {
    route = 'session-controller'
    try {
      const request = { requestId: env.requestId, sessionId: env.sessionId, mode, content: [{ type: 'text', text: env.text }] }
      const r = await controller.prompt(request, AbortSignal.timeout(PROMPT_TIMEOUT_MS))
      if (r?.accepted !== true) {
        return { state: 'rejected', code: errorCode(r), message: String(attempt(() => r?.error?.message ?? r?.message, '') ?? '') }
      }
    } catch (e) {
      return { state: 'rejected', code: errorCode(e), message: String(e?.message ?? e) }
    }
  } else {
    route = 'agent'
    try {
      // what rc.8's own prompt route admits (packages/host/apiproxy `prompt`: `createUserMessage({content,
      // source:{kind:'user', rpcId}})`): `source.rpcId` is the request id, exactly as over HTTP, so the
      // store, `verify` and every dedup find it in the log
      const m = userMessage(env.text, { kind: 'user', rpcId: env.requestId })
      if (mode === 'steer') agent.steer(m)
      else agent.followup(m)
    } catch (e) {
      // rc.8's own route answers a throw here with `agent-busy` (packages/host/apiproxy `prompt`)
      return { state: 'rejected', code: 'agent-busy', message: String(e?.message ?? e) }
    }
  }
  delivered.add(env.requestId)
  if (delivered.size > REMEMBER) delivered.delete(delivered.values().next().value)
  // Written to the log before the receipt: a crash after this point is never delivered again by
  // the session's next holder (it finds the request id in the log).
  await flushSession(ctx, attempt(() => agent.session, undefined), FLUSH_TIMEOUT_MS)
  return { state: 'delivered', route }
}

const NOTICE_PREFIX = 'dsh-session-mail:notice:'

/** The text of one of our messages (a single text block, as every route builds it). */
function textOf(message) {
  const content = attempt(() => message?.content, undefined)
  if (!Array.isArray(content)) return null
  const parts = content.map(b => (b?.type === 'text' && typeof b.text === 'string' ? b.text : null))
  return parts.length > 0 && parts.every(p => p !== null) ? parts.join('') : null
}

/** The messages of this plugin in `list` (an inbox list of `sessionId`), as the core's hand-back takes them. */
function oursIn(list, sessionId, mode, seq) {
  const out = []
  for (const m of list) {
    const requestId = attempt(() => m?.source?.rpcId, undefined)
    if (typeof requestId !== 'string' || !requestId.startsWith('dsh-session-mail:') || requestId.startsWith(NOTICE_PREFIX)) continue
    const text = textOf(m)
    if (text !== null) out.push({ sessionId, requestId, mode, text, seq })
  }
  return out
}

/**
 * Every message of this plugin pending in the inboxes of this process's live agents, as the core's
 * hand-back takes them: `{sessionId, requestId, mode, text, seq}` (next-turn → queue, next-step → steer).
 */
function pendingOfOurs(ctx) {
  const out = []
  for (const agent of attempt(() => ctx.agents?.list?.() ?? [], [])) {
    const sessionId = String(attempt(() => agent.id, '') ?? '')
    if (sessionId === '') continue
    const seq = Number(attempt(() => agent.session?.seq, 0)) || 0
    const inbox = attempt(() => agent.inbox, undefined)
    out.push(...oursIn(attempt(() => [...(inbox?.nextTurn ?? [])], []), sessionId, 'queue', seq))
    out.push(...oursIn(attempt(() => [...(inbox?.nextStep ?? [])], []), sessionId, 'steer', seq))
  }
  return out
}

/**
 * The contexts whose process is stopping: the stop signal came (set by {@link startHandBack}, read by
 * {@link startMailbox}: from then on nothing more is delivered into this process's inboxes, which the
 * host's disposal is about to clear).
 */
const stopping = new WeakSet()

/** Has the stop signal of this process come (lib/presence.js: its records then say `stopping`)? */
export function isStopping(ctx) {
  return stopping.has(ctx)
}

/** What runs at the stop signal, after the hand-back, per context (lib/presence.js republishes). */
const atStop = new WeakMap()

/** Run `fn` at the stop signal of `ctx` (once its hand-back is done). Returns the unsubscriber. */
export function onStopping(ctx, fn) {
  if (!atStop.has(ctx)) atStop.set(ctx, new Set())
  atStop.get(ctx).add(fn)
  return () => atStop.get(ctx)?.delete(fn)
}

/**
 * Hand every pending message of ours back to durable storage before the host cancels it (issue 19), so
 * the clear that follows reads as the stop's, not the human's. rc.8's stop disposes each agent with a
 * cancel that clears its inbox (packages/core/agent-loop/src/index.ts `dispose` → agent.ts `cancel` →
 * `inbox.clear()`), after the signal handler it installs before boot (apps/cli/src/profile-boot.ts
 * `process.on('SIGTERM')` → `createProcessShutdown` → fiber dispose, started a microtask later):
 * - at the signal: this listener is prepended, so it runs first in the same signal dispatch, before that
 *   disposal reaches any agent;
 * - at the clear itself: from the signal on, every `outcome: 'canceled'` splice that takes messages of ours
 *   hands those back with the splice's own seq, in the `session/event` dispatch of that splice (observers
 *   see the pre-splice lists, packages/core/agent/src/inbox.ts `mutate`) — so a message the host accepted
 *   after the signal (its HTTP route still answers until the disposal reaches it: 75–370 ms measured) is
 *   covered too, whatever the order of the listeners and however long the stop takes;
 * - at the plugin's dispose: after a signal, what is still pending (a dispose that comes before the agents'),
 *   else as an unmount (the host goes on: a later cancel may be anyone's).
 * Synchronous and bounded (the core gives up after 300 ms per call). Returns the stop function.
 * The registry is looked up through cordis here each time, not through a serviceMemo like the mailbox
 * check's: these run only from the signal on (the check is halted then) — once at the signal, once per
 * clear, once at the dispose —, so a memo would save nothing, and what they read decides which messages
 * survive the stop. A direct lookup is what cordis answers at that moment; a memo is only as fresh as the
 * last `internal/service` it heard (cordis 4.0.1 src/reflect.ts `set` replaces a service's value without
 * one; `provide` and its disposal do emit it, through `notify`).
 */
export function startHandBack(ctx, core, { startedAt, dshHome = () => resolveDshHome(), proc = process }) {
  if (typeof core?.queuedHandBack !== 'function') return () => {}
  let signaled = false
  let stopped = false
  const handBack = (items, why) => {
    try {
      if (items.length > 0) core.queuedHandBack(items, startedAt, why, dshHome())
    } catch {
      // a home we cannot write: the sender's records still stand
    }
  }
  const onSignal = () => {
    if (signaled || stopped) return
    signaled = true
    stopping.add(ctx)
    handBack(pendingOfOurs(ctx), 'stop')
    for (const fn of [...(atStop.get(ctx) ?? [])]) attempt(fn, undefined)
  }
  const offEvents = onSessionEvent(ctx, (session, event) => {
    if (!signaled || event?.type !== 'agent/inbox/spliced') return
    const d = event.data
    if (d?.outcome !== 'canceled' || !(d?.removedCount > 0)) return
    const sessionId = String(attempt(() => session?.id, '') ?? '')
    const agent = attempt(() => ctx.agents?.get?.(sessionId), undefined)
    const next = d.target === 'next-step'
    const list = attempt(() => (next ? agent.inbox.nextStep : agent.inbox.nextTurn).slice(d.start, d.start + d.removedCount), [])
    const seq = Number(event.seq)
    handBack(oursIn(list, sessionId, next ? 'steer' : 'queue', Number.isSafeInteger(seq) && seq >= 0 ? seq : 0), 'stop')
  })
  // Only signals the host handles itself (a listener of ours must not keep a process alive that the
  // signal's default action would end), prepended: it must run before the host's handler starts the disposal.
  const signals = ['SIGTERM', 'SIGINT'].filter(s => attempt(() => proc.listenerCount(s), 0) > 0)
  for (const s of signals) attempt(() => proc.prependListener(s, onSignal), undefined)
  return () => {
    for (const s of signals) attempt(() => proc.off(s, onSignal), undefined)
    if (typeof offEvents === 'function') attempt(offEvents, undefined)
    if (!stopped) {
      stopped = true
      handBack(pendingOfOurs(ctx), signaled ? 'stop' : 'unmount')
    }
  }
}

/**
 * A resumed session whose log held queued messages gets them back in its inbox (rc.8 replays the
 * insertions, packages/core/agent/src/inbox.ts constructor) but no turn starts for them: only a send
 * wakes the driver (packages/core/agent-loop/src/agent.ts `send` → `wakeDriver`). An idle agent with a
 * message of ours pending is in exactly that state; it is woken by taking that message out and sending
 * the same message object again (same id, request id and text: it lands once, as it was).
 */
function kickReplayed(agent) {
  if (attempt(() => agent.status, 'running') !== 'idle') return
  const inbox = attempt(() => agent.inbox, undefined)
  const first = attempt(() => [...(inbox?.nextTurn ?? [])], []).find(m => {
    const id = attempt(() => m?.source?.rpcId, undefined)
    return typeof id === 'string' && id.startsWith('dsh-session-mail:') && !id.startsWith(NOTICE_PREFIX)
  })
  if (first === undefined) return
  attempt(() => {
    if (inbox.remove(first.id)) agent.followup(first)
  }, undefined)
}

/**
 * Drain this process's mailboxes every DRAIN_MS while the plugin is mounted (timer unref'd). Returns
 * the stop function. `startedAt` is this process's presence `startedAt` (envelopes are addressed to it);
 * `config` the core's configuration keys (the limits each envelope is checked against). The text delivered
 * is the core's (rebuilt from the verified sender: always framed), never the envelope's own.
 * The same tick re-delivers the messages of holders that are gone into the sessions live here
 * (`queuedRecover`), and, where `wake()` gives a route (allowResume and a web server), wakes one cold
 * session such a message waits for (`queuedWake`).
 */
export function startMailbox(ctx, core, { startedAt, dshHome = () => resolveDshHome(), config = {}, wake = () => null }) {
  if (typeof core?.mailboxDrain !== 'function') return () => {}
  const delivered = new Set()
  // the limits the core checks each envelope against (mailbox::admit): this profile's own
  const configJson = JSON.stringify(config ?? {})
  // Request ids a turn of this process claimed from an inbox (the log shows the claim up to ~200 ms
  // later, and the landing only once the step runs): never re-delivered. `session/event` observers see
  // the pre-splice lists (packages/core/agent/src/inbox.ts `mutate`: the event commits first).
  const claimed = new Set()
  // Request ids of ours whose `user/message` the host published here: landed. At the plugin's dispose
  // their in-memory records go (`queuedSweepMine`): rc.8 ends a one-shot headless run right after its
  // turn through the root fiber's dispose (apps/cli/src/profile-boot.ts `headlessIo.exit` →
  // process-shutdown.ts `shutdown` → `fiber.dispose()`), before the next tick would have removed them.
  const landed = new Set()
  /** The context's listeners, unhooked by the stop (the registry memo's `internal/service` one among them). */
  const listeners = []
  const hooked = off => { if (typeof off === 'function') listeners.push(off); return off }
  // The agent registry, looked up through cordis once and again only after cordis reports the `agents`
  // service changed (lib/host.js serviceMemo): every check reads it, each lookup builds an Error and runs
  // cordis' internal/get waterfall on the host's main thread. The registry itself is read fresh (its
  // list and get), so a check sees the sessions live now.
  const registry = serviceMemo({ on: (name, fn) => hooked(ctx.on(name, fn)) }, 'agents', () => ctx.agents)
  hooked(onSessionEvent(ctx, (session, event) => {
    if (event?.type === 'user/message') {
      const m = event.data?.message && typeof event.data.message === 'object' ? event.data.message : event.data
      const id = attempt(() => m?.source?.rpcId, undefined)
      if (typeof id === 'string' && id.startsWith('dsh-session-mail:') && !id.startsWith(NOTICE_PREFIX)) {
        landed.add(id)
        if (landed.size > REMEMBER) landed.delete(landed.values().next().value)
      }
      return
    }
    if (event?.type !== 'agent/inbox/spliced') return
    const d = event.data
    if (d?.outcome !== undefined || !(d?.removedCount > 0)) return
    const agent = attempt(() => registry()?.get?.(session?.id), undefined)
    const list = attempt(() => (d.target === 'next-step' ? agent.inbox.nextStep : agent.inbox.nextTurn), [])
    for (const m of attempt(() => list.slice(d.start, d.start + d.removedCount), [])) {
      const id = attempt(() => m?.source?.rpcId, undefined)
      if (typeof id === 'string' && id.startsWith('dsh-session-mail:')) {
        claimed.add(id)
        if (claimed.size > REMEMBER) claimed.delete(claimed.values().next().value)
      }
    }
  }))
  let ticks = 0
  let busy = false
  let stopped = false
  // The process is stopping (the signal came): its inboxes are about to be cleared, so nothing more
  // goes in; envelopes go back for the session's next holder and lost messages wait for it.
  const halted = () => stopped || stopping.has(ctx)
  const tick = async () => {
    if (busy || halted()) return
    busy = true
    try {
      const sessions = attempt(() => registry()?.list?.() ?? [], []).map(a => String(attempt(() => a.id, ''))).filter(Boolean)
      const home = dshHome()
      ticks++
      if (typeof core.queuedWake === 'function' && ticks % WAKE_EVERY === 1) {
        const adopt = wake()
        if (typeof adopt === 'function') {
          const c = await core.queuedWake(startedAt, sessions, home)
          if (c) await adopt(c.sessionId, c.cwd)
        }
      }
      // the records a gone holder left of messages that landed (a one-shot process killed after its turn)
      if (typeof core.queuedSweep === 'function' && ticks % SWEEP_EVERY === 1) await core.queuedSweep(sessions, startedAt, home)
      if (sessions.length === 0) return
      const envelopes = await core.mailboxDrain(sessions, startedAt, home, configJson)
      for (const env of envelopes) {
        // Each envelope on its own: a release or receipt that fails (a full disk, a folder made
        // unwritable) leaves that claim for the next tick (`delivered` keeps it from landing twice) and
        // never holds back the envelopes drained after it.
        try {
          if (halted()) {
            await core.mailboxRelease(env.sessionId, env.requestId, home)
            continue
          }
          let out
          try {
            out = await deliverEnvelope(ctx, registry, env, delivered)
          } catch (e) {
            out = { state: 'rejected', code: 'internal', message: String(e?.message ?? e) }
          }
          if (out === null) await core.mailboxRelease(env.sessionId, env.requestId, home)
          else await core.mailboxSettle({ requestId: env.requestId, sessionId: env.sessionId, ...out }, home)
        } catch {
          // the claim stays; the next tick drains it again
        }
      }
      // Messages whose holder stopped or died before they landed (verified by the core against the
      // ledger and the log): delivered again, once, with their own request id and text.
      if (typeof core.queuedRecover === 'function') {
        for (const r of await core.queuedRecover(sessions, startedAt, home)) {
          if (halted()) break // the record stays for the session's next holder
          let out
          try {
            // claimed by a turn here since the log was read: it is landing (a resume replayed it)
            out = claimed.has(r.requestId)
              ? { state: 'delivered', route: 'already-delivered' }
              : await deliverEnvelope(ctx, registry, { ...r, landed: false }, delivered)
          } catch {
            out = null
          }
          if (out === null) continue // not live here any more: the record stays for the next holder
          await core.queuedTake(r.sessionId, r.requestId, startedAt, out.route !== 'already-delivered', home)
        }
        if (!halted()) for (const a of attempt(() => registry()?.list?.() ?? [], [])) kickReplayed(a)
      }
    } catch {
      // a home we cannot read or write: the envelopes stay and the next tick tries again
    } finally {
      busy = false
    }
  }
  const timer = setInterval(tick, DRAIN_MS)
  timer.unref?.()
  void tick()
  return () => {
    stopped = true
    clearInterval(timer)
    for (const off of listeners.splice(0)) attempt(off, undefined)
    try {
      if (typeof core.queuedSweepMine === 'function' && landed.size > 0) core.queuedSweepMine([...landed], startedAt, dshHome())
    } catch {
      // a home we cannot write: the session's next holder removes them
    }
  }
}

/** Does this core drain mailboxes (what the presence record advertises)? */
export function canDrain(core) {
  return typeof core?.mailboxDrain === 'function'
}
