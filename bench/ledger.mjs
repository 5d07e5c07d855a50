#!/usr/bin/env node
// `node bench/ledger.mjs`: what the audit ledger's size costs one send (the core alone, no host). A send to a
// cold session with the shipped guards (budgets, stacking, loop guard) against a home whose ledger already
// holds N lines, delivered to a port that refuses (so the time is the checks and the ledger write, not a host),
// for a caller whose turn a human started and for a reply: a turn one of our deliveries opened, landed in the
// caller's log and vouched for by the ledger line that sent it to the caller (hop 1), so the loop guard looks
// the chain up in the ledger (its request id, then its chain) and lets the reply through at hop 2 to the same
// refusing port. The first call of each row prints the head of what it got (both must be `refused
// (unreachable)`: a refusal before the port would measure a shorter path). Median of 7 per row; the addon in
// the repo root is what is measured.
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
// the delivery that opened the reply's turn: sent by session-peer to the caller (hop 1 of its chain)
const LANDED = 'dsh-session-mail:00000000-0000-4000-8000-feedfacecafe'
async function run(lines) {
  const home = mkdtempSync(join(tmpdir(), 'lc-'))
  const log = (id, events) => {
    const dir = join(home, 'sessions', '-w', id); mkdirSync(dir, { recursive: true })
    const head = JSON.stringify({ type: 'session', version: 0, id, createdAt: 1, cwd: '/w' })
    writeFileSync(join(dir, 'session.jsonl'), [head, ...events.map((e, seq) => JSON.stringify({ seq, time: 2 + seq, ...e }))].join('\n') + '\n')
  }
  log('session-t', [])
  // the caller's log: the delivery landed as the first message of its current turn (as rc.8 records it)
  const landed = { id: 'm-1', role: 'user', content: [{ type: 'text', text: 'Cross-session message' }], source: { kind: 'user', rpcId: LANDED } }
  log('session-me', [{ type: 'turn/start', data: { turn: 1 } }, { type: 'user/message', data: landed, surfaceOp: 'append' }])
  mkdirSync(join(home, 'dsh-session-mail'), { recursive: true, mode: 0o700 })
  const now = Date.now()
  const line = (i, e) => JSON.stringify({ v: 1, time: new Date(now - 3_600_000 + i).toISOString(), tool: 'sessions_send', mode: 'queue', outcome: 'accepted', chars: 100, bodySha256: 'a'.repeat(64), hop: 1, ...e }) + '\n'
  let text = ''
  for (let i = 0; i < lines; i++) {
    const rid = `dsh-session-mail:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`
    text += line(i, { sender: `session-s${i % 50}`, target: `session-x${i % 70}`, requestId: rid, chain: rid })
  }
  // the line that vouches for the landed delivery: it sent LANDED to the caller, hop 1 of chain LANDED
  text += line(lines, { sender: 'session-peer', target: 'session-me', requestId: LANDED, chain: LANDED })
  writeFileSync(join(home, 'dsh-session-mail', 'ledger.jsonl'), text, { mode: 0o600 })
  const req = (turn) => JSON.stringify({ tool: 'sessions_send', args: { session_id: 'session-t', message: 'hi' }, caller: { sessionId: 'session-me', agentId: 'session-me', title: 'x', turn }, config: { hostApi: 'rc8', connectTimeoutMs: 200 }, host: { dshHome: home, baseUrl: `http://127.0.0.1:${port}`, version: null, secret: null, profile: null }, live: [], peers: [] })
  const turns = { human: [{ kind: 'user', rpcId: 'client-1', text: 'do it' }], peer: [{ kind: 'user', rpcId: LANDED, text: 'Cross-session message' }] }
  const times = { human: [], peer: [] }
  for (let k = 0; k < 7; k++) {
    for (const [name, turn] of Object.entries(turns)) {
      const t = performance.now(); const out = (await core.run(req(turn))).text; times[name].push(performance.now() - t)
      if (k === 0) console.log(`  ledger ${lines}, ${name} turn, first call: ${out.split('\n')[0].slice(0, 160)}`)
      if (!out.startsWith('refused (unreachable)')) throw new Error(`${name} turn: not the refusing port's answer: ${out.slice(0, 300)}`)
    }
  }
  const med = a => a.sort((x, y) => x - y)[a.length >> 1].toFixed(2)
  console.log(`ledger ${lines} lines + the vouching one (${(text.length / 2 ** 20).toFixed(1)} MiB): send to a cold target, human turn ${med(times.human)} ms, reply (peer turn) ${med(times.peer)} ms`)
  rmSync(home, { recursive: true, force: true })
}
for (const n of [0, 1000, 10000, 28000]) await run(n)
