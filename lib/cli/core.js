// The native core for the command line: the same addon the plugin loads (binding.cjs), with a
// message a person can act on when it does not load on this platform.
import { readFileSync } from 'node:fs'
import { loadCore } from '../native.js'

export const PACKAGE_DIR = new URL('../../', import.meta.url)
export const PACKAGE = JSON.parse(readFileSync(new URL('package.json', PACKAGE_DIR), 'utf8'))

export class CoreMissing extends Error {}

/** The addon, or throw CoreMissing with what to do. */
export function core() {
  const { core: c, error } = loadCore()
  if (c === undefined) {
    throw new CoreMissing(
      `the dsh-session-mail native addon does not load on this platform (${process.platform}-${process.arch}, Node ${process.version}): `
      + `${String(error?.message ?? error).split('\n')[0]}. Reinstall the package for this platform `
      + `(npm install dsh-session-mail, or npm run build in a checkout).`,
    )
  }
  return c
}

/**
 * The one ToolRequest the command line hands the core (crates/core/src/request.rs `ToolRequest`, JSON): no
 * live registry (the command line runs outside any host process), the caller when it signs as a session, the
 * host's URL when it delivers. What is left out the core fills in (its Config defaults included).
 * @param {string} tool
 * @param {Record<string, unknown>} args - the tool's arguments, as a model would pass them
 * @param {{ home: string, config?: object, caller?: string | null, baseUrl?: string | null, live?: object[] }} opts
 * @returns {string} the request as JSON
 */
export function toolRequest(tool, args, { home, config = {}, caller = null, baseUrl = null, live = [] }) {
  return JSON.stringify({
    tool,
    args,
    caller: caller === null ? null : { sessionId: caller, agentId: null, title: null },
    config,
    host: { dshHome: home, baseUrl, version: null, secret: null, profile: null },
    live,
  })
}
