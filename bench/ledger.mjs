#!/usr/bin/env node
// `node bench/ledger.mjs`: what the audit ledger's size costs one send (the core alone, no host). A send to a
// cold session with the shipped guards (budgets, stacking, loop guard) against a home whose ledger already
// holds N lines, delivered to a port that refuses (so the time is the checks and the ledger write, not a host),
// for a caller whose turn a human started and for a reply (a turn a delivery started: the loop guard looks the
// chain up). Median of 7 per row; the addon in the repo root is what is measured.
import { createRequire } from 'node:module'
import { mkdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { tmpdir } from 'node:os'
import net from 'node:net'
const require = createRequire(import.meta.url)
const core = require(join(dirname(fileURLToPath(import.meta.url)), '..', 'binding.cjs'))
// a port that refuses: bound, then closed
const port = await new Promise(r => { const s = net.createServer(); s.listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => r(p)) }) })
async function run(lines) {
  const home = mkdtempSync(join(tmpdir(), 'lc-'))
  const dir = join(home, 'sessions', '-w', 'session-t'); mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'session.jsonl'), JSON.stringify({ type: 'session', version: 0, id: 'session-t', createdAt: 1, cwd: '/w' }) + '\n')
  mkdirSync(join(home, 'dsh-session-mail'), { recursive: true, mode: 0o700 })
  const now = Date.now()
  let text = ''
  for (let i = 0; i < lines; i++) text += JSON.stringify({ v: 1, time: new Date(now - 3_600_000 + i).toISOString(), sender: `session-s${i % 50}`, target: `session-x${i % 70}`, tool: 'sessions_send', mode: 'queue', requestId: `dsh-session-mail:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, outcome: 'accepted', chars: 100, bodySha256: 'a'.repeat(64), chain: `dsh-session-mail:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, hop: 1 }) + '\n'
  writeFileSync(join(home, 'dsh-session-mail', 'ledger.jsonl'), text, { mode: 0o600 })
  const req = (turn) => JSON.stringify({ tool: 'sessions_send', args: { session_id: 'session-t', message: 'hi' }, caller: { sessionId: 'session-me', agentId: 'session-me', title: 'x', turn }, config: { hostApi: 'rc8', connectTimeoutMs: 200 }, host: { dshHome: home, baseUrl: `http://127.0.0.1:${port}`, version: null, secret: null, profile: null }, live: [], peers: [] })
  const times = { human: [], peer: [] }
  for (let k = 0; k < 7; k++) {
    for (const [name, turn] of [['human', [{ kind: 'user', rpcId: 'client-1', text: 'do it' }]], ['peer', [{ kind: 'user', rpcId: 'dsh-session-mail:00000000-0000-4000-8000-000000000007', text: 'Cross-session message' }]]]) {
      const t = performance.now(); const out = (await core.run(req(turn))).text; times[name].push(performance.now() - t)
      if (k === 0 && !out.startsWith('refused (unreachable)')) console.log(out.slice(0, 200))
    }
  }
  const med = a => a.sort((x, y) => x - y)[a.length >> 1].toFixed(2)
  console.log(`ledger ${lines} lines (${(text.length / 2 ** 20).toFixed(1)} MiB): send to a cold target, human turn ${med(times.human)} ms, reply (peer turn) ${med(times.peer)} ms`)
  rmSync(home, { recursive: true, force: true })
}
for (const n of [0, 1000, 10000, 28000]) await run(n)
