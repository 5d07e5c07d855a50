// Contract host: one session's durable log, inbox and turn driver, reduced to what the prompt
// route can observe. The "model" never runs: turns and steps advance only when the test calls
// runTurn / completeStep / completeTurn / setRunning (or with `autoComplete`).
//
// Reference sources (read, not copied):
//   - packages/core/agent-loop/src/agent.ts (Z17 @1dd6c6a3) `send`, `followup`, `steer`, `cancel`,
//     `wakeDriver`, `kick`, `turn`, `preStep`, `step` (user/message landing with surfaceOp 'append')
//   - packages/core/agent-loop/src/inbox.ts (Zx @85e854ea) `claim`, `clear`, `mutate`
//     (`agent/inbox/spliced` {target, start, removedCount?, inserted, outcome?})
//   - packages/core/session/src/index.ts (R8) Session constructor: untagged `session/end-seed` on resume,
//     skipped when the log already ends with one
//   - packages/core/session/src/repair.ts (R8) `interruptedTurnClosers` (step/end, turn/end interrupted)
//   - packages/core/session/src/types.ts (R8/Z17) event envelope and `TurnEndReason`

/** An append-only session log with batched frames. */
export class HostSession {
  constructor({ meta, file, now, live }) {
    this.header = meta
    this.file = file
    this.now = now
    this.events = []
    this.pending = []
    this.live = live
    // agent.ts `Phase`, reduced: idle | running (abort recorded as the cancel cause).
    this.phase = { kind: 'idle', lastTurn: 0 }
    this.inbox = { 'next-turn': [], 'next-step': [] }
    this.autoComplete = false
  }

  /** types.ts `SessionEvent`: {type, seq, time, data, surfaceOp?}; seq contiguous from 0, time in ms. */
  append(type, data, extra = {}) {
    const event = { type, seq: this.events.length, time: this.now(), data, ...extra }
    this.events.push(event)
    this.pending.push(event)
    return event
  }

  /** One write = one frame (R8 index.ts `encodeEventBatch`). */
  flush() {
    const batch = this.pending
    this.pending = []
    this.file.appendBatch(batch)
  }

  get status() {
    return this.phase.kind === 'idle' ? 'idle' : 'running'
  }

  get hasPending() {
    return this.inbox['next-turn'].length > 0 || this.inbox['next-step'].length > 0
  }

  // inbox.ts `mutate`: no event when nothing changes; claims carry no `outcome`,
  // discarding removals (clear/remove/replace) carry outcome 'canceled'.
  mutate(target, start, deleteCount, inserted, discardRemoved) {
    const list = this.inbox[target]
    const actualStart = Math.min(Math.max(start, 0), list.length)
    const actualDelete = Math.min(Math.max(deleteCount, 0), list.length - actualStart)
    if (actualDelete === 0 && inserted.length === 0) return []
    const removed = list.slice(actualStart, actualStart + actualDelete)
    this.inbox[target] = list.toSpliced(actualStart, actualDelete, ...inserted)
    const outcome = discardRemoved && actualDelete > 0 ? 'canceled' : undefined
    this.append('agent/inbox/spliced', {
      target,
      start: actualStart,
      ...(actualDelete === 0 ? {} : { removedCount: actualDelete }),
      inserted,
      ...(outcome === undefined ? {} : { outcome }),
    })
    return removed
  }

  // inbox.ts `claim`: all next-step items, then (at a turn start) one next-turn item.
  claim(target) {
    const claimed = this.mutate('next-step', 0, this.inbox['next-step'].length, [], false)
    if (target === 'next-turn') claimed.push(...this.mutate('next-turn', 0, 1, [], false))
    return claimed
  }

  // inbox.ts `clear`: next-step first, then next-turn, both durable with outcome 'canceled'.
  clearInbox() {
    this.mutate('next-step', 0, this.inbox['next-step'].length, [], true)
    this.mutate('next-turn', 0, this.inbox['next-turn'].length, [], true)
  }

  /**
   * agent.ts `send`: a waking message sent while the running activity is aborted goes to
   * 'next-turn' ("Waking input cannot join an aborted activity, so it starts the next turn").
   * @returns the resolved inbox target.
   */
  send(message, target, wakeup) {
    const wakingAfterAbort = wakeup && this.phase.kind !== 'idle' && this.phase.aborted !== undefined
    const resolved = wakingAfterAbort ? 'next-turn' : target
    this.mutate(resolved, this.inbox[resolved].length, 0, [message], true)
    if (wakeup) this.wakeDriver(wakingAfterAbort)
    return resolved
  }

  /** agent.ts `followup` = send(next-turn, wake). */
  followup(message) { return this.send(message, 'next-turn', true) }

  /** agent.ts `steer` = send(next-step, wake). */
  steer(message) { return this.send(message, 'next-step', true) }

  /**
   * agent.ts `wakeDriver`: idle -> open a turn at once; aborted -> latch the wake for replay at
   * convergence (never for a 'disposed' cause); live, unaborted driver -> it claims the input itself.
   */
  wakeDriver(wakeAfterAbort = false) {
    if (this.phase.kind !== 'idle') {
      if (this.phase.aborted?.kind !== 'disposed' && wakeAfterAbort) this.phase.wakeRequested = true
      return
    }
    this.phase = { kind: 'running', turn: this.phase.lastTurn, step: 0, aborted: undefined, wakeRequested: false }
    this.drive()
  }

  /**
   * agent.ts `turn` up to the first model call: turn/start, claim('next-turn'), and when anything
   * was claimed step/start + one `user/message` (surfaceOp 'append') per claimed message; the
   * session then stays running inside step 1. A turn that claims nothing at step 0 ends
   * 'completed' without a model call and the driver stops (`return false` in `turn`).
   */
  drive() {
    const phase = this.phase
    const turn = phase.turn + 1
    this.append('turn/start', { turn })
    phase.turn = turn
    phase.step = 0
    const claimed = this.claim('next-turn')
    if (claimed.length === 0) {
      this.append('turn/end', { turn, reason: { kind: 'completed' } })
      this.phase = { kind: 'idle', lastTurn: turn }
      return
    }
    this.startStep(claimed)
    if (this.autoComplete) this.finishTurn()
  }

  /** agent.ts `turn` + `step`: step/start, then the claimed batch lands as user/message. */
  startStep(messages) {
    const phase = this.phase
    const step = phase.step + 1
    this.append('step/start', { turn: phase.turn, step })
    phase.step = step
    for (const message of messages) this.append('user/message', message, { surfaceOp: 'append' })
  }

  /**
   * The current step ends as a tool-calling step (the turn continues): step/end, then
   * claim('next-step') and the next step starts with whatever was claimed (agent.ts `turn` loop:
   * `target = 'next-step'`). This is where a steer lands inside the same turn.
   */
  completeStep() {
    const phase = this.requireRunning()
    if (phase.aborted !== undefined) return this.finishTurn()
    this.append('step/end', { turn: phase.turn, step: phase.step })
    this.startStep(this.claim('next-step'))
  }

  /**
   * The current step ends and the model concludes. While next-step input is pending the turn keeps
   * stepping (each such step lands its claims and concludes at once); then turn/end 'completed'.
   * An aborted turn instead converges: step/end, turn/end {kind:'aborted', reason}, idle, and a
   * latched wake replays (agent.ts `kick` finally). After a completed turn, pending input opens
   * the next turn (agent.ts `turn`: `if (!this.inbox.hasPending) return false`).
   */
  finishTurn() {
    const phase = this.requireRunning()
    this.append('step/end', { turn: phase.turn, step: phase.step })
    if (phase.aborted !== undefined) {
      this.append('turn/end', { turn: phase.turn, reason: { kind: 'aborted', reason: phase.aborted } })
      const { turn, wakeRequested } = phase
      this.phase = { kind: 'idle', lastTurn: turn }
      if (wakeRequested && this.hasPending) this.wakeDriver()
      return
    }
    while (this.inbox['next-step'].length > 0) {
      this.startStep(this.claim('next-step'))
      this.append('step/end', { turn: phase.turn, step: phase.step })
    }
    this.append('turn/end', { turn: phase.turn, reason: { kind: 'completed' } })
    if (!this.hasPending) {
      this.phase = { kind: 'idle', lastTurn: phase.turn }
      return
    }
    // Same driver continues with a fresh abort controller and a cleared latch.
    phase.aborted = undefined
    phase.wakeRequested = false
    this.drive()
  }

  /**
   * agent.ts `cancel(cause, {keepInbox})`: without keepInbox the inbox is cleared durably and the
   * latch dropped; a running activity is aborted with `cause`. The abort takes effect (turn/end
   * 'aborted') when the test calls completeTurn; until then a waking steer downgrades to next-turn.
   */
  cancel(cause = { kind: 'user' }, { keepInbox = true } = {}) {
    if (!keepInbox) {
      this.clearInbox()
      if (this.phase.kind !== 'idle') this.phase.wakeRequested = false
    }
    if (this.phase.kind !== 'idle' && this.phase.aborted === undefined) this.phase.aborted = cause
  }

  /**
   * Open a running turn for a test (the "peer is busy" state). Pending input is claimed and lands
   * like any turn start; with nothing pending the turn still stays open inside step 1 (a simulated
   * turn whose prompt came from elsewhere; the real loop would end an empty turn at once).
   */
  openBusyTurn() {
    if (this.phase.kind !== 'idle') return
    const turn = this.phase.lastTurn + 1
    this.phase = { kind: 'running', turn, step: 0, aborted: undefined, wakeRequested: false }
    this.append('turn/start', { turn })
    this.startStep(this.claim('next-turn'))
  }

  /**
   * Cold resume: repair.ts `interruptedTurnClosers` (an open step gets step/end, an open turn gets
   * turn/end {kind:'interrupted'}, both at the last event's time), then the Session constructor's
   * untagged `session/end-seed` unless the log already ends with one. The inbox is rebuilt from the
   * splices (inbox.ts `inboxProjectionDefinition`), the last turn from turn/start events.
   */
  resume() {
    if (this.live) return
    let openTurn = null
    let openStep = null
    let lastTurn = 0
    const inbox = { 'next-turn': [], 'next-step': [] }
    for (const event of this.events) {
      if (event.type === 'turn/start') { openTurn = event.data.turn; openStep = null; lastTurn = event.data.turn }
      else if (event.type === 'turn/end') { openTurn = null; openStep = null }
      else if (event.type === 'step/start') openStep = event.data.step
      else if (event.type === 'step/end') openStep = null
      else if (event.type === 'agent/inbox/spliced') {
        const { target, start, removedCount = 0, inserted } = event.data
        inbox[target] = inbox[target].toSpliced(start, removedCount, ...inserted)
      }
    }
    const last = this.events.at(-1)
    if (openTurn !== null && last !== undefined) {
      const time = last.time
      if (openStep !== null) this.pushAt('step/end', { turn: openTurn, step: openStep }, time)
      this.pushAt('turn/end', { turn: openTurn, reason: { kind: 'interrupted' } }, time)
    }
    if (this.events.at(-1)?.type !== 'session/end-seed') this.append('session/end-seed', {})
    this.inbox = inbox
    this.phase = { kind: 'idle', lastTurn }
    this.live = true
  }

  pushAt(type, data, time) {
    const event = { type, seq: this.events.length, time, data }
    this.events.push(event)
    this.pending.push(event)
  }

  requireRunning() {
    if (this.phase.kind !== 'running') throw new Error(`contract-host: session "${this.header.id}" has no running turn`)
    return this.phase
  }

  /**
   * commands.ts `hasPromptRequest`: pending inbox (nextTurn, nextStep) first, then every
   * `user/message` in the whole log; never the splice history.
   */
  hasPromptRequest(requestId) {
    const matches = source => source?.kind === 'user' && Object.hasOwn(source, 'rpcId') && source.rpcId === requestId
    if (this.inbox['next-turn'].some(m => matches(m.source)) || this.inbox['next-step'].some(m => matches(m.source))) return true
    return this.events.some(event => event.type === 'user/message' && matches(event.data?.source))
  }
}
