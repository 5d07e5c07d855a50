// Presence across host processes: this process publishes which sessions it holds live, so the
// plugin in another DSH process on the same DSH_HOME lists them as live here and routes a send to
// this process instead of resuming them itself (rc.8 has no session lock: two writers fork a log).
// The record is written by the core (atomic, owner-only: crates/core/src/presence) on a worker
// thread; this file only gathers what the host knows and keeps the timer. A record not refreshed for
// 5 s, or whose pid is gone, is ignored by readers.
import { liveAgents } from './host.js'
import { resolveDshHome } from './home.js'

const REFRESH_MS = 1000

/** `--profile <name>` / `--profile=<name>` of this process, else null. */
function profileOf(argv = process.argv) {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    if (a === '--profile' && typeof argv[i + 1] === 'string') return argv[i + 1]
    if (typeof a === 'string' && a.startsWith('--profile=')) return a.slice('--profile='.length)
  }
  return null
}

/** The record this process publishes now (the core adds pid and updatedAt). */
function presenceRecord(ctx, { hostVersion, baseUrl, startedAt, profile, mailbox }) {
  return {
    v: 1,
    profile,
    hostVersion: hostVersion ?? null,
    baseUrl: baseUrl ?? null,
    startedAt,
    mailbox, // it drains the mailbox of its live sessions (lib/mailbox.js)
    sessions: liveAgents(ctx, { files: false }).map(a => ({ id: a.id, status: a.status })), // status only, every second
  }
}

/**
 * Publish now and every REFRESH_MS while the plugin is mounted (timer unref'd: it never keeps the
 * process alive); withdraw the record when the plugin is disposed or the process exits.
 * `baseUrl` is a function (the web server's port is known only once it listens).
 */
export function startPresence(ctx, core, { hostVersion, baseUrl, startedAt = Date.now(), mailbox = false, dshHome = () => resolveDshHome() }) {
  if (typeof core?.publishPresence !== 'function') return () => {}
  const profile = profileOf()
  let busy = false
  let stopped = false
  const publish = async () => {
    if (busy || stopped) return
    busy = true
    try {
      const record = presenceRecord(ctx, { hostVersion, baseUrl: baseUrl(), startedAt, profile, mailbox })
      await core.publishPresence(JSON.stringify(record), dshHome())
    } catch {
      // a home we cannot write: peers simply do not see this process; try again next tick
    } finally {
      busy = false
    }
  }
  const withdraw = () => {
    try { core.withdrawPresence?.(dshHome()) } catch {}
  }
  const timer = setInterval(publish, REFRESH_MS)
  timer.unref?.()
  process.once('exit', withdraw)
  void publish()
  const stop = () => {
    if (stopped) return
    stopped = true
    clearInterval(timer)
    process.off('exit', withdraw)
    withdraw()
  }
  return stop
}
