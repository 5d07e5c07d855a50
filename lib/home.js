// DSH_HOME for the whole JS side (the plugin shim, the command line, the installer): the core's rule, asked, not
// repeated (crates/base/src/home.rs `resolve_dsh_home`, after the host's: rc.8 `@deepseek-ai/dsh-home-paths`
// lib/index.js `resolveDshHome`, source packages/util/home-paths/src/index.ts; the same in 0.1.7): an explicit path,
// else `$DSH_HOME` when it is not blank, else `~/.dsh`; a value is trimmed, a blank explicit path counts as none, `~`,
// `~/…` and `~\…` expand to the OS home. Made absolute here (`path.resolve`, against this process's cwd, which is the
// core's too). test/home.test.mjs pins the rule's cases and that no other module reads `$DSH_HOME` or `homedir()`.
import { resolve } from 'node:path'
import { loadCore } from './native.js'

/** The last answer without an explicit path, and what it depended on. */
let implicit = null

/**
 * DSH_HOME as the host resolves it: `explicit` → `$DSH_HOME` → `~/.dsh`, absolute.
 * @param {string | null | undefined} [explicit] - e.g. a `--home` option; blank means not given
 * @returns {string}
 */
export function resolveDshHome(explicit) {
  const { core, error } = loadCore()
  if (typeof core?.resolveDshHome !== 'function') {
    throw new Error(`DSH_HOME cannot be resolved: the dsh-session-mail native addon did not load (${String(error?.message ?? error).split('\n')[0]})`)
  }
  if (typeof explicit === 'string') return resolve(core.resolveDshHome(explicit))
  // Without an explicit path the answer depends on what the core reads (crates/base/src/home.rs: DSH_HOME,
  // HOME, USERPROFILE) and on the cwd a relative one resolves against: kept while those four are unchanged
  // (the shim asks on every tool call; the call into the core and path.resolve cost ~25 µs of the host's thread).
  const env = process.env
  const key = JSON.stringify([env.DSH_HOME ?? null, env.HOME ?? null, env.USERPROFILE ?? null, process.cwd()])
  if (implicit?.key !== key) implicit = { key, home: resolve(core.resolveDshHome(null)) }
  return implicit.home
}
