// Across machines (issue 31): while the plugin is mounted, this process keeps the home's machine lease —
// it holds the home's one endpoint when the home has a link and no other process holds it, and takes over
// within seconds when the holder goes (crates/link, docs/machines.md). Nothing is bound while the home has
// no link. What linked machines ask runs through this process's own tools with its host facts (`here`),
// asked of this process when each request arrives (never a copy taken earlier: a session that became live
// a moment ago is served live). The work is the core's, on its runtime: this file starts and stops it.
import { resolveDshHome } from './home.js'

/**
 * What the core asks of this process's host for a request from a linked machine (core `remote::Ask`, as
 * JSON): `read` — the session a linked machine reads (flushed first); `send` and `sender` — a send's target
 * and sender id (the facts a local send reads: their live entries alone); neither — every live session.
 * A string that is not such JSON (an older addon passed a read's session id, '' for any other) is read so.
 * @param {string} asked
 * @returns {{ read: string | null, send: string | null, sender: string | null }}
 */
function askOf(asked) {
  const text = v => (typeof v === 'string' ? v : null)
  let q
  try { q = JSON.parse(asked) } catch {
    // an older addon's read id ('' for any other request)
    return { read: typeof asked === 'string' && asked !== '' ? asked : null, send: null, sender: null }
  }
  if (q === null || typeof q !== 'object' || Array.isArray(q)) return { read: null, send: null, sender: null }
  const send = text(q.send)
  return { read: send === null ? text(q.read) : null, send, sender: send === null ? null : text(q.sender) }
}

/**
 * A send's host facts (what `here` answers for a send) as a ToolRequest's JSON: `request(host)` — what stays
 * from one send to the next: the tool, the core's config, this host's own fields `host` — is made into JSON
 * once, and again only when a field of `host` differs from the last (the secret, the web server's URL, the
 * home); `live`, the live entries read at this arrival, goes in as it is. ~0.06 ms less of the host's thread
 * per arriving send than building the whole request each time (docs/machines.md Known issues).
 * @param {(host: Record<string, unknown>) => Record<string, unknown>} request
 * @returns {(host: Record<string, unknown>, live: unknown[]) => string}
 */
export function sendFactsOf(request) {
  let kept = null
  return (host, live) => {
    const keys = Object.keys(host)
    if (kept === null || keys.length !== kept.keys.length || keys.some(k => host[k] !== kept.host[k])) {
      const r = request(host)
      delete r.live
      // `live` last, its value left out: `…,"live":` + the entries + `}`
      r.live = 0
      const json = JSON.stringify(r)
      kept = { host: { ...host }, keys, head: json.slice(0, -2) }
    }
    return `${kept.head}${JSON.stringify(live)}}`
  }
}

/**
 * Start keeping the lease; returns the stop (the endpoint closed and awaited, the lease released).
 * @param {any} core
 * @param {{ here?: (ask: ReturnType<typeof askOf>, home: string) => string | Promise<string> }} [opts] - this process's
 *   host facts as a ToolRequest's JSON (at once, or a Promise of it), for what the request needs (`askOf`) in the home
 *   the core serves (the one its lease is kept for)
 */
export function startMachines(core, { here } = {}) {
  if (typeof core?.machinesStart !== 'function') return () => {}
  const home = resolveDshHome()
  let stopped = false
  // the core calls it on this thread when a linked machine's request arrives (src/lib.rs `here_of`)
  if (here !== undefined && typeof core.machinesServeWith === 'function') {
    try { core.machinesServeWith(home, (asked) => here(askOf(asked), home)) } catch { /* served from the store, as the command line is */ }
  }
  const started = core.machinesStart(home).catch(() => false)
  return () => {
    if (stopped) return
    stopped = true
    started.finally(() => core.machinesStop(home).catch(() => {}))
  }
}
