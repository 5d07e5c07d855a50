// Across machines (issue 31): while the plugin is mounted, this process keeps the home's machine lease —
// it holds the home's one endpoint when the home has a link and no other process holds it, and takes over
// within seconds when the holder goes (crates/link, docs/machines.md). Nothing is bound while the home has
// no link. What linked machines ask runs through this process's own tools with its host facts (`here`),
// asked of this process when each request arrives (never a copy taken earlier: a session that became live
// a moment ago is served live). The work is the core's, on its runtime: this file starts and stops it.
import { resolveDshHome } from './home.js'

/**
 * Start keeping the lease; returns the stop (the endpoint closed and awaited, the lease released).
 * @param {any} core
 * @param {{ here?: (read: string) => Promise<string> }} [opts] - this process's host facts as a ToolRequest's JSON
 *   (`read`: the session a linked machine reads, flushed first; '' for any other request)
 */
export function startMachines(core, { here } = {}) {
  if (typeof core?.machinesStart !== 'function') return () => {}
  const home = resolveDshHome()
  let stopped = false
  // the core calls it on this thread when a linked machine's request arrives (src/lib.rs `here_of`)
  if (here !== undefined && typeof core.machinesServeWith === 'function') {
    try { core.machinesServeWith(home, (read) => here(read)) } catch { /* served from the store, as the command line is */ }
  }
  const started = core.machinesStart(home).catch(() => false)
  return () => {
    if (stopped) return
    stopped = true
    started.finally(() => core.machinesStop(home).catch(() => {}))
  }
}
