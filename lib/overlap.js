// Opt-in overlap notice (Config `overlapNotice`, default off: by default nothing is injected into turns).
// After a successful write/edit tool call, if a live session of the same repository changed the same path
// recently, one short notice rides along with that tool result as additional context — the same seam rc.8's
// own repeat-tool reminder uses (packages/guard/repeat-tool-reminder: a `tools/post-execute` waterfall
// listener returning `additionalContexts`). The overlap itself is the core's (`sessions_list` rows'
// `overlap`, crates/core/src/tools/list.rs), so the notice and the list always agree; so are its words
// (crates/core/src/render/notice.rs `overlap`: this passes the fresh (path, peer) pairs). Each (session,
// peer, path) is told at most once per 30 minutes.
import { userMessage } from './host.js'
import { writtenPath } from './observe.js'
import { loadCore } from './native.js'

const AGAIN_MS = 30 * 60_000

/**
 * @param {any} ctx plugin context
 * @param {(exec: any) => Promise<Array<{id: string, overlap: string[]}> | null>} overlapsFor rows of live
 *   peers in the caller's repository with their overlap (from the core), or null
 */
export function installOverlapNotice(ctx, overlapsFor, { now = Date.now } = {}) {
  const told = new Map()
  const listener = async (exec, result, next) => {
    const downstream = await next()
    try {
      if (!exec?.agent || result?.isError === true || writtenPath(exec.name, exec.arguments) === null) return downstream
      const rows = await overlapsFor(exec)
      if (!Array.isArray(rows)) return downstream
      const t = now()
      for (const [k, at] of told) if (t - at > AGAIN_MS) told.delete(k)
      const fresh = []
      for (const row of rows) {
        for (const path of row.overlap ?? []) {
          const key = `${exec.agent.id}\u0000${row.id}\u0000${path}`
          if (told.has(key)) continue
          told.set(key, t)
          fresh.push({ path: String(path), peer: String(row.id) })
        }
      }
      if (fresh.length === 0) return downstream
      const n = loadCore().core?.overlapNotice?.(fresh)
      if (!n) return downstream
      const message = userMessage(n.text, { kind: 'plugin', plugin: n.plugin, form: n.form, summary: n.summary })
      return { ...downstream, additionalContexts: [message, ...(downstream?.additionalContexts ?? [])] }
    } catch {
      return downstream
    }
  }
  try { ctx.on('tools/post-execute', listener) } catch { /* no tool pipeline events: nothing to do */ }
  return listener
}
