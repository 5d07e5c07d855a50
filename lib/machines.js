// Across machines (issue 31): while the plugin is mounted, this process keeps the home's machine lease —
// it holds the home's one endpoint when the home has a link and no other process holds it, and takes over
// within seconds when the holder goes (crates/link, docs/machines.md). Nothing is bound while the home has
// no link. The work is the core's, on its runtime: this file only starts and stops it.
import { resolveDshHome } from './home.js'

/** Start keeping the lease; returns the stop (the endpoint closed and awaited, the lease released). */
export function startMachines(core) {
  if (typeof core?.machinesStart !== 'function') return () => {}
  const home = resolveDshHome()
  let stopped = false
  const started = core.machinesStart(home).catch(() => false)
  return () => {
    if (stopped) return
    stopped = true
    started.finally(() => core.machinesStop(home).catch(() => {}))
  }
}
