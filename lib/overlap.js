// Opt-in overlap notice (Config `overlapNotice`, default off: by default nothing is injected into turns).
// After a successful write/edit tool call, if a live session of the same repository changed the same path
// recently, one short notice rides along with that tool result as additional context — the same seam rc.8's
// own repeat-tool reminder uses (packages/guard/repeat-tool-reminder: a `tools/post-execute` waterfall
// listener returning `additionalContexts`). The overlap itself is the core's (`sessions_list` rows'
// `overlap`, crates/core/src/tools/list.rs), so the notice and the list always agree. Each (session, peer,
// path) is told at most once per 30 minutes.
import { randomUUID } from 'node:crypto'
import { writtenPath } from './observe.js'

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
          fresh.push(`${path} (also changed by ${row.id})`)
        }
      }
      if (fresh.length === 0) return downstream
      const text = `Overlap notice (dsh-session-mail): another live session of this repository changed the same file recently: ${fresh.slice(0, 4).join('; ')}${fresh.length > 4 ? `; and ${fresh.length - 4} more` : ''}. Coordinate (sessions_read / sessions_send) before editing it further.`
      const message = Object.freeze({
        role: 'user',
        content: [Object.freeze({ type: 'text', text })],
        source: Object.freeze({ kind: 'plugin', plugin: 'dsh-session-mail', form: 'notice', summary: 'file overlap with a peer' }),
        id: randomUUID(),
      })
      return { ...downstream, additionalContexts: [message, ...(downstream?.additionalContexts ?? [])] }
    } catch {
      return downstream
    }
  }
  try { ctx.on('tools/post-execute', listener) } catch { /* no tool pipeline events: nothing to do */ }
  return listener
}
