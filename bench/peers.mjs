#!/usr/bin/env node
// `npm run bench:peers` (also run at the end of `npm run bench` unless --no-host / --no-peers): the
// live-peer rows of issue 8, each a ratio against a baseline measured in the same run.
//
//   scale        a home with 20,000 small session logs: sessions_list cold (fresh process) ≤ 0.5 s and warm
//                (same process, next call) ≤ 20 ms; baseline: reading every log file once in Node.
//   live read    sessions_read of a 100 MiB session LIVE in a real rc.8 host (run inside the host by
//                bench/peers-plugin) vs the read of the same file at rest (fresh process); target ≤ 1.2×.
//   stall        the host's event loop while each tool runs in it (list, read at rest, read live, send),
//                seen from outside: a loopback request to the host's own web server every 20 ms; the
//                worst answer time during the call, target ≤ 50 ms (baseline: the same probe while idle).
//   send         sessions_send in the host vs a raw fetch of the same envelope to the same route, in the
//                same process; target ≤ 1.1× (median of alternating runs).
//
// Options: --quick (10 MiB live session, fewer reps), --no-host (scale row only), --reps N.
import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import zlib from 'node:zlib'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const { ensureCorpus, QUICK, benchDir, projectKey } = await import('./gen-corpus.mjs')
const H = await import('../test/real-host/harness.mjs')

const argv = process.argv.slice(2)
const QUICK_MODE = argv.includes('--quick') || process.env.BENCH_QUICK === '1'
const NO_HOST = argv.includes('--no-host')
const REPS = argv.includes('--reps') ? Math.max(1, Number(argv[argv.indexOf('--reps') + 1]) || 3) : 3
const SCALE_N = 20_000
const log = s => process.stderr.write(`bench-peers: ${s}\n`)
const sleep = ms => new Promise(r => setTimeout(r, ms))
const median = xs => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); if (!a.length) return NaN; const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2 }
const fmt = ms => !Number.isFinite(ms) ? '—' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`
const rows = []
const row = (metric, measured, baseline, ratio, target, pass) => rows.push({ metric, measured, baseline, ratio, target, verdict: pass === null ? 'SKIP' : pass ? 'PASS' : 'MISS' })

function child(job) {
  return new Promise((res) => {
    const p = spawn(process.execPath, [join(HERE, 'child.mjs'), JSON.stringify(job)], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''; let err = ''
    p.stdout.on('data', d => { out += d }); p.stderr.on('data', d => { err += d })
    p.on('close', code => {
      const line = out.split('\n').find(l => l.startsWith('BENCH_RESULT '))
      res(code === 0 && line ? JSON.parse(line.slice(13)) : { error: `child ${job.op} exited ${code}: ${err.slice(-500)}` })
    })
  })
}

// ---------------------------------------------------------------- scale: 20,000 sessions
function ensureScaleHome() {
  const home = join(benchDir(), `scale-${SCALE_N}`)
  const stamp = join(home, '.complete')
  if (existsSync(stamp)) return home
  rmSync(home, { recursive: true, force: true })
  log(`writing ${SCALE_N} small session logs to ${home}…`)
  for (let i = 0; i < SCALE_N; i++) {
    const cwd = `/w/proj-${i % 40}`
    const id = `session-${String(i).padStart(8, '0')}-0000-4000-8000-${String(i).padStart(12, '0')}`
    const dir = join(home, 'sessions', projectKey(cwd), id)
    mkdirSync(dir, { recursive: true })
    const lines = [
      { type: 'session', version: 0, id, createdAt: 1_700_000_000_000 + i * 1000, cwd, agentPreset: 'standard', ...(i % 5 === 4 ? { origin: 'subagent', parentSession: 'session-p' } : {}) },
      { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
      { type: 'session/title', seq: 1, time: 2, data: { title: `task ${i}`, source: { kind: 'model' } } },
      { type: 'turn/end', seq: 2, time: 3, data: { turn: 1 } },
    ]
    writeFileSync(join(dir, 'session.jsonl.zstd'), zlib.zstdCompressSync(Buffer.from(lines.map(l => JSON.stringify(l)).join('\n') + '\n')))
  }
  writeFileSync(stamp, '')
  return home
}

async function scaleRows() {
  const home = ensureScaleHome()
  // baseline: open and read every log once, in Node (what any listing must at least touch)
  const t0 = performance.now()
  let files = 0
  for (const p of readdirSync(join(home, 'sessions'))) {
    for (const s of readdirSync(join(home, 'sessions', p))) { readFileSync(join(home, 'sessions', p, s, 'session.jsonl.zstd')); files++ }
  }
  const base = performance.now() - t0
  const runs = []
  for (let i = 0; i < REPS; i++) runs.push(await child({ op: 'list', home, limit: 200, warm: 5 }))
  const bad = runs.find(r => r.error)
  if (bad) { row(`list, ${SCALE_N} sessions`, 'ERROR', bad.error.slice(0, 80), '—', '—', false); return }
  const cold = median(runs.map(r => r.coldMs))
  const warm = median(runs.map(r => median(r.warmMs)))
  row(`list ${SCALE_N} sessions, cold (fresh process)`, fmt(cold), `read all ${files} logs ${fmt(base)}`, `${(cold / base).toFixed(2)}×`, '≤ 0.5 s', cold <= 500)
  row(`list ${SCALE_N} sessions, warm`, fmt(warm), `cold ${fmt(cold)}`, `${(warm / cold).toFixed(3)}×`, '≤ 20 ms', warm <= 20)
}

// ---------------------------------------------------------------- real host
/** A copy of a zstd session log under another id (the header frame re-written). */
function cloneLog(buf, oldId, newId) {
  const [[start, end]] = H.zstdFrames(buf)
  const head = zlib.zstdDecompressSync(buf.subarray(start, end)).toString('utf8').split(oldId).join(newId)
  return Buffer.concat([zlib.zstdCompressSync(Buffer.from(head)), buf.subarray(end)])
}

async function hostRows() {
  // only what these rows need: a few small sessions and one big one (not the 1 GiB log of bench/run.mjs)
  const params = { ...QUICK, sessions: 20, projects: 2, big: [{ name: 'big100m', bytes: (QUICK_MODE ? 10 : 100) * 2 ** 20, ageDays: 5 }] }
  const m = ensureCorpus(params, { log })
  const big = m.big.big100m
  const bigFile = join(m.home, big.file)
  const box = await H.makeSandbox()
  const jobsDir = join(box.dir, 'jobs'); mkdirSync(jobsDir)
  box.env.DSH_BENCH_PEERS_DIR = jobsDir
  try {
    // the big session (to be made live) and a copy of it under another id (read at rest)
    const buf = readFileSync(bigFile)
    const [[s0, e0]] = H.zstdFrames(buf)
    const header = JSON.parse(zlib.zstdDecompressSync(buf.subarray(s0, e0)).toString('utf8').split('\n')[0])
    const REST = 'session-bench0000-rest-4000-8000-000000000001'
    const dst = (id) => join(box.home, 'sessions', projectKey(header.cwd), id, 'session.jsonl.zstd')
    mkdirSync(dirname(dst(big.id)), { recursive: true }); mkdirSync(dirname(dst(REST)), { recursive: true })
    writeFileSync(dst(big.id), buf)
    writeFileSync(dst(REST), cloneLog(buf, big.id, REST))
    const pdir = H.initProfile(box, 'web')
    H.packAndInstall(pdir, REPO, { mode: 'manual' })
    cpSync(join(HERE, 'peers-plugin'), join(pdir, 'node_modules', 'dsh-session-mail-bench-peers'), { recursive: true })
    const pkg = JSON.parse(readFileSync(join(pdir, 'package.json'), 'utf8'))
    pkg.dependencies = { ...pkg.dependencies, 'dsh-session-mail-bench-peers': '0.0.0' }
    pkg.dsh.profile.bundles = [...pkg.dsh.profile.bundles, 'dsh-session-mail-bench-peers']
    writeFileSync(join(pdir, 'package.json'), JSON.stringify(pkg, null, 2) + '\n')
    const web = await H.bootWeb(box)
    let n = 0
    const job = async (j, timeout = 300_000) => {
      const k = ++n
      writeFileSync(join(jobsDir, `.job-${k}.tmp`), JSON.stringify(j))
      renameSync(join(jobsDir, `.job-${k}.tmp`), join(jobsDir, `job-${k}.json`))
      const file = join(jobsDir, `result-${k}.json`)
      const t0 = Date.now()
      while (!existsSync(file)) { if (Date.now() - t0 > timeout) throw new Error(`job ${j.op} timed out`); await sleep(20) }
      const r = JSON.parse(readFileSync(file, 'utf8'))
      if (r.error) throw new Error(r.error)
      return r
    }
    // the probe: a loopback request to the host's web server every 20 ms; [sentAt, ms]
    const probes = []
    let probing = true
    const probe = (async () => {
      while (probing) {
        const t = performance.now()
        // rc.8's cheapest API route (the dialect probe of delivery/dialect.rs): the answer time is the loop's
        try { await fetch(`${web.base}/api/host.describe`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'client-request', rpcId: `p${t}`, method: 'host.describe', payload: {} }) }).then(r => r.arrayBuffer()) } catch {}
        probes.push([t, performance.now() - t])
        const wait = 20 - (performance.now() - t)
        if (wait > 0) await sleep(wait)
      }
    })()
    const worst = (t0, t1) => Math.max(0, ...probes.filter(([t, ms]) => t + ms >= t0 && t <= t1).map(([, ms]) => ms))
    const during = async (fn) => { const t0 = performance.now(); const r = await fn(); const t1 = performance.now(); await sleep(60); return { r, stall: worst(t0, t1) } }

    const A = await web.createSession(box.ws)
    const S = await web.createSession(box.mkdir('ws-s'))
    log('making the big session live in the host (the host loads its log)…')
    await web.prompt(big.id, 'wake up')
    for (let t0 = Date.now(); ; await sleep(200)) {
      const st = await job({ op: 'status', id: big.id })
      if (st.live && st.status === 'idle') break
      if (Date.now() - t0 > 300_000) throw new Error('the big session did not become live and idle in 5 min')
    }
    await sleep(1000)
    const idleT0 = performance.now(); await sleep(2000); const idle = worst(idleT0, performance.now())

    const liveRead = []; const restRead = []; const stall = { list: [], rest: [], live: [], send: [] }
    for (let i = 0; i < REPS; i++) {
      // fresh process at rest (cold cache) vs in the host: the first live read of each rep pays the cold
      // fold too only on rep 0; later reps read what was appended (what a live read costs in steady state)
      restRead.push((await child({ op: 'read', home: box.home, id: big.id, max: 50 })).coldMs)
      const l = await during(() => job({ op: 'tool', tool: 'sessions_read', args: { session_id: big.id } }))
      if (!/^session \S+ \[live/.test(l.r.text)) throw new Error(`live read: ${l.r.text.slice(0, 300)}`)
      liveRead.push(l.r.ms); stall.live.push(l.stall)
      const rr = await during(() => job({ op: 'tool', tool: 'sessions_read', args: { session_id: REST } }))
      stall.rest.push(rr.stall)
      const li = await during(() => job({ op: 'tool', tool: 'sessions_list', args: { scope: 'all' } }))
      stall.list.push(li.stall)
    }
    // send vs a raw fetch of the same envelope (alternating; budgets off so every send goes out)
    const sendMs = []; const fetchMs = []
    const cfg = { budgetWindowSecs: 0, maxStackedPerSender: 0, frameMessages: false }
    for (let i = 0; i < Math.max(5, REPS * 2); i++) {
      const s = await during(() => job({ op: 'tool', tool: 'sessions_send', args: { session_id: S, message: `bench ${i}` }, caller: A, config: cfg }))
      if (!s.r.text.startsWith('accepted')) throw new Error(`send: ${s.r.text.slice(0, 300)}`)
      sendMs.push(s.r.ms); stall.send.push(s.stall)
      const rpcId = `dsh-session-mail:${crypto.randomUUID()}`
      const f = await job({ op: 'fetch', body: { type: 'client-request', rpcId, method: 'session.prompt', payload: { sessionId: S, mode: 'queue', content: [{ type: 'text', text: `bench ${i}` }] } } })
      fetchMs.push(f.ms)
      await sleep(300)
    }
    probing = false; await probe
    const cold0 = liveRead[0]; const rest = median(restRead)
    row(`read live ${(big.plainBytes / 2 ** 20).toFixed(0)} MiB session in the host, first (cold)`, fmt(cold0), `read at rest (fresh process) ${fmt(rest)}`, `${(cold0 / rest).toFixed(2)}×`, '≤ 1.2×', cold0 / rest <= 1.2)
    const steady = median(liveRead.slice(1))
    if (liveRead.length > 1) row('read live, same session again (steady state)', fmt(steady), `read at rest ${fmt(rest)}`, `${(steady / rest).toFixed(3)}×`, '≤ 1.2×', steady / rest <= 1.2)
    const mib = `${(big.plainBytes / 2 ** 20).toFixed(0)} MiB`
    for (const [k, name] of [['list', 'sessions_list'], ['rest', `sessions_read at rest (${mib})`], ['live', `sessions_read live (${mib})`], ['send', 'sessions_send']]) {
      const w = Math.max(...stall[k])
      row(`host event-loop stall during ${name}`, `max ${fmt(w)}`, `idle probe max ${fmt(idle)}`, `${(w / Math.max(idle, 1)).toFixed(1)}×`, '≤ 50 ms', w <= 50)
    }
    const sm = median(sendMs); const fm = median(fetchMs)
    row('sessions_send in the host vs raw fetch of the same envelope', fmt(sm), `raw fetch ${fmt(fm)}`, `${(sm / fm).toFixed(2)}×`, '≤ 1.1×', sm / fm <= 1.1)
    return { liveRead, restRead, stall, idle, sendMs, fetchMs }
  } finally {
    await box.cleanup()
  }
}

const raw = {}
await scaleRows()
if (!NO_HOST) {
  try { raw.host = await hostRows() } catch (e) { row('real-host peer rows', 'ERROR', String(e?.message ?? e).slice(0, 120), '—', '—', false) }
}
const cols = ['metric', 'measured', 'baseline', 'ratio', 'target', 'verdict']
const w = cols.map(c => Math.max(c.length, ...rows.map(r => String(r[c]).length)))
const line = r => '| ' + cols.map((c, i) => String(r[c]).padEnd(w[i])).join(' | ') + ' |'
console.log(line(Object.fromEntries(cols.map(c => [c, c]))))
console.log('|' + w.map(n => '-'.repeat(n + 2)).join('|') + '|')
for (const r of rows) console.log(line(r))
if (raw.host) console.log(`raw: live reads ${raw.host.liveRead.map(x => x.toFixed(0)).join(' ')} ms | at rest ${raw.host.restRead.map(x => x.toFixed(0)).join(' ')} ms | send ${raw.host.sendMs.map(x => x.toFixed(1)).join(' ')} | fetch ${raw.host.fetchMs.map(x => x.toFixed(1)).join(' ')}`)
