// Presence across host processes: this process publishes which sessions it holds live, so the
// plugin in another DSH process on the same DSH_HOME lists them as live here and routes a send to
// this process instead of resuming them itself (rc.8 has no session lock: two writers fork a log).
// The record is written by the core (atomic, owner-only: crates/core/src/presence) on a worker
// thread; this file only gathers what the host knows and keeps the timers. A record not refreshed for
// 5 s, or whose pid is gone, is ignored by readers.
//
// When it is republished: every REFRESH_MS (freshness: readers drop a record older than 5 s), and
// DEBOUNCE_MS after anything that can change what it lists, so another process does not list a session
// `running` for up to a second after it went idle. The host's events (rc.8 toninfo/deepseek-harness
// packages/core/agent/src/runtime-types.ts): `agent/status` (idle ⇄ running, emitted by
// packages/core/agent-loop/src/agent.ts), `agent/created` / `agent/disposed` (the registry's lifecycle edges,
// packages/core/agent/src/index.ts `announce` / `emitDisposed`); and the `session/event`s awaiting-user is
// folded from (lib/observe.js). A listener only arms a timer: the record is gathered when it fires, once per
// burst, written only if what it lists changed, and the write itself runs on the core's worker thread.
import { attempt } from './attempt.js'
import { liveAgents, serviceMemo } from './host.js'
import { resolveDshHome } from './home.js'
import { isStopping, onStopping } from './mailbox.js'
import { onSessionEvent } from './observe.js'

/** Republish at least this often (readers drop a record not refreshed for 5 s). */
const REFRESH_MS = 1000
/** A change is republished this long after it, coalesced with the changes that follow it. */
const DEBOUNCE_MS = 50
/** Appended session events that can change a live session's listed status (awaiting-user, lib/observe.js). */
const STATUS_EVENTS = new Set(['turn/start', 'turn/end', 'approval/asked', 'approval/decided', 'tool/call', 'tool/result'])

/** `--profile <name>` / `--profile=<name>` of this process, else null. */
function profileOf(argv = process.argv) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--profile' && typeof argv[i + 1] === 'string') return argv[i + 1]
    if (typeof a === 'string' && a.startsWith('--profile=')) return a.slice('--profile='.length)
  }
  return null
}

/** The record this process publishes now (the core adds pid and updatedAt); `registry` reads the agent registry. */
function presenceRecord(ctx, registry, { hostVersion, baseUrl, startedAt, profile, mailbox }) {
  return {
    v: 1,
    profile,
    hostVersion: hostVersion ?? null,
    baseUrl: baseUrl ?? null,
    startedAt,
    mailbox, // it drains the mailbox of its live sessions (lib/mailbox.js)
    sessions: liveAgents(ctx, { files: false, registryOf: registry }).map(a => ({ id: a.id, status: a.status })), // status only (no file activity)
  }
}

/** What a republish compares: `[stopping, sessions]` of a record, as JSON. */
function listedKey(record) {
  return JSON.stringify([record.stopping === true, record.sessions])
}

/** `a`, with the sessions of `b` it does not list (in `b`'s order after `a`'s). */
function union(a, b) {
  const ids = new Set(a.map(s => s.id))
  return [...a, ...b.filter(s => !ids.has(s.id))]
}

/**
 * Publish now, every `refreshMs`, and `debounceMs` after a status change or a session created or disposed,
 * while the plugin is mounted (timers unref'd: they never keep the process alive); withdraw the record when
 * the plugin is disposed or the process exits. `baseUrl` is a function (the web server's port is known
 * only once it listens).
 *
 * Once the stop signal came (lib/mailbox.js `isStopping`), the process still holds its sessions until it
 * exits (rc.8 disposes the plugin, then force-exits within 5 s: apps/cli/src/process-shutdown.ts
 * PROCESS_SHUTDOWN_TIMEOUT_MS), but takes no more messages: it republishes at the signal (`onStopping`), and
 * every record from then on says `stopping: true`, `baseUrl: null`, `mailbox: false` and lists every session
 * it listed since (an agent disposed by the stop is still listed), so a sender refuses instead of taking the
 * session for cold. The dispose after the signal writes that record one last time instead of withdrawing it;
 * the 'exit' withdraws it, and a reader drops it 5 s after it was written like any record. A dispose without
 * a signal (the plugin unmounted, the host goes on) withdraws as before.
 */
export function startPresence(ctx, core, {
  hostVersion, baseUrl, startedAt = Date.now(), mailbox = false, dshHome = () => resolveDshHome(),
  refreshMs = REFRESH_MS, debounceMs = DEBOUNCE_MS,
}) {
  if (typeof core?.publishPresence !== 'function') return () => {}
  const profile = profileOf()
  /** The context's listeners, unhooked by the stop (the registry memo's `internal/service` one among them). */
  const listeners = []
  const hooked = off => { if (typeof off === 'function') listeners.push(off); return off }
  // The agent registry, looked up through cordis once and again only after cordis reports the `agents`
  // service changed (lib/host.js serviceMemo): the refresh gathers the record every second. The web
  // server's URL comes memoized the same way (`baseUrl`, index.js).
  const registry = serviceMemo({ on: (name, fn) => hooked(ctx.on(name, fn)) }, 'agents', () => ctx.agents)
  let busy = false
  let stopped = false
  /** A change arrived while a write was in flight: look again once it is done. */
  let again = false
  /** A refresh fell on a write in flight: refresh once it is done (keeps the record's age ≤ ~1 s). */
  let refreshAgain = false
  /** `[stopping, sessions]` of the record last written, as JSON. */
  let written = null
  /** The armed debounce timer, or null. */
  let soon = null
  /** The sessions of the record last written. */
  let lastSessions = []
  /** The sessions listed since the stop signal came (the process holds them until it exits), or null. */
  let held = null
  const gather = () => {
    const record = presenceRecord(ctx, registry, { hostVersion, baseUrl: baseUrl(), startedAt, profile, mailbox })
    if (!isStopping(ctx)) return record
    held = union(record.sessions, held ?? lastSessions)
    return { ...record, baseUrl: null, mailbox: false, stopping: true, sessions: held }
  }
  /** Write `record` (`key`: its listedKey); its sessions are then what this process last published. */
  const write = async (record, key = listedKey(record)) => {
    await core.publishPresence(JSON.stringify(record), dshHome())
    lastSessions = record.sessions
    written = key
  }
  /** After the signal, the dispose's record: once, after any write in flight. */
  const writeLast = async () => {
    busy = true
    try { await write(gather()) } catch {} finally { busy = false }
  }
  const publish = async ({ ifChanged = false } = {}) => {
    if (stopped) return
    if (busy) {
      if (ifChanged) again = true
      else refreshAgain = true
      return
    }
    busy = true
    try {
      const record = gather()
      const key = listedKey(record)
      if (ifChanged && key === written) return
      await write(record, key)
    } catch {
      // a home we cannot write: peers simply do not see this process; try again next tick
    } finally {
      busy = false
      // stopped while this write was in flight: it may have landed after the withdrawal (or, after the
      // signal, after the last record)
      if (stopped) {
        if (isStopping(ctx)) void writeLast()
        else withdraw()
      } else if (refreshAgain) {
        refreshAgain = again = false
        void publish()
      } else if (again) {
        again = false
        changed()
      }
    }
  }
  /** Something the record lists may have changed: republish once the burst settles. */
  const changed = () => {
    if (stopped || soon !== null) return
    soon = setTimeout(() => {
      soon = null
      void publish({ ifChanged: true })
    }, debounceMs)
    soon.unref?.()
  }
  listeners.push(
    attempt(() => ctx.on('agent/status', changed), null),
    attempt(() => ctx.on('agent/created', changed), null),
    attempt(() => ctx.on('agent/disposed', changed), null),
    onSessionEvent(ctx, (_session, event) => { if (soon === null && STATUS_EVENTS.has(event?.type)) changed() }),
    attempt(() => onStopping(ctx, () => void publish()), null),
  )
  const withdraw = () => {
    try { core.withdrawPresence?.(dshHome()) } catch {}
  }
  const timer = setInterval(() => publish(), refreshMs)
  timer.unref?.()
  process.once('exit', withdraw)
  void publish()
  const stop = () => {
    if (stopped) return
    stopped = true
    clearInterval(timer)
    if (soon !== null) clearTimeout(soon)
    for (const off of listeners) if (typeof off === 'function') attempt(off, null)
    if (isStopping(ctx)) {
      // the process still holds its sessions until it exits: say it is stopping (the 'exit' withdraws)
      if (!busy) void writeLast()
      return
    }
    process.off('exit', withdraw)
    withdraw()
  }
  return stop
}
