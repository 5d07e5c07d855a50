// A real owner process for the contract-host suites. A presence record counts only when /proc shows what a DSH
// host with this plugin shows (crates/core/src/presence/verify.rs): a node binary running a file at
// …/@deepseek-ai/dsh/lib/bin.js on this DSH_HOME, mapping the addon, publishing its own record through it (its
// start time), and listening on the record's loopback URL. The contract host that plays the owner's web server
// lives in the test process, so this child listens on a loopback port of its own and forwards the bytes there
// (the Host header, and so the cookie's authority, is the child's port, as for a real owner).
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'

const BINDING = fileURLToPath(new URL('../../binding.cjs', import.meta.url))

const CHILD = `'use strict'
const net = require('node:net')
const core = require(process.env.OWNER_BINDING)
const cfg = JSON.parse(process.env.OWNER_CONFIG)
let record = null
const server = net.createServer(socket => {
  const upstream = net.connect(cfg.forwardTo ?? 1, '127.0.0.1')
  socket.pipe(upstream).pipe(socket)
  upstream.on('error', () => socket.destroy())
  socket.on('error', () => upstream.destroy())
})
const publish = () => { if (record) core.publishPresence(JSON.stringify(record), process.env.DSH_HOME).catch(() => {}) }
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: server.address().port }) + '\\n')
})
setInterval(publish, 500)
require('node:readline').createInterface({ input: process.stdin }).on('line', line => {
  const msg = JSON.parse(line)
  if (msg.withdraw) { record = null; core.withdrawPresence(process.env.DSH_HOME) } else {
    record = msg.record
    core.publishPresence(JSON.stringify(record), process.env.DSH_HOME).then(() => process.stdout.write('{"published":true}\\n'), () => {})
  }
})
process.stdin.on('end', () => process.exit(0))
`

/**
 * Start the owner. `forwardTo`: the port of the contract host playing its web server (null: headless).
 * @returns {Promise<{ pid: number, baseUrl: string | null, publish(record: object): Promise<void>, withdraw(): void, stop(): void }>}
 */
export async function startOwnerProcess({ home, forwardTo = null }) {
  const dir = mkdtempSync(join(tmpdir(), 'owner-process-'))
  const lib = join(dir, 'node_modules', '@deepseek-ai', 'dsh', 'lib')
  mkdirSync(lib, { recursive: true })
  writeFileSync(join(lib, 'bin.js'), CHILD)
  const child = spawn(process.execPath, [join(lib, 'bin.js'), '--profile', 'web'], {
    env: { ...process.env, DSH_HOME: home, OWNER_BINDING: BINDING, OWNER_CONFIG: JSON.stringify({ forwardTo }) },
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const lines = createInterface({ input: child.stdout })
  const waiters = []
  lines.on('line', line => waiters.shift()?.(JSON.parse(line)))
  const next = () => new Promise(resolve => waiters.push(resolve))
  const { port } = await next()
  const baseUrl = forwardTo === null ? null : `http://127.0.0.1:${port}`
  return {
    pid: child.pid,
    baseUrl,
    async publish({ sessions, mailbox = false, startedAt = 1, hostVersion = '0.1.7', stopping = false }) {
      const done = next()
      // `stopping`: the record a process publishes from its stop signal on (lib/presence.js): no web server, no mailbox.
      const record = {
        v: 1, profile: 'web', hostVersion, baseUrl: stopping ? null : baseUrl, startedAt, mailbox: mailbox && !stopping,
        ...(stopping ? { stopping } : {}), sessions: sessions.map(id => ({ id, status: 'idle' })),
      }
      child.stdin.write(JSON.stringify({ record }) + '\n')
      await done
    },
    withdraw() { child.stdin.write('{"withdraw":true}\n') },
    stop() {
      child.stdin.end()
      child.kill()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
