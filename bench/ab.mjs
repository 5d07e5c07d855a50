#!/usr/bin/env node
// `node bench/ab.mjs A.node B.node [--n 300] [--pause 5]`: two builds of the addon, one send path, interleaved in
// one process — for differences of tens of microseconds, which bench:send (a real host, ~9 ms a call, its spread
// larger than that) cannot resolve. Each round runs one `sessions_send` through A, one through B and one raw
// `fetch` of a same-sized envelope (order alternating by round), with the shipped default guards (limits raised so
// the run is not refused), to an HTTP server in this process that answers every POST as rc.8 accepts a prompt
// (`{"type":"server-response","result":{"ok":true}}`): the host's own work is left out, so what is measured is the
// addon's (its checks, its hand-overs between threads, its ledger line and queued record). Both builds write the same
// home's ledger. It prints p50 / p99 / max of each and B's ratio to A (of the medians, and the per-round ratio's
// p50). A build of another commit: `git worktree add /tmp/a <commit> && cd /tmp/a && npm ci && npm run build:test`,
// then pass `/tmp/a/dsh-session-mail.linux-x64-gnu.node`. Not a test: nothing here is a mock of the host's behaviour
// beyond the one answer.
import { createRequire } from 'node:module'
import { mkdirSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { tmpdir } from 'node:os'
import http from 'node:http'

const argv = process.argv.slice(2)
const opt = (name, dflt) => argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt
const [A, B] = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'))
if (!A || !B) {
  console.error('usage: node bench/ab.mjs A.node B.node [--n 300] [--pause 5]')
  process.exit(2)
}
const N = Math.max(10, Number(opt('--n', 300)) || 300)
const PAUSE = Math.max(0, Number(opt('--pause', 5)))
const require = createRequire(import.meta.url)
const cores = { A: require(resolve(A)), B: require(resolve(B)) }

const server = http.createServer((q, res) => {
  let b = ''
  q.on('data', d => { b += d })
  q.on('end', () => {
    let rpcId = 'x'
    try { rpcId = JSON.parse(b).rpcId ?? 'x' } catch {}
    res.setHeader('content-type', 'application/json')
    res.end(JSON.stringify({ type: 'server-response', rpcId, result: { ok: true, value: { accepted: true } } }))
  })
})
const port = await new Promise(r => server.listen(0, '127.0.0.1', () => r(server.address().port)))
const home = mkdtempSync(join(tmpdir(), 'ab-'))
const log = (id) => {
  const dir = join(home, 'sessions', '-w', id)
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'session.jsonl'), JSON.stringify({ type: 'session', version: 0, id, createdAt: 1, cwd: '/w' }) + '\n')
}
log('session-t'); log('session-me')
mkdirSync(join(home, 'dsh-session-mail'), { recursive: true, mode: 0o700 })
const req = JSON.stringify({
  tool: 'sessions_send',
  args: { session_id: 'session-t', message: 'hi' },
  caller: { sessionId: 'session-me', agentId: 'session-me', title: 'x', turn: [{ kind: 'user', rpcId: 'client-1', text: 'do it' }] },
  config: { hostApi: 'rc8', budgetPerPair: 100_000, budgetPerSender: 100_000, maxStackedPerSender: 100_000 },
  host: { dshHome: home, baseUrl: `http://127.0.0.1:${port}`, version: null, secret: null, profile: null, startedAt: Date.now() },
  live: [{ id: 'session-t', header: { type: 'session', version: 0, id: 'session-t', createdAt: 1, cwd: '/w' } }],
  peers: [],
})
const body = JSON.stringify({ type: 'client-request', rpcId: 'x', method: 'session.prompt', params: { sessionId: 'session-t', text: 'x'.repeat(400) } })
const runs = {
  A: async () => (await cores.A.run(req)).text,
  B: async () => (await cores.B.run(req)).text,
  fetch: async () => 'accepted ' + await (await fetch(`http://127.0.0.1:${port}/api/session.prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })).text(),
}
// warm-up; then a pause, so the plugin's folder is older than the ledger's racy span, as in a home in use
for (let i = 0; i < 5; i++) for (const f of Object.values(runs)) await f()
await new Promise(r => setTimeout(r, 200))
const t = { A: [], B: [], fetch: [] }
for (let i = 0; i < N; i++) {
  for (const k of (i % 2 ? ['A', 'B', 'fetch'] : ['fetch', 'B', 'A'])) {
    const t0 = performance.now()
    const out = await runs[k]()
    t[k].push(performance.now() - t0)
    if (!out.startsWith('accepted')) throw new Error(`${k}: not accepted: ${out.slice(0, 300)}`)
    await new Promise(r => setTimeout(r, PAUSE))
  }
}
server.close()
rmSync(home, { recursive: true, force: true })
const rank = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] }
const f = (x) => x.toFixed(3)
console.log(`\n${N} interleaved rounds, pause ${PAUSE} ms\n| run | p50 / p99 / max (ms) |\n|---|---|`)
for (const k of ['A', 'B', 'fetch']) console.log(`| ${k} | ${f(rank(t[k], 0.5))} / ${f(rank(t[k], 0.99))} / ${f(rank(t[k], 1))} |`)
const pair = t.A.map((a, i) => t.B[i] / a)
console.log(`B / A: ratio of medians ${(rank(t.B, 0.5) / rank(t.A, 0.5)).toFixed(3)}×, per-round ratio p50 ${rank(pair, 0.5).toFixed(3)}×; B − A p50 ${((rank(t.B, 0.5) - rank(t.A, 0.5)) * 1000).toFixed(0)} µs`)
