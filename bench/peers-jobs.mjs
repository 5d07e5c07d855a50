// What the machines benches share: bench/peers-plugin beside the plugin in a profile, and the job runner
// that drives it (files in box.dir/jobs: the runner and the host only share the home's filesystem, so a host
// in another network namespace is driven the same way).
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const HERE = dirname(fileURLToPath(import.meta.url))
const sleep = ms => new Promise(r => setTimeout(r, ms))

/** Install bench/peers-plugin into the profile `pdir` beside the plugin. */
export function addPeersPlugin(pdir) {
  cpSync(join(HERE, 'peers-plugin'), join(pdir, 'node_modules', 'dsh-session-mail-bench-peers'), { recursive: true })
  const pkg = JSON.parse(readFileSync(join(pdir, 'package.json'), 'utf8'))
  pkg.dependencies = { ...pkg.dependencies, 'dsh-session-mail-bench-peers': '0.0.0' }
  pkg.dsh.profile.bundles = [...pkg.dsh.profile.bundles, 'dsh-session-mail-bench-peers']
  writeFileSync(join(pdir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
}

/** A job runner for the peers plugin of `box` (files in box.dir/jobs, see bench/peers-plugin); set before the boot. */
export function jobs(box) {
  const dir = join(box.dir, 'jobs'); mkdirSync(dir)
  box.env.DSH_BENCH_PEERS_DIR = dir
  let n = 0
  return async (j, timeout = 60_000) => {
    const k = ++n
    writeFileSync(join(dir, `.job-${k}.tmp`), JSON.stringify(j))
    renameSync(join(dir, `.job-${k}.tmp`), join(dir, `job-${k}.json`))
    const file = join(dir, `result-${k}.json`)
    for (const t0 = Date.now(); !existsSync(file); await sleep(2)) if (Date.now() - t0 > timeout) throw new Error(`job ${j.op} timed out`)
    const r = JSON.parse(readFileSync(file, 'utf8'))
    if (r.error) throw new Error(r.error)
    return r
  }
}
