// The host's own plugin command, when it is present and usable for a profile directory.
//
// `dsh plugin --profile <name> add <spec>` (rc.8 apps/cli/src/plugin.ts `runPlugin`; 0.1.7
// packages/boot/plugin-manager/src/operations.ts `runPluginCommand`): resolves <DSH_HOME>/profiles/<name>,
// runs pnpm there (a path spec is made absolute first), then reconciles dsh.profile.bundles with the
// dependencies that declare dsh.bundle.patch; 0.1.7 also checks the plugin's dsh peers first and rolls a
// rejected install back. `remove <name>` is pnpm remove + the same reconcile. shared/host/plugin-contract.md §2.3.

import { spawnSync } from 'node:child_process'
import { basename, dirname } from 'node:path'

const WINDOWS = process.platform === 'win32'

function run(bin, args, env, timeout) {
  return spawnSync(bin, args, { env, encoding: 'utf8', timeout, shell: WINDOWS, maxBuffer: 64 * 1024 * 1024 })
}

const firstLine = text => String(text ?? '').trim().split('\n').find(Boolean) ?? ''

/**
 * Is the host's `dsh` usable for this profile directory? `DSH_BIN`, else `dsh` on PATH; it must answer
 * `--version`, the directory must be `<DSH_HOME>/profiles/<name>` (the command takes a profile name under
 * DSH_HOME), and pnpm must be on PATH (the command shells out to it; without it rc.8 exits 127).
 * @returns {{ ok: true, bin: string, version: string, home: string, name: string, env: object }
 *   | { ok: false, reason: string }}
 */
export function findDsh(profileDir, env = process.env) {
  if (basename(dirname(profileDir)) !== 'profiles') {
    return { ok: false, reason: `${profileDir} is not <DSH_HOME>/profiles/<name>, the only place \`dsh plugin --profile <name>\` reaches` }
  }
  const home = dirname(dirname(profileDir))
  const name = basename(profileDir)
  const bin = env.DSH_BIN?.trim() || 'dsh'
  const where = env.DSH_BIN?.trim() ? `DSH_BIN=${bin}` : '`dsh` on PATH'
  const childEnv = { ...env, DSH_HOME: home, DSH_TELEMETRY_DISABLED: env.DSH_TELEMETRY_DISABLED ?? '1' }
  const version = run(bin, ['--version'], childEnv, 30_000)
  if (version.error?.code === 'ENOENT') return { ok: false, reason: `no ${where}` }
  if (version.status !== 0) {
    return { ok: false, reason: `${where} does not run here (\`dsh --version\` exited ${version.status ?? version.signal}: ${firstLine(version.stderr || version.error?.message)})` }
  }
  const pnpm = run('pnpm', ['--version'], childEnv, 30_000)
  if (pnpm.status !== 0) return { ok: false, reason: `${where} is DSH ${firstLine(version.stdout)}, but pnpm is not on PATH (\`dsh plugin\` runs it)` }
  return { ok: true, bin, version: firstLine(version.stdout), home, name, env: childEnv }
}

/**
 * Run `dsh plugin --profile <name> <args…>`; returns { ok, status, output } (output: stdout + stderr).
 * @param {{ bin: string, name: string, env: object }} dsh
 */
export function dshPlugin(dsh, args) {
  const r = run(dsh.bin, ['plugin', '--profile', dsh.name, ...args], dsh.env, 600_000)
  const output = `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? `${r.error.message}\n` : ''}`
  return { ok: r.status === 0, status: r.status ?? r.signal, output }
}
