// One measurement in a fresh process (spawned by bench/run.mjs; not meant to be run by hand).
// argv[2] = JSON {op, ...}. Prints exactly one line `BENCH_RESULT <json>` on stdout.
//
// Times cover the core's call only; process start and addon load are reported apart
// (`loadMs`), so "cold" means: first call in a process that has no in-process cache yet.
import { appendFileSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'
import zlib from 'node:zlib'

const job = JSON.parse(process.argv[2])

function vmHwmKb() {
  return Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1])
}
function vmRssKb() {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1])
}

const tLoad = performance.now()
// BENCH_CORE=<a .node addon (`run(json)`, or an older build's `runTool(json)`), or a module exporting runTool(json)>:
// bench another build or implementation
// (a private release build while the shared one in the repo root is a debug build; checking the bench itself).
const require = createRequire(import.meta.url)
const BENCH_CORE = process.env.BENCH_CORE
const core = !BENCH_CORE
  ? require('../binding.cjs')
  : /\.(node|cjs)$/.test(BENCH_CORE)
    ? require(BENCH_CORE)
    : await import(pathToFileURL(BENCH_CORE).href).then(m => (typeof m.runTool === 'function' ? m : m.default))
const loadMs = performance.now() - tLoad
/** The text of one call: `run` (its typed outcome's text), or the `runTool` of an older build / a module. */
const runText = typeof core.run === 'function' ? async json => (await core.run(json)).text : json => core.runTool(json)

const listRequest = (home, limit) => JSON.stringify({
  tool: 'sessions_list', args: { scope: 'all', limit }, caller: null,
  config: { maxListResults: limit }, host: { dshHome: home }, live: [],
})
const readRequest = (home, id, max) => JSON.stringify({
  tool: 'sessions_read', args: { session_id: id, max_messages: max }, caller: null,
  config: { maxReadMessages: max }, host: { dshHome: home }, live: [],
})

/** Wall time and process CPU time (all threads, user + system) of one call. */
async function timed(request) {
  const c0 = process.cpuUsage()
  const t0 = performance.now()
  const text = await runText(request)
  const ms = performance.now() - t0
  const c = process.cpuUsage(c0)
  return { ms, cpuMs: (c.user + c.system) / 1000, text }
}

function done(result) {
  process.stdout.write(`BENCH_RESULT ${JSON.stringify({ loadMs, ...result })}\n`)
}

switch (job.op) {
  case 'load': // baseline for the RSS metric: the addon loaded, nothing called
    done({ hwmKb: vmHwmKb(), rssKb: vmRssKb() })
    break

  case 'list': { // cold call, then `warm` more calls in the same process (then `stale` more, each
    // `staleAfterMs` after the last call: past the memo's LIST_STALE, every session is re-checked)
    const req = listRequest(job.home, job.limit)
    const cold = await timed(req)
    const warm = []
    let sameAsCold = true
    const t0 = performance.now()
    for (let i = 0; i < job.warm; i++) {
      if (i > 0 && performance.now() - t0 > (job.budgetMs ?? 10_000)) break // a slow list: fewer warm samples
      const w = await timed(req)
      warm.push(w.ms)
      if (w.text !== cold.text) sameAsCold = false
    }
    const rssKb = vmRssKb() // what the warm caches hold (with the addon and Node)
    const staleMs = []
    for (let i = 0; i < (job.stale ?? 0); i++) {
      await new Promise(resolve => setTimeout(resolve, job.staleAfterMs ?? 2100))
      const s = await timed(req)
      staleMs.push(s.ms)
      if (s.text !== cold.text) sameAsCold = false
    }
    done({ coldMs: cold.ms, coldCpuMs: cold.cpuMs, warmMs: warm, staleMs, rssKb, hwmKb: vmHwmKb(), sameAsCold, text: cold.text })
    // live on a while, as a host does: the listing index (crates/store/src/listindex.rs) is written by a
    // thread of its own after the cold call
    if (job.lingerMs) await new Promise(resolve => setTimeout(resolve, job.lingerMs))
    break
  }

  case 'list-spread': { // cold call, then `calls` more spread evenly over `spanMs` (the watcher's
    // thread, the memo's 2 s rule and its checks run meanwhile, as in a host): every warm call's time
    const req = listRequest(job.home, job.limit)
    const cold = await timed(req)
    const warm = []; const cpu = []
    let sameAsCold = true
    const gap = job.spanMs / job.calls
    const t0 = performance.now()
    for (let i = 0; i < job.calls; i++) {
      const due = t0 + (i + 1) * gap
      const wait = due - performance.now()
      if (wait > 0) await new Promise(resolve => setTimeout(resolve, wait))
      const w = await timed(req)
      warm.push(w.ms)
      cpu.push(w.cpuMs)
      if (w.text !== cold.text) sameAsCold = false
    }
    done({ coldMs: cold.ms, coldCpuMs: cold.cpuMs, warmMs: warm, cpuMs: cpu, sameAsCold })
    break
  }

  case 'read': { // one cold read
    const before = vmHwmKb()
    const r = await timed(readRequest(job.home, job.id, job.max))
    done({ coldMs: r.ms, coldCpuMs: r.cpuMs, hwmBeforeKb: before, hwmKb: vmHwmKb(), text: r.text })
    break
  }

  case 'read-append': { // cold read, then `reps` × (append one frame with one event; timed read)
    const req = readRequest(job.home, job.id, job.max)
    const cold = await timed(req)
    const warm = []
    const seen = []
    const opts = { params: { [zlib.constants.ZSTD_c_checksumFlag]: 1 } }
    let seq = job.lastSeq
    let time = job.lastTime
    for (let i = 0; i < job.reps; i++) {
      seq += 1
      time += 1000
      const marker = `bench-append-marker-${i}-${seq}`
      const event = {
        type: 'user/message', seq, time,
        data: {
          id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`, role: 'user',
          content: [{ type: 'text', text: `${marker}: one more prompt appended by the bench` }],
          source: { kind: 'user', rpcId: `bench-${seq}` },
        },
        surfaceOp: 'append',
      }
      appendFileSync(job.file, zlib.zstdCompressSync(Buffer.from(JSON.stringify(event) + '\n'), opts))
      const w = await timed(req)
      warm.push(w.ms)
      seen.push(w.text.includes(marker))
    }
    done({ coldMs: cold.ms, warmMs: warm, sawAppend: seen, coldText: cold.text, lastText: '' })
    break
  }

  default:
    throw new Error(`unknown op ${job.op}`)
}
