// Idle notices (`notify_when_idle` on the send tools): "do this, and tell me once when your turn ends".
// After an accepted send, the shim watches the target's `agent/status` (rc.8 packages/core/agent-loop
// `setPhase()` emits it on every idle/running edge; 0.1.7's built-in compaction scheduler and peer sessions
// listen the same way) and, at its first idle edge after it ran, delivers ONE message into the caller.
//
// Bounds: one pending notice per (caller, target) pair; at most `maxWatches` pending in this process; each
// expires after `ttlMs`. It never touches the target (nothing is sent to it, so an idle peer is never woken),
// it is dropped when the caller is no longer live here, and a turn that a notice opened cannot ask for
// another one (no notice loops). The notice is a plugin-sourced user message
// `{kind:'plugin', plugin:'dsh-session-mail', form:'notice', rpcId:'dsh-session-mail:notice:<request id>'}`:
// sessions_read hides it as a plugin notice, and the loop guard (crates/core/src/mail/chain.rs) continues
// the watched send's chain in the turn it opens.
import { randomUUID } from 'node:crypto'
import { attempt } from './attempt.js'
import { serviceMemo, userMessage } from './host.js'
import { loadCore } from './native.js'

export class IdleNotices {
  /**
   * @param {any} ctx the plugin context (`agents` optional; `on` for `agent/status`)
   * @param {{ ttlMs?: number, maxWatches?: number, now?: () => number, sessions?: any }} [options]
   */
  constructor(ctx, { ttlMs = 30 * 60_000, maxWatches = 64, now = Date.now, sessions = null } = {}) {
    this.ctx = ctx
    /** The agent registry, looked up through cordis once and again only after it reports `agents` changed (lib/host.js) */
    this.agents = serviceMemo(ctx, 'agents', () => ctx.agents)
    /** lib/observe.js SessionEvents: which request ids landed in a turn that has ended */
    this.sessions = sessions
    this.ttlMs = ttlMs
    this.maxWatches = maxWatches
    this.now = now
    /** @type {Map<string, {watcher:string, target:string, requestId:string, expires:number, sawRunning:boolean, sinceSeq:number|null}>} */
    this.watches = new Map()
    this.delivered = 0
    attempt(() => ctx.on('agent/status', ({ agent, status }) => this.onStatus(agent, status)), undefined)
  }

  prune() {
    const t = this.now()
    for (const [k, w] of this.watches) if (w.expires <= t) this.watches.delete(k)
  }

  /**
   * What only the shim knows about a `notify_when_idle` request, before the send: the core decides with it
   * (crates/core/src/mail/notice.rs: the loop guard's rule for a turn a notice opened; whether the target is
   * live here is the core's to tell from the send) and words the receipt's `note:` (render/notice.rs).
   * @param {{ watcher: string|null, target: string, turn: any[]|null }} req
   */
  factsFor({ watcher, target, turn }) {
    this.prune()
    return {
      hasWatcher: Boolean(watcher),
      turn: Array.isArray(turn) ? turn : null,
      alreadyPending: this.watches.has(`${watcher}\u0000${target}`),
      pending: this.watches.size,
      maxWatches: this.maxWatches,
      ttlMs: Math.max(0, Math.round(this.ttlMs)),
    }
  }

  /**
   * Watch `target` for the notice the core set (`run` answered `notice: 'set'`): one message into the caller
   * when the target's running turn ends.
   * @param {{ watcher: string, target: string, requestId: string|null }} req
   */
  watch({ watcher, target, requestId }) {
    const agent = attempt(() => this.agents()?.get?.(target), undefined)
    const key = `${watcher}\u0000${target}`
    const status = String(attempt(() => agent.status, 'idle'))
    const sinceSeq = attempt(() => (typeof agent.session?.seq === 'number' ? agent.session.seq - 1 : null), null)
    const w = { watcher, target, requestId: requestId ?? randomUUID(), expires: this.now() + this.ttlMs, sawRunning: status !== 'idle', sinceSeq }
    this.watches.set(key, w)
    // A very short turn can start and end before this watch exists: if the message already landed and the
    // session is idle again, the turn is over — notify now rather than wait for an edge that came already.
    if (status === 'idle' && requestId && this.landedAndEnded(agent, requestId)) queueMicrotask(() => this.fire(key))
  }

  landedAndEnded(agent, requestId) {
    const id = attempt(() => agent.session?.id ?? agent.id, undefined)
    return typeof id === 'string' && attempt(() => this.sessions?.landedAndEnded(id, requestId), false) === true
  }

  onStatus(agent, status) {
    const id = String(attempt(() => agent.id, ''))
    for (const [key, w] of this.watches) {
      if (w.target !== id) continue
      if (status === 'running') w.sawRunning = true
      else if (status === 'idle' && w.sawRunning) this.fire(key)
    }
  }

  fire(key) {
    const w = this.watches.get(key)
    if (!w) return
    this.watches.delete(key)
    if (w.expires <= this.now()) return
    const watcher = attempt(() => this.agents()?.get?.(w.watcher), undefined)
    if (!watcher || typeof watcher.followup !== 'function') return // the caller is gone: dropped
    // text and source from the core (render/notice.rs, mail/notice.rs `source`: the rpcId the loop guard knows)
    const since = typeof w.sinceSeq === 'number' && w.sinceSeq >= 0 ? w.sinceSeq : null
    const n = attempt(() => loadCore().core.idleNoticeMessage(w.target, w.requestId, since), undefined)
    if (n === undefined) return
    const message = userMessage(n.text, { kind: 'plugin', plugin: n.plugin, form: n.form, summary: n.summary, rpcId: n.rpcId })
    try {
      watcher.followup(message)
      this.delivered++
    } catch {
      /* the watcher is being disposed: dropped */
    }
  }
}
