// Across machines (issue 31): while the plugin is mounted, this process keeps the home's machine lease —
// it holds the home's one endpoint when the home has a link and no other process holds it, and takes over
// within seconds when the holder goes (crates/link, docs/machines.md). Nothing is bound while the home has
// no link. What linked machines ask runs through this process's own tools with its host facts (`here`,
// pushed to the core every HERE_MS). The work is the core's, on its runtime: this file starts and stops it.
import { resolveDshHome } from './home.js'

/** How often this process's host facts are handed to the core for linked machines' requests. */
const HERE_MS = 2000

/**
 * Start keeping the lease; returns the stop (the endpoint closed and awaited, the lease released).
 * @param {any} core
 * @param {{ here?: () => Promise<string> }} [opts] - this process's host facts as a ToolRequest's JSON
 */
export function startMachines(core, { here } = {}) {
  if (typeof core?.machinesStart !== 'function') return () => {}
  const home = resolveDshHome()
  let stopped = false
  const push = async () => {
    if (here === undefined || typeof core.machinesHere !== 'function') return
    try { core.machinesHere(home, await here()) } catch { /* next time */ }
  }
  const started = push().then(() => core.machinesStart(home)).catch(() => false)
  const timer = here === undefined ? null : setInterval(push, HERE_MS)
  timer?.unref?.()
  return () => {
    if (stopped) return
    stopped = true
    if (timer !== null) clearInterval(timer)
    started.finally(() => core.machinesStop(home).catch(() => {}))
  }
}
