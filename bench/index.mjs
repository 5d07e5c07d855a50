#!/usr/bin/env node
// `npm run bench:index` (also run by `npm run bench`): the human's mail index (issue 32) over the napi exports
// the page's routes call (`mailList`, `mailThread`), with 100,000 messages in a home written as rc.8 writes it
// (the audit ledger, and each delivery landed in its target's V0 log). A benchmark, not a test: it prints
// PASS/MISS per target, p50/p99/max, ratios against baselines measured in the same run, and exits 0 unless a
// measurement crashed. See bench/README.md "bench:index".
//
// Options: --messages N (default 100000), --sessions N (default 100), --reps N (default 200), --quick (10,000
// messages, 50 reps). Env: BENCH_DIR (default .cache/bench).
import { spawnSync } from 'node:child_process'
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { performance } from 'node:perf_hooks'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const argv = process.argv.slice(2)
const opt = (name, dflt) => { const i = argv.indexOf(name); return i >= 0 && Number(argv[i + 1]) > 0 ? Number(argv[i + 1]) : dflt }
const QUICK = argv.includes('--quick') || process.env.BENCH_QUICK === '1'
const MESSAGES = opt('--messages', QUICK ? 10_000 : 100_000)
const SESSIONS = opt('--sessions', 100)
const REPS = opt('--reps', QUICK ? 50 : 200)
const SENDS = Math.min(REPS, 100)
const BENCH_DIR = resolve(process.env.BENCH_DIR?.trim() || join(REPO, '.cache', 'bench'))
const HOME = join(BENCH_DIR, `index-home-${MESSAGES}-${SESSIONS}`)

const log = (s) => process.stderr.write(`bench:index: ${s}\n`)
const pct = (xs, q) => { const v = [...xs].sort((a, b) => a - b); return v.length ? v[Math.min(v.length - 1, Math.ceil(q * v.length) - 1)] : NaN }
const fmt = (ms) => !Number.isFinite(ms) ? '—' : ms >= 100 ? `${ms.toFixed(0)} ms` : ms >= 1 ? `${ms.toFixed(2)} ms` : `${(ms * 1000).toFixed(0)} µs`
const spread = (xs) => `p50 ${fmt(pct(xs, 0.5))} p99 ${fmt(pct(xs, 0.99))} max ${fmt(Math.max(...xs))}`

// ---------------------------------------------------------------- a deterministic home
function sfc32(a, b, c, d) {
  return () => {
    a |= 0; b |= 0; c |= 0; d |= 0
    const t = (a + b | 0) + d | 0
    d = d + 1 | 0; a = b ^ b >>> 9; b = c + (c << 3) | 0; c = c << 21 | c >>> 11; c = c + t | 0
    return (t >>> 0) / 4294967296
  }
}
const rand = sfc32(0x9e3779b9, 0x243f6a88, 0xb7e15162, 0x32)
const pick = (xs) => xs[Math.floor(rand() * xs.length)]
const SYL = ['ka', 'lo', 'mi', 'ne', 'ru', 'sa', 'to', 'vi', 'de', 'po', 'an', 'el', 'or', 'un', 'is', 'ta', 'ge', 'bo']
const VOCAB = Array.from({ length: 4000 }, () => Array.from({ length: 2 + Math.floor(rand() * 3) }, () => pick(SYL)).join(''))
const REAL = ['migration', 'schema', 'API', 'deploy', 'review', 'tests', 'passed', 'failed', 'branch', 'merge', 'database', 'index', 'release', 'rollback', 'token', 'budget', 'latency', 'cache', 'parser', 'client']
const WORDS = [...VOCAB, ...REAL, ...REAL, ...REAL]
const uuid = (n, tag) => `${tag.toString(16).padStart(8, '0')}-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
const T0 = Date.UTC(2026, 10, 1)
const iso = (ms) => new Date(ms).toISOString()
const sessionId = (i) => `session-${uuid(i, 0x5e55)}`
const rid = (n) => `dsh-session-mail:${uuid(n, 0x3a11)}`
const FROM_COLON = '\uFF1A'

class Log {
  constructor(id, i) {
    this.id = id; this.seq = 0; this.turn = 0; this.msgs = 0
    this.dir = join(HOME, 'home', 'sessions', '--w--', id)
    this.path = join(this.dir, 'session.jsonl')
    this.lines = [JSON.stringify({ type: 'session', version: 0, id, createdAt: T0 - 86_400_000 + i, cwd: '/w', delegationDepth: 0, agentPreset: 'standard' })]
  }
  ev(type, data, surface) {
    const row = { type, seq: this.seq, time: T0 + this.seq * 7, data }
    if (surface) row.surfaceOp = 'append'
    this.lines.push(JSON.stringify(row)); return this.seq++
  }
  msg(text, rpcId) { return { content: [{ type: 'text', text }], source: { kind: 'user', rpcId }, role: 'user', id: uuid(++this.msgs, 0x77) } }
  /** A delivery as rc.8 records it: inbox insertion, turn/start, claim, step/start, the landed user/message, turn/end. */
  land(text, rpcId) {
    const m = this.msg(text, rpcId)
    this.ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [m] })
    const turn = ++this.turn
    this.ev('turn/start', { turn })
    this.ev('agent/inbox/spliced', { target: 'next-turn', start: 0, removedCount: 1, inserted: [] })
    this.ev('step/start', { turn, step: 1 })
    const s = this.ev('user/message', m, true)
    this.ev('turn/end', { turn, reason: { kind: 'completed' } })
    return s
  }
  queue(text, rpcId) { this.ev('agent/inbox/spliced', { target: 'next-turn', start: 0, inserted: [this.msg(text, rpcId)] }) }
  title(t, s) { this.ev('session/title', { title: t, messageSeqs: [s], source: { kind: 'fallback' } }) }
  flushTo() { const s = this.lines.join('\n') + '\n'; this.lines = []; return s }
}

function sentence() {
  const n = 8 + Math.floor(rand() * 40)
  return Array.from({ length: n }, () => pick(WORDS)).join(' ')
}

function ledgerLine(n, time, from, to, outcome, chain, hop) {
  const line = { time: iso(time), sender: from, target: to, tool: 'sessions_send', mode: 'queue', requestId: rid(n), outcome, bodyChars: 100, bodySha256: '0'.repeat(64) }
  if (outcome === 'accepted') { line.chain = chain; line.hop = hop; line.textSha256 = '1'.repeat(64) }
  return JSON.stringify(line)
}

/** The home: SESSIONS logs and MESSAGES ledger lines; 92 % landed, 4 % queued, 4 % refused; 70 % of messages
 * continue a chain of the same pair. Reused when its manifest matches. */
function ensureHome() {
  const manifest = join(HOME, 'manifest.json')
  if (existsSync(manifest)) return JSON.parse(readFileSync(manifest, 'utf8'))
  rmSync(HOME, { recursive: true, force: true })
  const t = performance.now()
  const ids = Array.from({ length: SESSIONS }, (_, i) => sessionId(i))
  const logs = ids.map((id, i) => new Log(id, i))
  logs.forEach((l, i) => { const s = l.land('the human starts', `client-${i}`); l.title(`Planner ${i} ${pick(REAL)}`, s) })
  const ledger = []
  const chains = new Map() // pair -> [chain, hop]
  const sample = { words: [], landed: [] }
  for (let n = 0; n < MESSAGES; n++) {
    const a = Math.floor(rand() * SESSIONS)
    let b = Math.floor(rand() * (SESSIONS - 1)); if (b >= a) b++
    const pair = a < b ? `${a}:${b}` : `${b}:${a}`
    let [chain, hop] = chains.get(pair) ?? [null, 0]
    if (!chain || rand() < 0.3) { chain = rid(n); hop = 0 }
    hop++
    chains.set(pair, [chain, hop])
    const body = sentence()
    const text = `From ${ids[a]} ${FROM_COLON}\n${body}`
    const r = rand()
    const time = T0 + n * 1000
    if (r < 0.92) { logs[b].land(text, rid(n)); ledger.push(ledgerLine(n, time, ids[a], ids[b], 'accepted', chain, hop)); if (n % 97 === 0) sample.landed.push(n) } else if (r < 0.96) { logs[b].queue(text, rid(n)); ledger.push(ledgerLine(n, time, ids[a], ids[b], 'accepted', chain, hop)) } else ledger.push(ledgerLine(n, time, ids[a], ids[b], 'refused:stopped'))
    if (n % 50 === 0) sample.words.push(body.split(' ').filter(w => w.length > 3).slice(0, 2))
  }
  const plugin = join(HOME, 'home', 'dsh-session-mail')
  mkdirSync(plugin, { recursive: true, mode: 0o700 })
  writeFileSync(join(plugin, 'ledger.jsonl'), ledger.join('\n') + '\n', { mode: 0o600 })
  for (const l of logs) { mkdirSync(l.dir, { recursive: true }); writeFileSync(l.path, l.flushTo()) }
  const m = { messages: MESSAGES, sessions: SESSIONS, ids, sample, ledgerBytes: statSync(join(plugin, 'ledger.jsonl')).size, logBytes: logs.reduce((s, l) => s + statSync(l.path).size, 0), nextN: MESSAGES, writtenMs: performance.now() - t }
  writeFileSync(manifest, JSON.stringify(m))
  return m
}

// ---------------------------------------------------------------- measuring
const require = createRequire(import.meta.url)
const core = require(join(REPO, 'binding.cjs'))

/** The longest the event loop went without running a 1 ms timer while `f` ran. */
async function stalls(f, gaps) {
  let last = performance.now(); let worst = 0
  const t = setInterval(() => { const now = performance.now(); const g = now - last - 1; worst = Math.max(worst, g); gaps?.push(g); last = now }, 1)
  try { const v = await f(); return [v, worst] } finally { clearInterval(t) }
}

/** One route call: wall time, the main thread's part (the call until its promise is returned, and the parse of
 * the answer), the parsed value. */
async function call(f) {
  const t0 = performance.now()
  const p = f()
  const t1 = performance.now()
  const json = await p
  const t2 = performance.now()
  const v = JSON.parse(json)
  const t3 = performance.now()
  return { ms: t3 - t0, main: (t1 - t0) + (t3 - t2), v }
}

const UPTIME0 = (() => { try { return readFileSync('/proc/loadavg', 'utf8').trim() } catch { return '?' } })()

async function main() {
  log(`home with ${MESSAGES} messages in ${SESSIONS} sessions…`)
  const m = ensureHome()
  const home = join(HOME, 'home')
  log(`home ready (${(m.ledgerBytes / 2 ** 20).toFixed(0)} MiB ledger, ${(m.logBytes / 2 ** 20).toFixed(0)} MiB logs)`)
  rmSync(join(home, 'dsh-session-mail', 'index'), { recursive: true, force: true })
  const R = {}
  const list = (args) => call(() => core.mailList(home, JSON.stringify(args)))

  // the machine's own stall while the process does nothing (the baseline of the stall rows)
  const [, idleStall] = await stalls(() => new Promise(r => setTimeout(r, 3000)))
  // 1. the first call starts the rebuild from the ledger and the logs (a thread of its own, newest first in
  // chunks) and answers at once with `index.building`; the page asks again (every 50 ms here, every second on
  // the page) and gets the rows written so far, until `building` is gone
  const during = []; let firstRowsMs = null; let firstAnswer = null; let polls = 0
  const t0 = performance.now()
  const buildGaps = []
  const [build, buildStall] = await stalls(async () => {
    for (;;) {
      const r = await list({ limit: 50 })
      firstAnswer ??= r
      during.push(r.ms); polls++
      if (firstRowsMs === null && r.v.rows.length > 0) firstRowsMs = performance.now() - t0
      if (!r.v.index.building) return r
      await new Promise(res => setTimeout(res, 50))
    }
  }, buildGaps)
  // the baseline of the rebuild's stall: the same process idle for as long (at most 40 s), the 1 ms timer's gaps
  const idleGaps = []
  const [, idleLongStall] = await stalls(() => new Promise(r => setTimeout(r, Math.min(40_000, performance.now() - t0))), idleGaps)
  R.build = { ms: performance.now() - t0, stall: buildStall, rebuilt: firstAnswer.v.index.rebuilt, rows: build.v.index.rows, firstAnswerMs: firstAnswer.ms, firstBuilding: firstAnswer.v.index.building, firstRowsMs, polls }
  const idx = join(home, 'dsh-session-mail', 'index', 'mail.sqlite')
  const size = () => statSync(idx).size + (existsSync(idx + '-wal') ? statSync(idx + '-wal').size : 0)
  R.sizeBytes = size()
  log(`built in ${fmt(build.ms)} (${build.v.index.rows} rows, ${(R.sizeBytes / 2 ** 20).toFixed(1)} MiB)`)

  // 2. the page's first screen: 50 newest, the index up to date (every call checks the ledger and the mail that can still move)
  const first = []; const firstMain = []
  const [, firstStall] = await stalls(async () => { for (let i = 0; i < REPS; i++) { const r = await list({ limit: 50 }); first.push(r.ms); firstMain.push(r.main) } })
  // a fresh process's first screen: opens the file and checks its seals (count, XOR of 100,000 row seals)
  const fresh = []
  for (let i = 0; i < 5; i++) {
    const r = spawnSync(process.execPath, ['-e', `const c=require(${JSON.stringify(join(REPO, 'binding.cjs'))});const t=performance.now();c.mailList(${JSON.stringify(home)},'{"limit":50}').then(j=>{const v=JSON.parse(j);console.log(JSON.stringify({ms:performance.now()-t,rows:v.rows.length,rebuilt:v.index.rebuilt}))})`], { encoding: 'utf8' })
    try { fresh.push(JSON.parse(r.stdout.trim()).ms) } catch { R.freshError = r.stderr.slice(-500) }
  }
  // filtered screens: one session, held, a fate, a time range
  const filtered = []
  for (let i = 0; i < REPS; i++) {
    const s = m.ids[i % m.ids.length]
    const f = [{ session: s }, { fate: ['queued'] }, { held: false, since: T0 + (i * 397 % MESSAGES) * 1000 }, { session: s, fate: ['landed'] }][i % 4]
    filtered.push((await list({ filter: f, limit: 50 })).ms)
  }
  // the next page (keyset)
  const next = []
  let cursor = (await list({ limit: 50 })).v.next
  for (let i = 0; i < REPS && cursor; i++) { const r = await list({ limit: 50, before: cursor }); next.push(r.ms); cursor = r.v.next }

  // 3. search: words of the corpus' own bodies (1 or 2 words), and a title word
  const search = []; let hits = 0
  const [, searchStall] = await stalls(async () => {
    for (let i = 0; i < REPS; i++) {
      const w = m.sample.words[i % m.sample.words.length]
      const q = i % 5 === 4 ? 'Planner migration' : i % 2 ? w.join(' ') : w[0]
      const r = await list({ query: q, limit: 50 }); search.push(r.ms); hits += r.v.rows.length
    }
  })
  // baseline: the same one-word queries as a linear scan over the 100,000 bodies in JS memory (what a page
  // without an index would at best do once it had every text)
  const bodies = []
  for (const line of readFileSync(join(home, 'sessions', '--w--', m.ids[0], 'session.jsonl'), 'utf8').split('\n')) if (line.includes('"user/message"')) bodies.push(JSON.parse(line).data.content[0].text)
  while (bodies.length < MESSAGES) bodies.push(...bodies.slice(0, MESSAGES - bodies.length))
  const scan = []
  for (let i = 0; i < Math.min(REPS, 50); i++) {
    const w = m.sample.words[i % m.sample.words.length][0].toLowerCase()
    const t = performance.now(); let n = 0
    for (const b of bodies) if (b.toLowerCase().includes(w)) n++
    scan.push(performance.now() - t)
  }

  // 4. threads
  const thread = []; let threadRows = 0
  for (let i = 0; i < REPS; i++) {
    const n = m.sample.landed[i % m.sample.landed.length]
    const r = await call(() => core.mailThread(home, rid(n))); thread.push(r.ms); threadRows += r.v.rows.length
  }

  // 5. the hand-written ledger scan the mail tab uses today (mailView: the newest 100 ledger lines of a session and
  // their fates), against the index's session filter for the same 100
  const view = []; const viewIdx = []
  for (let i = 0; i < Math.min(REPS, 60); i++) {
    const s = m.ids[i % m.ids.length]
    let t = performance.now(); await core.mailView(home, s, 100); view.push(performance.now() - t)
    t = performance.now(); await core.mailList(home, JSON.stringify({ filter: { session: s }, limit: 100 })); viewIdx.push(performance.now() - t)
  }
  const ledgerScan = []
  for (let i = 0; i < Math.min(REPS, 60); i++) {
    const s = m.ids[i % m.ids.length]
    const t = performance.now(); await core.readLedger(home, s, T0 + (MESSAGES - 600) * 1000, null); ledgerScan.push(performance.now() - t)
  }

  // 6. a send moves mail: one ledger line and one landing appended (as the sender's core and the target's host
  // write them), then the next read's incremental pass; against the same read with nothing new
  const idle = []
  for (let i = 0; i < 30; i++) idle.push((await list({ limit: 1 })).ms)
  const pass = []; const passMain = []
  const logs = m.ids.map((id, i) => { const l = new Log(id, i); l.lines = []; return l })
  // continue each log's seq where it ended
  for (const l of logs) { const tail = readFileSync(l.path, 'utf8').trimEnd().split('\n').pop(); const j = JSON.parse(tail); l.seq = j.seq + 1; l.turn = 1e6 }
  const [, passStall] = await stalls(async () => {
    for (let i = 0; i < SENDS; i++) {
      const n = m.nextN++
      const a = i % SESSIONS; const b = (i + 1) % SESSIONS
      const body = sentence()
      appendFileSync(join(home, 'dsh-session-mail', 'ledger.jsonl'), ledgerLine(n, T0 + n * 1000, m.ids[a], m.ids[b], 'accepted', rid(n), 1) + '\n')
      logs[b].land(`From ${m.ids[a]} ${FROM_COLON}\n${body}`, rid(n))
      appendFileSync(logs[b].path, logs[b].flushTo())
      const r = await list({ limit: 1 }); pass.push(r.ms); passMain.push(r.main)
      if (r.v.rows[0]?.requestId !== rid(n)) R.passMissed = (R.passMissed ?? 0) + 1
    }
  })
  writeFileSync(join(HOME, 'manifest.json'), JSON.stringify(m))
  R.sizeAfterBytes = size()

  // ---------------------------------------------------------------- the table
  const med = (xs) => pct(xs, 0.5)
  const rows = [
    ['route call while the index is rebuilt (rows so far)', spread(during), '≤ 100 ms', pct(during, 0.99) <= 100],
    ['first screen (50 newest), index up to date', spread(first), `≤ 100 ms`, pct(first, 0.99) <= 100],
    ['first screen, fresh process (open + seal check)', spread(fresh), `≤ 100 ms`, Math.max(...fresh) <= 100],
    ['filtered screen (session / fate / time)', spread(filtered), '≤ 100 ms', pct(filtered, 0.99) <= 100],
    ['next page (keyset)', spread(next), '≤ 100 ms', pct(next, 0.99) <= 100],
    [`search (FTS5, bm25; ${(hits / REPS).toFixed(0)} hits/page avg)`, spread(search), '≤ 50 ms p99', pct(search, 0.99) <= 50],
    [`thread (${(threadRows / REPS).toFixed(1)} messages avg)`, spread(thread), '≤ 20 ms', pct(thread, 0.99) <= 20],
    ['incremental pass after one send (blocking pool)', spread(pass), 'off the main thread', true],
    ['host main thread per route call (call + JSON.parse)', spread([...firstMain, ...passMain]), 'no index work', true],
  ]
  const ratios = [
    `search / linear scan of the bodies in JS memory: ${(med(search) / med(scan)).toFixed(3)}× (p50 ${fmt(med(search))} vs ${fmt(med(scan))})`,
    `session screen (100) index / mailView's ledger scan: ${(med(viewIdx) / med(view)).toFixed(3)}× (p50 ${fmt(med(viewIdx))} vs ${fmt(med(view))}; mailView ${spread(view)})`,
    `readLedger of one session's last 10 min (the budget's read): ${spread(ledgerScan)}`,
    `incremental pass / idle read: ${(med(pass) / med(idle)).toFixed(2)}× (idle ${spread(idle)})`,
  ]
  const out = []
  out.push(`dsh-session-mail bench:index — ${new Date().toISOString()} — ${MESSAGES} messages, ${SESSIONS} sessions (${(m.ledgerBytes / 2 ** 20).toFixed(0)} MiB ledger, ${(m.logBytes / 2 ** 20).toFixed(0)} MiB logs); ${REPS} reps`)
  out.push(`rebuild from the source (background, newest first): done in ${fmt(R.build.ms)} (${R.build.rows} rows; rebuilt: ${R.build.rebuilt}); the first call answered in ${fmt(R.build.firstAnswerMs)} with building ${JSON.stringify(R.build.firstBuilding)}; the first rows (the page's first screen) after ${fmt(R.build.firstRowsMs)}; ${R.build.polls} calls while building: ${spread(during)}; event-loop stall during it ${fmt(R.build.stall)}`)
  out.push(`event-loop gaps of a 1 ms timer during the rebuild: ${spread(buildGaps)} (${buildGaps.length} ticks); the same process idle for as long: ${spread(idleGaps)} (${idleGaps.length} ticks); max ratio ${(R.build.stall / idleLongStall).toFixed(2)}×, p99 ratio ${(pct(buildGaps, 0.99) / pct(idleGaps, 0.99)).toFixed(2)}×`)
  out.push(`index size: ${(R.sizeBytes / 2 ** 20).toFixed(1)} MiB for ${R.build.rows} messages = ${(R.sizeBytes / R.build.rows * 100_000 / 2 ** 20).toFixed(1)} MiB per 100,000 (after ${SENDS} sends: ${(R.sizeAfterBytes / 2 ** 20).toFixed(1)} MiB)`)
  out.push('')
  const w = Math.max(...rows.map(r => r[0].length))
  for (const [name, s, target, ok] of rows) out.push(`${name.padEnd(w)}  ${s.padEnd(42)}  ${target.padEnd(20)}  ${ok ? 'PASS' : 'MISS'}`)
  out.push('')
  for (const r of ratios) out.push(r)
  out.push(`uptime: ${UPTIME0} → ${readFileSync('/proc/loadavg', 'utf8').trim()}`)
  out.push(`event-loop stall (max): first screens ${fmt(firstStall)}, searches ${fmt(searchStall)}, sends+passes ${fmt(passStall)}, the build ${fmt(R.build.stall)} (target ≤ 50 ms); the same process doing nothing for 3 s: ${fmt(idleStall)}`)
  if (R.passMissed) out.push(`NOTE: ${R.passMissed} of ${SENDS} sends were not the newest row after their pass`)
  if (R.freshError) out.push(`NOTE: fresh process: ${R.freshError}`)
  console.log(out.join('\n'))
  mkdirSync(BENCH_DIR, { recursive: true })
  writeFileSync(join(BENCH_DIR, 'index-results.json'), JSON.stringify({ R, samples: { during, first, fresh, filtered, next, search, scan, thread, view, viewIdx, ledgerScan, idle, pass, firstMain, passMain } }, null, 1) + '\n')
}

await main().catch((e) => { console.error(e?.stack ?? e); process.exit(1) })
