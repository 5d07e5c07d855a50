// DSH_HOME, resolved once for the whole JS side (the plugin shim, the command line, the installer).
//
// The host's rule (rc.8 `@deepseek-ai/dsh-home-paths` lib/index.js `resolveDshHome`, source
// packages/util/home-paths/src/index.ts; the same in 0.1.7): an explicit path, else `$DSH_HOME` when it is
// not blank, else `join(os.homedir(), '.dsh')`; `~`, `~/…` and `~\…` expand to the OS home; the result is
// made absolute with `path.resolve`. Like the Rust core (crates/base/src/home.rs `resolve_dsh_home`),
// a value is trimmed and a blank explicit path counts as none. test/home.test.mjs checks that this module
// and the core's `resolveDshHome` export agree.
import { homedir } from 'node:os'
import { join, resolve } from 'node:path'

/** `~`, `~/x`, `~\x` → under the OS home (the host's `expandHomePath`); anything else unchanged. */
function expandHome(path) {
  if (path === '~') return homedir()
  if (path.startsWith('~/') || path.startsWith('~\\')) return join(homedir(), path.slice(2))
  return path
}

/**
 * DSH_HOME as the host resolves it: `explicit` → `$DSH_HOME` → `~/.dsh`, absolute.
 * @param {string | null | undefined} [explicit] - e.g. a `--home` option; blank means not given
 * @param {Record<string, string | undefined>} [env]
 * @returns {string}
 */
export function resolveDshHome(explicit, env = process.env) {
  const given = typeof explicit === 'string' ? explicit.trim() : ''
  const fromEnv = typeof env.DSH_HOME === 'string' ? env.DSH_HOME.trim() : ''
  return resolve(expandHome(given || fromEnv || join(homedir(), '.dsh')))
}
