#!/usr/bin/env node
// `npm run bench:peers` (also run at the end of `npm run bench` unless --no-host / --no-peers): the
// live-peer rows of issue 8, each a ratio against a baseline measured in the same run.
//
//   scale        a home with 20,000 small session logs: sessions_list cold (fresh process that finds the listing
//                index an earlier one left) ≤ 0.5 s, baseline the same call with the index off; and warm (same
//                process, next call) ≤ 20 ms; baseline: reading every log file once in Node.
//   live read    sessions_read of a 100 MiB session LIVE in a real rc.8 host (run inside the host by
//                bench/peers-plugin) vs the read of the same file at rest (fresh process); target ≤ 1.2×.
//   stall        the host's event loop while each tool runs in it (list, read at rest, read live, send),
//                seen from outside: a loopback request to the host's own web server every 20 ms; the
//                worst answer time during the call, target ≤ 50 ms (baseline: the same probe while idle).
//   send         sessions_send in the host vs a raw fetch of the same envelope to the same route, in the
//                same process; target ≤ 1.1× (median of alternating runs).
//
//   The big sessions are made live by resuming them (session.create with their own id), not by a model turn.
//
// Options: --quick (10 MiB live session), --no-host (scale rows only), --no-scale (host rows only), --reps N
// (default 3: also the number of live copies of the big session, one cold live read each), --browser (issue 17:
// the host rows with a headless Chromium connected to the host's web UI, our client half loaded and a session's
// Agent mail tab open, polling its route, for the whole measurement).
import { spawn } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import zlib from 'node:zlib'
import { cpus, loadavg } from 'node:os'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const { ensureCorpus, QUICK, benchDir, projectKey } = await import('./gen-corpus.mjs')
const H = await import('../test/real-host/harness.mjs')

const argv = process.argv.slice(2)
const QUICK_MODE = argv.includes('--quick') || process.env.BENCH_QUICK === '1'
const NO_HOST = argv.includes('--no-host')
const NO_SCALE = argv.includes('--no-scale')
const BROWSER = argv.includes('--browser')
const REPS = argv.includes('--reps') ? Math.max(1, Number(argv[argv.indexOf('--reps') + 1]) || 3) : 3
const SCALE_N = 20_000
const opt = (name, dflt) => argv.includes(name) ? Math.max(1, Number(argv[argv.indexOf(name) + 1]) || dflt) : dflt
const SPREAD_CALLS = opt('--spread-calls', 50)
const SPREAD_MS = opt('--spread-ms', 60_000)
/** Nearest-rank quantile (p in 0..1) of the finite samples. */
const quantile = (xs, p) => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); return a.length ? a[Math.min(a.length - 1, Math.ceil(p * a.length) - 1)] : NaN }
const log = s => process.stderr.write(`bench-peers: ${s}\n`)
const sleep = ms => new Promise(r => setTimeout(r, ms))
const median = xs => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); if (!a.length) return NaN; const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2 }
const fmt = ms => !Number.isFinite(ms) ? '—' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms`
const rows = []
const LOAD0 = loadavg(); const T0 = performance.now()
const row = (metric, measured, baseline, ratio, target, pass) => rows.push({ metric, measured, baseline, ratio, target, verdict: pass === undefined ? 'info' : pass === null ? 'SKIP' : pass ? 'PASS' : 'MISS' })

function child(job, env = {}) {
  return new Promise((res) => {
    const p = spawn(process.execPath, [join(HERE, 'child.mjs'), JSON.stringify(job)], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let out = ''; let err = ''
    p.stdout.on('data', d => { out += d }); p.stderr.on('data', d => { err += d })
    p.on('close', code => {
      const line = out.split('\n').find(l => l.startsWith('BENCH_RESULT '))
      res(code === 0 && line ? JSON.parse(line.slice(13)) : { error: `child ${job.op} exited ${code}: ${err.slice(-500)}` })
    })
  })
}

// ---------------------------------------------------------------- scale: 20,000 sessions
// The logs and their folders are dated when their session was (createdAt, 2023), as a home's old sessions are: a
// log changed in the last minute is re-checked on every listing (crates/store/src/index.rs LIST_RECENT, a session
// that is probably running), so a home written just now would measure 20,000 running sessions. (`.complete-2`: homes
// written before the logs were dated are written again.)
function ensureScaleHome(n = SCALE_N) {
  const home = join(benchDir(), `scale-${n}`)
  const stamp = join(home, '.complete-2')
  if (existsSync(stamp)) return home
  rmSync(home, { recursive: true, force: true })
  log(`writing ${n} small session logs to ${home}…`)
  for (let i = 0; i < n; i++) {
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
    const at = lines[0].createdAt / 1000
    utimesSync(join(dir, 'session.jsonl.zstd'), at, at)
    utimesSync(dir, at, at)
  }
  // a project folder changed when its newest session was made
  const newest = (1_700_000_000_000 + (n - 1) * 1000) / 1000
  for (const p of readdirSync(join(home, 'sessions'))) utimesSync(join(home, 'sessions', p), newest, newest)
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
  // The listing index (crates/store/src/listindex.rs) in a cache folder of this run: a first listing writes it
  // (on a thread of its own after the call; the child lives on 3 s, as a host does), the rows below find it. The
  // baseline of the cold row: the same cold call with the index off (what a first listing ever costs).
  const listCache = join(benchDir(), 'list-cache')
  rmSync(listCache, { recursive: true, force: true })
  const IX = { DSH_SESSION_MAIL_CACHE_DIR: listCache }
  const NO_IX = { ...IX, DSH_SESSION_MAIL_NO_LIST_INDEX: '1' }
  const first = await child({ op: 'list', home, limit: 200, warm: 0, lingerMs: 3000 }, IX)
  const unindexed = []
  const runs = []
  // each child: a cold call, 5 warm calls, then 2 calls each 2.1 s after the last (past LIST_STALE: a sweep unless watched)
  // and the same with change notification off (DSH_SESSION_MAIL_NO_WATCH=1): the periodic sweep, the baseline of that row
  const swept = []
  for (let i = 0; i < REPS; i++) {
    runs.push(await child({ op: 'list', home, limit: 200, warm: 5, stale: 2 }, IX))
    swept.push(await child({ op: 'list', home, limit: 200, warm: 5, stale: 2 }, { ...IX, DSH_SESSION_MAIL_NO_WATCH: '1' }))
    unindexed.push(await child({ op: 'list', home, limit: 200, warm: 0 }, NO_IX))
  }
  const load = await child({ op: 'load' })
  const bad = [first, ...runs, ...swept, ...unindexed, load].find(r => r.error)
  if (bad) { row(`list, ${SCALE_N} sessions`, 'ERROR', bad.error.slice(0, 80), '—', '—', false); return }
  const same = runs.every(r => r.sameAsCold)
  const cold = median(runs.map(r => r.coldMs))
  const coldCpu = median(runs.map(r => r.coldCpuMs)) // user + system, all threads: what the load inflates least
  const warm = median(runs.map(r => median(r.warmMs)))
  const rss = median(runs.map(r => r.rssKb))
  const coldSwept = median(swept.map(r => r.coldMs))
  const coldNoIx = median(unindexed.map(r => r.coldMs))
  const coldNoIxCpu = median(unindexed.map(r => r.coldCpuMs))
  const sameIx = [...runs, ...unindexed].every(r => r.text === first.text)
  log(`list ${SCALE_N} cold, ms: with the index ${runs.map(r => r.coldMs.toFixed(0)).join(' ')}; without ${unindexed.map(r => r.coldMs.toFixed(0)).join(' ')}; the first (writes it) ${first.coldMs.toFixed(0)}`)
  row(`list ${SCALE_N} sessions, cold (fresh process, listing index)${sameIx ? '' : ' (text differs without the index!)'}`, `${fmt(cold)} (cpu ${fmt(coldCpu)})`, `no index ${fmt(coldNoIx)} (cpu ${fmt(coldNoIxCpu)}); read all ${files} logs ${fmt(base)}; no watch ${fmt(coldSwept)}`, `${(cold / coldNoIx).toFixed(2)}× no index`, '≤ 0.5 s', sameIx && cold <= 500)
  row(`list ${SCALE_N} sessions, warm${same ? '' : ' (text differs from cold!)'}`, fmt(warm), `cold ${fmt(cold)}`, `${(warm / cold).toFixed(3)}×`, '≤ 20 ms', same && warm <= 20)
  // watched: the watcher's thread checked each folder once its watch landed (store::watch::Verify); from then on a
  // call looks only at folders an event marked
  const sweep = median(swept.flatMap(r => r.staleMs))
  const settled = median(runs.map(r => r.staleMs[r.staleMs.length - 1]))
  const landing = median(runs.map(r => r.staleMs[0]))
  row(`list ${SCALE_N} sessions, warm, 2.1 s after the last (watched: changed folders only)`, fmt(settled), `sweep (no watch) ${fmt(sweep)}`, `${(settled / sweep).toFixed(3)}×`, '≤ 20 ms', settled <= 20)
  row(`list ${SCALE_N} sessions, the first call 2.1 s after the last (the watches landed and the watcher checked them)`, fmt(landing), `sweep (no watch) ${fmt(sweep)}`, `${(landing / sweep).toFixed(3)}×`, '—')
  // No tail: after a cold call, SPREAD_CALLS calls spread over SPREAD_MS in the same process (the watcher's
  // thread adds and checks the watches, the 2 s rule comes due, as in a host): p50/p99/max of every warm call.
  const spread = {}
  for (const [n, target] of [[SCALE_N, 20], [2000, 10]]) {
    const h = n === SCALE_N ? home : ensureScaleHome(n)
    if (n !== SCALE_N) await child({ op: 'list', home: h, limit: 200, warm: 0, lingerMs: 2000 }, IX) // its index
    log(`list ${n} sessions: a cold call, then ${SPREAD_CALLS} calls over ${(SPREAD_MS / 1000).toFixed(0)} s…`)
    const r = await child({ op: 'list-spread', home: h, limit: 200, calls: SPREAD_CALLS, spanMs: SPREAD_MS }, IX)
    if (r.error) { row(`list ${n} sessions, spread`, 'ERROR', r.error.slice(0, 80), '—', '—', false); continue }
    const [p50, p99, max] = [0.5, 0.99, 1].map(p => quantile(r.warmMs, p))
    const [c50, cmax] = [0.5, 1].map(p => quantile(r.cpuMs, p))
    log(`list ${n}: wall ms ${r.warmMs.map(x => x.toFixed(1)).join(' ')}`)
    log(`list ${n}: process CPU ms (all threads, the watcher's too) ${r.cpuMs.map(x => x.toFixed(1)).join(' ')}`)
    spread[n] = { coldMs: r.coldMs, coldCpuMs: r.coldCpuMs, wallMs: r.warmMs, cpuMs: r.cpuMs, p50, p99, max, cpuP50: c50, cpuMax: cmax }
    row(`list ${n} sessions, ${r.warmMs.length} warm calls over ${(SPREAD_MS / 1000).toFixed(0)} s${r.sameAsCold ? '' : ' (text differs from cold!)'}`, `p50 ${fmt(p50)} / p99 ${fmt(p99)} / max ${fmt(max)} (cpu p50 ${fmt(c50)} / max ${fmt(cmax)})`, `cold ${fmt(r.coldMs)}`, `max/cold ${(max / r.coldMs).toFixed(3)}×`, `max ≤ ${target} ms`, r.sameAsCold && max <= target)
  }
  row(`RSS with the warm ${SCALE_N}-session listing (Δ VmRSS)`, `${((rss - load.rssKb) / 1024).toFixed(1)} MB`, `addon only ${(load.rssKb / 1024).toFixed(1)} MB`, `${(rss / load.rssKb).toFixed(2)}×`, '—')
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
  const mib = `${(big.plainBytes / 2 ** 20).toFixed(0)} MiB`
  // The live-read rows compare the live read with a read at rest of the same fold: without the read checkpoint
  // (crates/core/src/store/checkpoint.rs) on both sides, or whichever ran second would resume from the first's.
  const box = await H.makeSandbox({ env: { DSH_SESSION_MAIL_NO_CHECKPOINT: '1' } })
  const jobsDir = join(box.dir, 'jobs'); mkdirSync(jobsDir)
  box.env.DSH_BENCH_PEERS_DIR = jobsDir
  try {
    // REPS copies of the big session to make live (each one's first read is a cold one: one cold live sample
    // per copy) and REPS copies to read at rest in the host, all under their own ids (the header re-written)
    const buf = readFileSync(bigFile)
    const [[s0, e0]] = H.zstdFrames(buf)
    const header = JSON.parse(zlib.zstdDecompressSync(buf.subarray(s0, e0)).toString('utf8').split('\n')[0])
    const copyId = (kind, i) => `session-bench0000-${kind}-4000-8000-${String(i).padStart(12, '0')}`
    const LIVE = [big.id, ...Array.from({ length: REPS - 1 }, (_, i) => copyId('live', i + 1))]
    const REST = Array.from({ length: REPS }, (_, i) => copyId('rest', i + 1))
    const dst = (id) => join(box.home, 'sessions', projectKey(header.cwd), id, 'session.jsonl.zstd')
    for (const id of [...LIVE, ...REST]) {
      mkdirSync(dirname(dst(id)), { recursive: true })
      writeFileSync(dst(id), id === big.id ? buf : cloneLog(buf, big.id, id))
    }
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
    if (BROWSER) {
      const { launchBrowser, chromiumVersion } = await import('../test/real-host/browser.mjs')
      await web.prompt(S, 'a session for the browser to show')
      await web.waitFor(S, ev => H.turnEndCount(ev) >= 1 && H.isIdle(ev))
      const b = await launchBrowser()
      box.webs.push({ stop: () => b.close() })
      const page = await b.page(web.base + '/')
      await page.getByRole('button', { name: 'Continue' }).first().click({ timeout: 8000 }).catch(() => {})
      await page.getByText('Ungrouped').first().click({ timeout: 20_000 })
      await page.getByText('Fake title', { exact: true }).first().click({ timeout: 20_000 })
      await page.getByRole('tab', { name: 'Agent mail' }).first().click({ timeout: 20_000 })
      await page.locator('[data-dsh-session-mail-view="ready"]').waitFor({ timeout: 20_000 })
      log(`a browser is connected (${chromiumVersion()}): the client half is loaded and an Agent mail tab is open`)
    }
    // Make the big sessions live WITHOUT a model turn: rc.8 `session.create` with a client-chosen `sessionId`
    // of a stored session resumes it (packages/host/apiproxy/src/api-proxy.ts `ensureSession`: a persisted
    // identity whose header cwd matches -> `ctx.agents.resume({resumeSessionId})`, no prompt, no LLM call;
    // installed as dsh-host-apiproxy/lib/index.js `create` -> `ensureSession`). A prompt would make the host
    // send the whole history to the (fake) LLM: for 100 MiB that did not finish in 5 min.
    const resume = { ms: [], stall: [], rssMB: [] }
    for (const id of LIVE) {
      log(`making a ${mib} session live in the host (session.create resumes it; the host loads its log)…`)
      const t0 = performance.now()
      const resumed = await web.rpc('session.create', { sessionId: id, cwd: header.cwd })
      if (resumed.sessionId !== id) throw new Error(`session.create answered ${resumed.sessionId}, not ${id}`)
      let st
      for (let t1 = Date.now(); ; await sleep(100)) {
        st = await job({ op: 'status', id })
        if (st.live && st.status === 'idle') break
        if (Date.now() - t1 > 120_000) throw new Error(`${id} was not live and idle 2 min after session.create: ${JSON.stringify(st)}`)
      }
      resume.ms.push(performance.now() - t0); resume.stall.push(worst(t0, performance.now())); resume.rssMB.push(st.rssMB)
      log(`  live in ${fmt(resume.ms.at(-1))}; the host's own stall while resuming: ${fmt(resume.stall.at(-1))}; session.seq ${st.seq}; host RSS ${st.rssMB} MB`)
    }
    await sleep(3000) // let the host settle (its GC after loading the logs)
    const idleT0 = performance.now(); await sleep(2000); const idle = worst(idleT0, performance.now())

    // Each rep: (1) the baseline, the same file read at rest in a fresh process (its stall: CPU contention
    // alone, the host does nothing); (2) the first live read of copy i (cold cache in the host); (3) the read
    // at rest of another copy in the host (cold; the same-process baseline); (4) the host appends an event to
    // the live session (session.rename: a `session/title` event, written behind) and the live read at once
    // must show it (the flush path; steady state); (5) a list.
    const liveRead = []; const restRead = []; const restInHost = []; const appended = []
    const stall = { list: [], rest: [], live: [], appended: [], control: [], child: [], send: [] }
    const cpu = { live: [], appended: [], rest: [], list: [], send: [] } // [mainCpuMs, procCpuMs, wall ms] of each call in the host
    for (let i = 0; i < REPS; i++) {
      const c = await during(() => child({ op: 'read', home: box.home, id: LIVE[i], max: 50 }, { DSH_SESSION_MAIL_NO_CHECKPOINT: '1' }))
      if (c.r.error) throw new Error(c.r.error)
      restRead.push(c.r.coldMs); stall.child.push(c.stall)
      const l = await during(() => job({ op: 'tool', tool: 'sessions_read', args: { session_id: LIVE[i] } }))
      if (!/^session \S+ \[live/.test(l.r.text)) throw new Error(`live read: ${l.r.text.slice(0, 300)}`)
      liveRead.push(l.r.ms); stall.live.push(l.stall); cpu.live.push([l.r.mainCpuMs, l.r.procCpuMs, l.r.ms, l.r.gcMs])
      const rr = await during(() => job({ op: 'tool', tool: 'sessions_read', args: { session_id: REST[i] } }))
      if (!/^session \S+ \[cold/.test(rr.r.text)) throw new Error(`read at rest: ${rr.r.text.slice(0, 300)}`)
      restInHost.push(rr.r.ms); stall.rest.push(rr.stall); cpu.rest.push([rr.r.mainCpuMs, rr.r.procCpuMs, rr.r.ms, rr.r.gcMs])
      // control: the same append with no read, watched over the same span: what the host itself does then
      await web.rpc('session.rename', { sessionId: LIVE[0], title: `bench-control-${i}-${Date.now()}` })
      const ctl = await during(() => sleep(Math.max(20, median(appended) || 50)))
      stall.control.push(ctl.stall)
      await sleep(1000)
      const marker = `bench-live-${i}-${Date.now()}`
      const renamed = await web.rpc('session.rename', { sessionId: LIVE[0], title: marker })
      const a = await during(() => job({ op: 'tool', tool: 'sessions_read', args: { session_id: LIVE[0], max_messages: 50 } }))
      const through = Number(/captured through seq: (\d+)/.exec(a.r.text)?.[1])
      if (!a.r.text.includes(`title: ${marker}`) || !(through >= renamed.seq)) throw new Error(`live read after an append misses it (title ${marker}, seq ${renamed.seq}): ${a.r.text.slice(0, 300)}`)
      appended.push(a.r.ms); stall.appended.push(a.stall); cpu.appended.push([a.r.mainCpuMs, a.r.procCpuMs, a.r.ms, a.r.gcMs])
      const li = await during(() => job({ op: 'tool', tool: 'sessions_list', args: { scope: 'all' } }))
      stall.list.push(li.stall); cpu.list.push([li.r.mainCpuMs, li.r.procCpuMs, li.r.ms, li.r.gcMs])
    }
    // the main thread's background CPU (probe requests, presence timer, this plugin's job poll) over 1 s idle
    const idleCpu = await job({ op: 'idle', ms: 1000 })
    // the cost of rc.8 `session.events` (a copy of the whole log when the session changed) on the main thread
    await web.rpc('session.rename', { sessionId: LIVE[0], title: `bench-events-${Date.now()}` })
    const eventsCost = await job({ op: 'eventsCost', id: LIVE[0] })
    // send vs a raw fetch of the same envelope (alternating; budgets off so every send goes out)
    const sendMs = []; const fetchMs = []
    const cfg = { budgetWindowSecs: 0, maxStackedPerSender: 0, frameMessages: false }
    // Each call waits the same pause first (the previous message's turn has ended) and the order inside a
    // pair alternates: a fetch sent right after a send met a target still busy with the send's turn, which
    // answers faster than an idle one (the first runs favoured the fetch by ~1–2 ms; bench/send.mjs)
    for (let i = 0; i < Math.max(5, REPS * 2); i++) {
      const doSend = async () => {
        await sleep(300)
        const s = await during(() => job({ op: 'tool', tool: 'sessions_send', args: { session_id: S, message: `bench ${i}` }, caller: A, config: cfg }))
        if (!s.r.text.startsWith('accepted')) throw new Error(`send: ${s.r.text.slice(0, 300)}`)
        sendMs.push(s.r.ms); stall.send.push(s.stall); cpu.send.push([s.r.mainCpuMs, s.r.procCpuMs, s.r.ms, s.r.gcMs])
      }
      const doFetch = async () => {
        await sleep(300)
        const rpcId = `dsh-session-mail:${crypto.randomUUID()}`
        const f = await job({ op: 'fetch', body: { type: 'client-request', rpcId, method: 'session.prompt', payload: { sessionId: S, mode: 'queue', content: [{ type: 'text', text: `bench ${i}` }] } } })
        fetchMs.push(f.ms)
      }
      if (i % 2 === 0) { await doSend(); await doFetch() } else { await doFetch(); await doSend() }
    }
    probing = false; await probe
    const cold = median(liveRead); const rest = median(restRead); const restHost = median(restInHost); const app = median(appended)
    row(`read live ${mib} session in the host, first read (cold)`, fmt(cold), `read at rest, fresh process ${fmt(rest)}`, `${(cold / rest).toFixed(2)}×`, '≤ 1.2×', cold / rest <= 1.2)
    row(`read live ${mib}, first read (cold), vs at rest in the host`, fmt(cold), `read at rest in the host ${fmt(restHost)}`, `${(cold / restHost).toFixed(2)}×`, '≤ 1.2×', cold / restHost <= 1.2)
    row(`read live ${mib} right after the host appended an event`, fmt(app), `read at rest, fresh process ${fmt(rest)}`, `${(app / rest).toFixed(3)}×`, '≤ 1.2×', app / rest <= 1.2)
    for (const [k, name] of [['list', 'sessions_list'], ['rest', `sessions_read at rest (${mib})`], ['live', `sessions_read live (${mib}, cold)`], ['appended', `sessions_read live (${mib}, after an append)`], ['send', 'sessions_send']]) {
      const w = Math.max(...stall[k])
      row(`host event-loop stall during ${name}`, `max ${fmt(w)}`, `idle probe max ${fmt(idle)}`, `${(w / Math.max(idle, 1)).toFixed(1)}×`, '≤ 50 ms', w <= 50)
    }
    // Main-thread CPU of the host during each call (process.threadCpuUsage in the host): the work a call puts
    // on the loop, whatever the machine's load (the stall rows above are wall times and suffer from it).
    if (idleCpu.mainCpuMs !== null) {
      const bg = idleCpu.mainCpuMs / 1000 // ms of main-thread CPU per ms of wall time, idle
      for (const [k, name] of [['live', `sessions_read live (${mib}, cold)`], ['appended', `sessions_read live (${mib}, after an append)`], ['rest', `sessions_read at rest (${mib}, cold)`], ['list', 'sessions_list'], ['send', 'sessions_send']]) {
        const main = median(cpu[k].map(x => x[0])); const proc = median(cpu[k].map(x => x[1])); const wall = median(cpu[k].map(x => x[2]))
        row(`host main-thread CPU during ${name}`, `${fmt(main)} (process ${fmt(proc)}, wall ${fmt(wall)})`, `idle main thread ${fmt(bg * wall)} per ${fmt(wall)}`, `+${fmt(Math.max(0, main - bg * wall))}`, 'flat in history size', undefined)
      }
    }
    const sm = median(sendMs); const fm = median(fetchMs)
    row('sessions_send in the host vs raw fetch of the same envelope', fmt(sm), `raw fetch ${fmt(fm)}`, `${(sm / fm).toFixed(2)}×`, '≤ 1.1×', sm / fm <= 1.1)
    return { liveRead, restRead, restInHost, appended, stall, cpu, idleCpu, eventsCost, idle, sendMs, fetchMs, resume }
  } finally {
    await box.cleanup()
  }
}

const raw = {}
if (!NO_SCALE) await scaleRows()
if (!NO_HOST) {
  try { raw.host = await hostRows() } catch (e) { row('real-host peer rows', 'ERROR', String(e?.message ?? e).slice(0, 120), '—', '—', false) }
}
const cols = ['metric', 'measured', 'baseline', 'ratio', 'target', 'verdict']
const w = cols.map(c => Math.max(c.length, ...rows.map(r => String(r[c]).length)))
const line = r => '| ' + cols.map((c, i) => String(r[c]).padEnd(w[i])).join(' | ') + ' |'
console.log(line(Object.fromEntries(cols.map(c => [c, c]))))
console.log('|' + w.map(n => '-'.repeat(n + 2)).join('|') + '|')
for (const r of rows) console.log(line(r))
if (raw.host) {
  const h = raw.host; const j = xs => xs.map(x => x.toFixed(x < 10 ? 1 : 0)).join(' ')
  console.log(`raw (ms): live first reads ${j(h.liveRead)} | at rest, fresh process ${j(h.restRead)} | at rest in the host ${j(h.restInHost)} | live after an append ${j(h.appended)}`)
  console.log(`     stall max per call (ms): live cold ${j(h.stall.live)} | live appended ${j(h.stall.appended)} | same append, no read (control) ${j(h.stall.control)} | at rest in host ${j(h.stall.rest)} | at-rest read in a child (no host work) ${j(h.stall.child)} | list ${j(h.stall.list)} | send ${j(h.stall.send)} | idle ${h.idle.toFixed(1)}`)
  console.log(`     host main-thread CPU per call (ms): live cold ${j(h.cpu.live.map(x => x[0] ?? NaN))} | live appended ${j(h.cpu.appended.map(x => x[0] ?? NaN))} | at rest in host ${j(h.cpu.rest.map(x => x[0] ?? NaN))} | idle 1 s ${h.idleCpu.mainCpuMs?.toFixed(1)}; whole process: live cold ${j(h.cpu.live.map(x => x[1]))} | at rest in host ${j(h.cpu.rest.map(x => x[1]))}`)
  console.log(`     V8 GC pauses in the host per call (ms): live cold ${j(h.cpu.live.map(x => x[3] ?? NaN))} | live appended ${j(h.cpu.appended.map(x => x[3] ?? NaN))} | at rest in host ${j(h.cpu.rest.map(x => x[3] ?? NaN))} | list ${j(h.cpu.list.map(x => x[3] ?? NaN))} | send ${j(h.cpu.send.map(x => x[3] ?? NaN))} | idle 1 s ${h.idleCpu.gcMs?.toFixed(1)}`)
  console.log(`     send ${j(h.sendMs)} | raw fetch ${j(h.fetchMs)} | send main-thread CPU ${j(h.cpu.send.map(x => x[0] ?? NaN))}`)
  console.log(`     rc.8 session.events of a live ${h.eventsCost.events}-event session right after an append: ${h.eventsCost.firstMs.toFixed(2)} ms on the main thread; the copy it makes when the log changed (Object.freeze([...log])): ${h.eventsCost.copyMs.toFixed(1)} ms`)
  console.log(`     making the sessions live (session.create resume, the host's own work): ${j(h.resume.ms)} ms, host stall ${j(h.resume.stall)} ms, host RSS after ${h.resume.rssMB.join(' ')} MB`)
}
console.log(`load average (1/5/15 min): before ${LOAD0.map(x => x.toFixed(2)).join(' ')} | after ${loadavg().map(x => x.toFixed(2)).join(' ')} | ${cpus().length} CPUs | ${((performance.now() - T0) / 1000).toFixed(0)} s`)
