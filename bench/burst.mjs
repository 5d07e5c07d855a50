#!/usr/bin/env node
// `npm run bench:burst`: the host's event-loop stall while sends arrive from ANOTHER process (issue 30, target 2).
// A real rc.8 `dsh web` (harness sandbox, fake LLM) with the plugin installed by scripts/install.mjs holds the
// target sessions live. Senders are other processes on the same home (bench/burst-sender.mjs): the core's send
// as `dsh-session-mail send` runs it (lib/cli: the same ToolRequest, the owner found through presence, the
// message POSTed to the host's route).
//
//   burst     100 sends from 5 sender processes, 20 in flight (4 each), into one session live in the host;
//             baseline: the same burst as 100 raw POSTs of the same text to /api/session.prompt, from 5 processes
//             too. Bursts alternate raw/plugin round by round (the first changes each round); each burst goes to a
//             fresh target (made live with one turn), so no burst meets a longer log than its pair.
//   steady    one send every 100 ms for --steady-secs (default 60) from one sender process; and the same as raw POSTs.
//
// The probe: GET / every 20 ms from this process (keep-alive), from 300 ms before a burst to 1,500 ms after
// its last answer (the turns the burst queued run in that window, for both); the stall of a window is the slowest
// probe's answer time. Beside it, the host's own monitorEventLoopDelay (bench/burst-eld.mjs, preloaded): its max
// over the same window. Each series prints p50 / p99 / max over the windows; the verdict compares the max.
//
// Targets: burst stall ≤ 1.25× the raw burst's in the same run and ≤ 60 ms; steady stall ≤ 20 ms.
// Options: --rounds N (bursts of each kind, default 3), --count N (100), --senders N (5), --inflight N (20),
//          --steady-secs S (60; 0 skips), --also OTHER.node (each round also bursts sends through another build of the
//          addon — an earlier commit's — from the same sender processes' code: a baseline build in the same run), --cpu-prof DIR (the host writes a V8 CPU profile at exit; prints where its main
//          thread went per window), --no-eld, --nice N (the sender processes under `nice -n N`: a diagnostic — when
//          the stall falls with it, the stall is the senders' CPU taken from the host, not work on the host's thread)
import { spawn } from 'node:child_process'
import { mkdirSync, readFileSync, readdirSync, existsSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import http from 'node:http'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const H = await import('../test/real-host/harness.mjs')

const argv = process.argv.slice(2)
const opt = (name, dflt) => argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt
const ROUNDS = Math.max(1, Number(opt('--rounds', 3)) || 3)
const COUNT = Math.max(1, Number(opt('--count', 100)) || 100)
const SENDERS = Math.max(1, Number(opt('--senders', 5)) || 5)
const INFLIGHT = Math.max(SENDERS, Number(opt('--inflight', 20)) || 20)
const STEADY_SECS = Math.max(0, Number(opt('--steady-secs', 60)))
const CPU_PROF = opt('--cpu-prof', null)
const ELD = !argv.includes('--no-eld')
const NICE = opt('--nice', null)
const ALSO = opt('--also', null) ? resolve(opt('--also')) : null
const PROBE_MS = 20
const SETTLE_MS = 1500
const log = s => process.stderr.write(`bench-burst: ${s}\n`)
const sleep = ms => new Promise(r => setTimeout(r, ms))
const q = (xs, p) => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); return a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN }
const f1 = x => Number.isFinite(x) ? x.toFixed(1) : '—'
const ppm = xs => `${f1(q(xs, 0.5))} / ${f1(q(xs, 0.99))} / ${f1(Math.max(...xs.filter(Number.isFinite)))}`

/** GET / every PROBE_MS while on; each probe's start and answer time (ms). A probe still out when read counts as its age. */
function prober(base) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 })
  const samples = []
  let timer = null
  const out = new Set()
  const probe = () => {
    const s = { at: performance.now(), ms: NaN }
    out.add(s)
    const req = http.get(`${base}/`, { agent }, res => {
      res.resume()
      res.on('end', () => { s.ms = performance.now() - s.at; out.delete(s); samples.push(s) })
    })
    req.on('error', () => { out.delete(s) })
  }
  return {
    start() { if (timer === null) { timer = setInterval(probe, PROBE_MS); probe() } },
    stop() { clearInterval(timer); timer = null },
    /** The slowest answer among probes started in [t0, t1] (one still out counts as its age now). */
    worst(t0, t1) {
      const now = performance.now()
      const xs = samples.filter(s => s.at >= t0 && s.at <= t1).map(s => s.ms)
      for (const s of out) if (s.at >= t0 && s.at <= t1) xs.push(now - s.at)
      return { max: Math.max(...xs), p50: q(xs, 0.5), p99: q(xs, 0.99), n: xs.length }
    },
    close() { this.stop(); agent.destroy() },
  }
}

const box = await H.makeSandbox()
const eldDir = join(box.dir, 'eld'); mkdirSync(eldDir)
if (ELD) {
  box.env.DSH_BENCH_ELD_DIR = eldDir
  box.env.NODE_OPTIONS = `${box.env.NODE_OPTIONS ?? ''} --import=${join(HERE, 'burst-eld.mjs')}`.trim()
}
if (CPU_PROF) { mkdirSync(resolve(CPU_PROF), { recursive: true }); box.env.NODE_OPTIONS = `${box.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${resolve(CPU_PROF)} --cpu-prof-interval=200`.trim() }
const children = new Set()
let hostPidSeen = null
let results = null
try {
  const pdir = H.initProfile(box, 'web')
  H.packAndInstall(pdir, REPO, { mode: 'script' })
  const web = await H.bootWeb(box)
  // the host process itself: the pid of its presence record (the dsh launcher may be another node process whose
  // preload wrote a .ready file too; its pid may be reused later, so it is never signalled)
  let hostPid = null
  {
    const t0 = Date.now()
    while (hostPid === null && Date.now() - t0 < 10_000) {
      hostPid = [...H.presenceRecords(box.home).keys()][0] ?? null
      if (hostPid === null) await sleep(50)
    }
    if (hostPid === null) throw new Error('the host published no presence record')
    if (ELD && !existsSync(join(eldDir, `eld-${hostPid}.ready`))) {
      log('no in-host event-loop monitor (the preload did not run in the host): only the GET / probe')
    }
  }
  hostPidSeen = hostPid
  const eldOn = ELD && existsSync(join(eldDir, `eld-${hostPid}.ready`))
  /** The host's own event-loop delay since the last call (ms), or null. */
  const eld = async () => {
    if (!eldOn) return null
    const file = join(eldDir, `eld-${hostPid}.json`)
    const before = existsSync(file) ? readFileSync(file, 'utf8') : null
    process.kill(hostPid, 'SIGUSR2')
    const t0 = Date.now()
    while (Date.now() - t0 < 5000) {
      if (existsSync(file)) { const s = readFileSync(file, 'utf8'); if (s !== before) return JSON.parse(s) }
      await sleep(10)
    }
    return null
  }
  /** CPU time (ms) of the host process (all threads) and of its main thread, from /proc (clock ticks), or null. */
  const TICK_MS = 10 // USER_HZ 100: /proc reports CPU in ticks of 10 ms
  const cpu = () => {
    if (hostPid === null) return null
    try {
      const f = s => { const v = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(v[11]) + Number(v[12])) * TICK_MS }
      return { all: f(readFileSync(`/proc/${hostPid}/stat`, 'utf8')), main: f(readFileSync(`/proc/${hostPid}/task/${hostPid}/stat`, 'utf8')) }
    } catch { return null }
  }
  const callers = []
  for (let i = 0; i < SENDERS; i++) callers.push(await web.createSession(box.mkdir(`ws-sender-${i}`)))
  // budgets raised and the stacking guard off so a burst is not refused: what is measured is the delivery
  const config = { budgetPerPair: 1_000_000, budgetPerSender: 1_000_000, maxStackedPerSender: 0 }

  /** Spawn `n` sender processes for one series; resolves once each printed READY. */
  const senders = async (mode, target, { count, inflight, everyMs = 0, wrap, tag, core }) => {
    const per = Math.ceil(count / SENDERS)
    const procs = []
    for (let k = 0; k < (everyMs > 0 ? 1 : SENDERS); k++) {
      const n = everyMs > 0 ? count : Math.min(per, count - k * per)
      if (n <= 0) break
      const job = { mode, home: box.home, base: web.base, target, callers: everyMs > 0 ? callers : [callers[k]], count: n, inflight: everyMs > 0 ? 1 : Math.ceil(inflight / SENDERS), everyMs, wrap, config, tag, core }
      const env = { ...box.env }; delete env.NODE_OPTIONS; delete env.DSH_BENCH_ELD_DIR
      const cmd = [box.host.node, join(HERE, 'burst-sender.mjs'), JSON.stringify(job)]
      if (NICE !== null) cmd.unshift('nice', '-n', String(Number(NICE)))
      const child = spawn(cmd[0], cmd.slice(1), { cwd: box.ws, env, stdio: ['pipe', 'pipe', 'inherit'] })
      children.add(child); child.once('exit', () => children.delete(child))
      let buf = ''
      const ready = new Promise((res, rej) => {
        child.stdout.on('data', d => { buf += d; if (buf.includes('READY\n')) res() })
        child.once('exit', code => rej(new Error(`sender exited ${code} before READY`)))
      })
      const result = new Promise((res, rej) => {
        child.once('exit', code => {
          const m = /BURST_RESULT (.*)\n/.exec(buf)
          m ? res(JSON.parse(m[1])) : rej(new Error(`sender exited ${code} without a result:\n${buf.slice(-500)}`))
        })
      })
      procs.push({ child, ready, result })
    }
    await Promise.all(procs.map(p => p.ready))
    return { go: () => { for (const p of procs) p.child.stdin.end('go\n') }, results: () => Promise.all(procs.map(p => p.result)) }
  }

  /** A fresh target live in the host: created, one turn run, listed in the presence record. */
  const freshTarget = async (i) => {
    const id = await web.createSession(box.mkdir(`ws-target-${i}`))
    await web.prompt(id, `warm ${i}`)
    await H.waitForLog(box.home, id, ev => H.turnEndCount(ev) >= 1, { timeout: 30_000 })
    const t0 = Date.now()
    while (![...H.presenceRecords(box.home).values()].some(r => r.sessions?.some(s => s.id === id)) && Date.now() - t0 < 10_000) await sleep(50)
    return id
  }

  /** The turns a burst's target ran after its warm-up turn (each costs the host a system prompt and a model request). */
  const turnsOf = id => { try { return H.turnEndCount(H.readSessionLog(H.findSessionLog(box.home, id))) - 1 } catch { return NaN } }
  const probe = prober(web.base)
  probe.start()
  /** One measured window: senders spawned and ready, probe from 300 ms before go to SETTLE_MS after the last answer. */
  const measure = async (mode, target, opts) => {
    const s = await senders(mode, target, opts)
    await sleep(300)
    await eld()
    const c0 = cpu()
    const t0 = performance.now() - 300
    const mono0 = Number(process.hrtime.bigint() / 1000n) - 300_000
    s.go()
    const res = await s.results()
    const tEnd = performance.now()
    await sleep(SETTLE_MS)
    const t1 = performance.now()
    const mono1 = Number(process.hrtime.bigint() / 1000n)
    const c1 = cpu()
    const inHost = await eld()
    const calls = res.flatMap(r => r.calls)
    const refused = calls.filter(c => !c.ok)
    if (refused.length > 0) throw new Error(`${mode}: ${refused.length} of ${calls.length} not accepted, e.g. ${refused[0].text}`)
    const p = probe.worst(t0, t1)
    return { mono: [mono0, mono1], cpuMain: c0 && c1 ? c1.main - c0.main : NaN, cpuOther: c0 && c1 ? (c1.all - c0.all) - (c1.main - c0.main) : NaN, senderCpu: res.reduce((a, r) => a + r.cpuMs, 0), senderSys: res.reduce((a, r) => a + r.sysMs, 0), stall: p.max, probeP50: p.p50, probeP99: p.p99, probes: p.n, eld: inHost, burstMs: tEnd - t0 - 300, callP50: q(calls.map(c => c.ms), 0.5), callP99: q(calls.map(c => c.ms), 0.99), callMax: Math.max(...calls.map(c => c.ms)) }
  }

  // the text a send delivers around its body (the From header): the raw POSTs carry the same
  const wrap = {}
  {
    const T = await freshTarget('wrap')
    const s = await senders('send', T, { count: SENDERS, inflight: SENDERS, tag: 'wrap' })
    s.go(); await s.results()
    const ev = await H.waitForLog(box.home, T, e => H.userTexts(e).filter(u => /burst wrap /.test(u.text)).length >= SENDERS, { timeout: 30_000 })
    for (const u of H.userTexts(ev)) {
      const text = u.text
      const m = /burst wrap \d+ \d+/.exec(text)
      if (!m) continue
      const caller = callers.find(c => text.includes(c)) ?? '*'
      wrap[caller] = [text.slice(0, m.index), text.slice(m.index + m[0].length)]
    }
    log(`a send delivers ${JSON.stringify(Object.values(wrap)[0]?.[0]?.slice(0, 80))}… + the body + ${Object.values(wrap)[0]?.[1]?.length} chars; the raw POSTs carry the same`)
  }
  const load0 = loadavg()
  const out = { burst: { raw: [], plugin: [], ...(ALSO ? { also: [] } : {}) }, steady: { raw: null, plugin: null } }
  const kinds = Object.keys(out.burst)
  for (let i = 0; i < ROUNDS; i++) {
    // the kinds in turn, the first one changing each round
    const order = kinds.map((_, j) => kinds[(i + j) % kinds.length])
    for (const kind of order) {
      const T = await freshTarget(`${kind}-${i}`)
      await sleep(500)
      const r = await measure(kind === 'raw' ? 'raw' : 'send', T, { count: COUNT, inflight: INFLIGHT, wrap, tag: `${kind}${i}`, core: kind === 'also' ? ALSO : undefined })
      r.turns = turnsOf(T)
      out.burst[kind].push(r)
      log(`round ${i} ${kind}: stall ${f1(r.stall)} ms (probe p50 ${f1(r.probeP50)}), in-host max delay ${f1(r.eld?.max)} ms, host CPU main ${f1(r.cpuMain)} / other threads ${f1(r.cpuOther)} ms, senders' CPU ${f1(r.senderCpu)} ms (system ${f1(r.senderSys)}), burst ${f1(r.burstMs)} ms, turns ${r.turns}, call p50 ${f1(r.callP50)} ms`)
    }
  }
  if (STEADY_SECS > 0) {
    for (const kind of ['plugin', 'raw']) {
      const T = await freshTarget(`steady-${kind}`)
      await sleep(500)
      const r = await measure(kind === 'raw' ? 'raw' : 'send', T, { count: Math.round(STEADY_SECS * 10), everyMs: 100, wrap, tag: `steady-${kind}` })
      out.steady[kind] = r
      log(`steady ${kind}: stall ${f1(r.stall)} ms, in-host max delay ${f1(r.eld?.max)} ms, call p50 ${f1(r.callP50)} ms`)
    }
  }
  probe.close()
  const load1 = loadavg()
  const stalls = k => out.burst[k].map(r => r.stall)
  const elds = k => out.burst[k].map(r => r.eld?.max ?? NaN)
  console.log(`\nthe host's event-loop stall while sends arrive from other processes (rc.8 dsh web, ${ROUNDS} bursts of each kind, ${COUNT} calls from ${SENDERS} processes, ${INFLIGHT} in flight; load ${load0[0].toFixed(1)} → ${load1[0].toFixed(1)})`)
  console.log('| burst | stall (GET / every 20 ms) p50 / p99 / max ms | in-host event-loop delay max, p50 / p99 / max ms | host CPU, main thread / other threads, p50 ms | senders\' CPU p50 ms (system) | burst wall p50 ms | turns run by the window\'s end, p50 | call p50 / p99 / max ms (last burst) |')
  console.log('|---|---|---|---|---|---|---|---|')
  const label = k => ({ raw: 'raw session.prompt', plugin: 'sends (core, other processes)', also: `sends through ${ALSO} (--also)` })[k]
  for (const k of kinds) {
    const last = out.burst[k].at(-1)
    console.log(`| ${label(k)} | ${ppm(stalls(k))} | ${ppm(elds(k))} | ${f1(q(out.burst[k].map(r => r.cpuMain), 0.5))} / ${f1(q(out.burst[k].map(r => r.cpuOther), 0.5))} | ${f1(q(out.burst[k].map(r => r.senderCpu), 0.5))} (${f1(q(out.burst[k].map(r => r.senderSys), 0.5))}) | ${f1(q(out.burst[k].map(r => r.burstMs), 0.5))} | ${q(out.burst[k].map(r => r.turns), 0.5)} | ${f1(last.callP50)} / ${f1(last.callP99)} / ${f1(last.callMax)} |`)
  }
  const rMax = Math.max(...stalls('plugin')) / Math.max(...stalls('raw'))
  const rP50 = q(stalls('plugin'), 0.5) / q(stalls('raw'), 0.5)
  const pMax = Math.max(...stalls('plugin'))
  console.log(`burst stall, sends ÷ raw: max ${rMax.toFixed(2)}×, p50 ${rP50.toFixed(2)}× — target ≤ 1.25× and ≤ 60 ms: ${rMax <= 1.25 && pMax <= 60 ? 'PASS' : 'MISS'} (max ${f1(pMax)} ms)`)
  if (ALSO) console.log(`burst stall, sends through ${ALSO} ÷ raw: max ${(Math.max(...stalls('also')) / Math.max(...stalls('raw'))).toFixed(2)}×, p50 ${(q(stalls('also'), 0.5) / q(stalls('raw'), 0.5)).toFixed(2)}× (max ${f1(Math.max(...stalls('also')))} ms)`)
  if (STEADY_SECS > 0) {
    for (const k of ['plugin', 'raw']) {
      const r = out.steady[k]
      console.log(`steady ${k === 'raw' ? 'raw session.prompt' : 'sends'}, one every 100 ms for ${STEADY_SECS} s: stall ${f1(r.stall)} ms (probe p50 / p99 ${f1(r.probeP50)} / ${f1(r.probeP99)}), in-host delay max ${f1(r.eld?.max)} / p99 ${f1(r.eld?.p99)} ms, call p50 / p99 / max ${f1(r.callP50)} / ${f1(r.callP99)} / ${f1(r.callMax)} ms${k === 'plugin' ? ` — target ≤ 20 ms: ${r.stall <= 20 ? 'PASS' : 'MISS'}` : ''}`)
    }
  }
  results = out
  mkdirSync(join(REPO, '.cache', 'bench'), { recursive: true })
  writeFileSync(join(REPO, '.cache', 'bench', 'burst-results.json'), JSON.stringify({ ROUNDS, COUNT, SENDERS, INFLIGHT, STEADY_SECS, load0, load1, out }, null, 2))
} finally {
  for (const c of children) { try { c.kill('SIGKILL') } catch {} }
  await box.cleanup()
}

// --cpu-prof: where the host's main thread went in each window (the profile is written when the host exits)
if (CPU_PROF && results !== null && hostPidSeen !== null) {
  const file = readdirSync(resolve(CPU_PROF)).filter(n => n.includes(`.${hostPidSeen}.`) && n.endsWith('.cpuprofile')).map(n => join(resolve(CPU_PROF), n))[0]
  if (file === undefined) log(`no CPU profile of the host (pid ${hostPidSeen}) in ${CPU_PROF}`)
  else attribute(JSON.parse(readFileSync(file, 'utf8')), results)
}

/**
 * Per window, from the host's V8 CPU profile (samples on the monotonic clock, as process.hrtime): the main
 * thread's busy time; the part under the plugin's own frames (index.js, lib/, binding.cjs of the installed
 * package; a napi call's synchronous part counts in its JS caller); the part inside the host's
 * `session/event` dispatch (rc.8 invokeContainedSessionObservers: every observer's call, the host's own
 * included, with cordis' per-listener wrapping); the longest busy stretch and the plugin's share of it.
 */
function attribute (p, out) {
  const OURS = /\/dsh-session-mail\/(index\.js|lib\/|binding\.cjs)/
  const parent = new Map()
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
  const byId = new Map(p.nodes.map(n => [n.id, n]))
  const memo = new Map()
  const classify = id => {
    let v = memo.get(id)
    if (v !== undefined) return v
    let ours = false; let dispatch = false
    for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur).callFrame
      if (OURS.test(f.url)) ours = true
      if (f.functionName === 'invokeContainedSessionObservers') dispatch = true
    }
    v = { idle: byId.get(id).callFrame.functionName === '(idle)', ours, dispatch }
    memo.set(id, v)
    return v
  }
  let t = p.startTime
  const samples = p.samples.map((id, i) => { t += p.timeDeltas[i]; return { id, t, dt: p.timeDeltas[i] / 1000 } })
  const win = ([a, b]) => {
    let busy = 0; let ours = 0; let dispatch = 0; let cur = null; let longest = { ms: 0, ours: 0 }
    for (const s of samples) {
      if (s.t < a || s.t > b) continue
      const c = classify(s.id)
      if (c.idle) { cur = null; continue }
      busy += s.dt
      if (c.ours) ours += s.dt
      if (c.dispatch) dispatch += s.dt
      if (cur === null) cur = { ms: 0, ours: 0 }
      cur.ms += s.dt
      if (c.ours) cur.ours += s.dt
      if (cur.ms > longest.ms) longest = cur
    }
    return { busy, ours, dispatch, longest: longest.ms, longestOurs: longest.ours }
  }
  console.log('\nthe host\'s main thread per window (--cpu-prof; p50 / max over the windows, ms)')
  console.log('| window | busy | under the plugin\'s frames | in session/event dispatch | longest busy stretch | the plugin\'s part of it |')
  console.log('|---|---|---|---|---|---|')
  const row = (label, rs) => {
    const ws = rs.map(r => win(r.mono))
    const col = k => `${f1(q(ws.map(w => w[k]), 0.5))} / ${f1(Math.max(...ws.map(w => w[k])))}`
    console.log(`| ${label} | ${col('busy')} | ${col('ours')} | ${col('dispatch')} | ${col('longest')} | ${col('longestOurs')} |`)
  }
  row('burst, raw session.prompt', out.burst.raw)
  row('burst, sends', out.burst.plugin)
  if (out.burst.also) row('burst, sends (--also)', out.burst.also)
  for (const k of ['plugin', 'raw']) if (out.steady[k]) row(`steady, ${k === 'raw' ? 'raw session.prompt' : 'sends'}`, [out.steady[k]])
}
