// The plugin's command line started as a person runs it (bin/dsh-session-mail.mjs in a child process), bound on
// loopback (DSH_SESSION_MAIL_LINK_BIND) with Iroh's public relays refused (DSH_SESSION_MAIL_NO_PUBLIC_NETWORK):
// no packet leaves the machine. Shared by the machines tests that link temporary homes through it.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const BIN = fileURLToPath(new URL('../../bin/dsh-session-mail.mjs', import.meta.url))
export const CLI_ENV = { DSH_SESSION_MAIL_LINK_BIND: '127.0.0.1:0', DSH_SESSION_MAIL_NO_PUBLIC_NETWORK: '1' }

/**
 * Start the CLI; `.done` resolves to { code, stdout, stderr, json } (json: stdout parsed, when it is JSON);
 * `.out()` is what it printed so far.
 * @param {string[]} args
 */
export function startCli(args) {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...CLI_ENV }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d })
  const done = new Promise((resolve, reject) => {
    child.on('error', reject)
    child.on('close', (code) => {
      let json
      try { json = JSON.parse(stdout) } catch { /* text */ }
      resolve({ code, stdout, stderr, json })
    })
  })
  return { child, done, out: () => stdout }
}

/** Poll `f` (sync or async) every 50 ms until it returns something truthy; throws after `ms`. */
export async function until(f, ms = 20_000) {
  const t = Date.now()
  for (;;) {
    const v = await f()
    if (v) return v
    if (Date.now() - t > ms) throw new Error('timed out')
    await new Promise(r => setTimeout(r, 50))
  }
}
