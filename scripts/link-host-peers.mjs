#!/usr/bin/env node
// Development and test only: make the plugin's peers (`@deepseek-ai/dsh-tools`,
// `@deepseek-ai/schemastery`) resolvable from this checkout by linking them from an installed
// DSH host (the one test/real-host/install-host.sh installs). Inside a real profile the host
// provides them (rc.8: the $DSH_HOME/profiles/node_modules fallback, packages/boot/app-boot/src/profile.ts).
//   node scripts/link-host-peers.mjs [HOST_DIR]   (default: $DSH_HOST_DIR or .cache/dsh-host)
import { existsSync, mkdirSync, readdirSync, rmSync, symlinkSync, lstatSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const hostDir = resolve(process.argv[2] ?? process.env.DSH_HOST_DIR ?? join(ROOT, '.cache', 'dsh-host'))
const pnpmDir = join(hostDir, 'host', 'node_modules', '.pnpm')
const PEERS = ['@deepseek-ai/dsh-tools', '@deepseek-ai/schemastery']

if (!existsSync(pnpmDir)) {
  console.error(`link-host-peers: no installed DSH host at ${hostDir} (run test/real-host/install-host.sh first)`)
  process.exit(2)
}
const entries = readdirSync(pnpmDir)
for (const peer of PEERS) {
  const prefix = peer.replace('/', '+') + '@'
  const match = entries.filter(e => e.startsWith(prefix)).sort().pop()
  if (match === undefined) {
    console.error(`link-host-peers: ${peer} is not in ${pnpmDir}`)
    process.exit(1)
  }
  const source = join(pnpmDir, match, 'node_modules', peer)
  const target = join(ROOT, 'node_modules', peer)
  mkdirSync(dirname(target), { recursive: true })
  try { if (lstatSync(target)) rmSync(target, { recursive: true, force: true }) } catch { /* absent */ }
  symlinkSync(source, target, 'dir')
  console.log(`linked ${peer} -> ${match}`)
}
