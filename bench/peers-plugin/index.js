// Bench-only host plugin for bench/peers.mjs: runs dsh-session-mail's tools INSIDE the real host
// process (through the plugin's own registered tools, with this host's ctx: agents, sessions, web
// server), so the runner can time them and watch the host's event loop from outside.
//
// Protocol (env DSH_BENCH_PEERS_DIR=<dir>): the runner writes <dir>/job-<n>.json, this plugin runs it
// and writes <dir>/result-<n>.json (tmp + rename). Jobs:
//   {op:'tool', tool, args, caller?, config?}  -> {ms, text, mainCpuMs, procCpuMs, gcMs}
//   {op:'eventsCost', id}                      -> {events, firstMs, copyMs}   (session.events; the copy it makes)
//   {op:'idle', ms}                            -> {mainCpuMs, procCpuMs}   (the same meter over an idle span)
//   {op:'fetch', body}                         -> {ms, status, text, mainCpuMs, procCpuMs, gcMs}   (a raw POST to this host's prompt route)
//   {op:'status', id}                          -> {live, status, seq, rssMB}   (rssMB: the host process's RSS)
import { existsSync, readFileSync, renameSync, writeFileSync, readdirSync } from 'node:fs'
import { join } from 'node:path'
import { PerformanceObserver } from 'node:perf_hooks'

export const name = 'dsh-session-mail-bench-peers'
export const inject = { agents: { required: false }, webServer: { required: false }, sessions: { required: false } }

/**
 * CPU time spent from now until the returned function is called: `mainCpuMs` by the host's main thread
 * (process.threadCpuUsage, Node >= 22.19 / 23.9; null before), `procCpuMs` by the whole host process (the
 * addon's worker threads included). Everything the main thread did in the span counts (the probe's
 * requests, timers), so the runner compares it with an idle span of the same length. `gcMs`: the V8 GC pauses
 * in the span (perf_hooks 'gc' entries; observed from this plugin's load on).
 */
let gcMsTotal = 0
try {
  new PerformanceObserver(list => { for (const e of list.getEntries()) gcMsTotal += e.duration }).observe({ entryTypes: ['gc'] })
} catch {}

function cpuMeter() {
  const gc0 = gcMsTotal
  const thread = typeof process.threadCpuUsage === 'function' ? process.threadCpuUsage() : null
  const proc = process.cpuUsage()
  return () => {
    const ms = (a, b) => (b.user - a.user + b.system - a.system) / 1000
    return { mainCpuMs: thread ? ms(thread, process.threadCpuUsage()) : null, procCpuMs: ms(proc, process.cpuUsage()), gcMs: gcMsTotal - gc0 }
  }
}

export function apply(ctx) {
  const dir = process.env.DSH_BENCH_PEERS_DIR
  if (!dir) return
  // dsh-session-mail exports only its cordis contract (apply, Config, inject, name): apply it once per
  // config onto a view of this ctx whose tools.register captures the definitions, then call their execute.
  const toolSets = new Map()
  const toolsFor = async (config) => {
    const key = JSON.stringify(config ?? {})
    if (!toolSets.has(key)) {
      const mod = await import('dsh-session-mail')
      const defs = {}
      const view = new Proxy(ctx, {
        get(target, prop) {
          if (prop === 'tools') return { register: (def) => { defs[def.name] = def; return () => {} } }
          if (prop === 'effect') return undefined // no second presence publisher
          const v = Reflect.get(target, prop, target)
          return typeof v === 'function' ? v.bind(target) : v
        },
      })
      mod.apply(view, config ?? {})
      toolSets.set(key, defs)
    }
    return toolSets.get(key)
  }
  const done = new Set()
  let busy = false
  const run = async (job) => {
    if (job.op === 'status') {
      const a = ctx.agents?.get?.(job.id)
      return { live: !!a, status: a?.status ?? null, seq: a?.session?.seq ?? null, rssMB: Math.round(process.memoryUsage().rss / 2 ** 20) }
    }
    if (job.op === 'fetch') {
      const base = `http://127.0.0.1:${ctx.webServer.port}`
      const c = cpuMeter()
      const t0 = performance.now()
      const res = await fetch(`${base}/api/session.prompt`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(job.body) })
      const text = await res.text()
      return { ms: performance.now() - t0, status: res.status, text: text.slice(0, 300), ...c() }
    }
    if (job.op === 'tool') {
      const defs = await toolsFor(job.config)
      const exec = job.caller ? { agent: { id: job.caller, session: { id: job.caller } }, signal: new AbortController().signal } : { signal: new AbortController().signal }
      const c = cpuMeter()
      const t0 = performance.now()
      const text = await defs[job.tool].execute(job.args, exec)
      return { ms: performance.now() - t0, text, ...c() }
    }
    if (job.op === 'eventsCost') {
      // what `session.events` costs the main thread (rc.8: Object.freeze([...this.log]) once per change):
      // a reference price only — the plugin no longer reads it (lib/observe.js folds turn evidence,
      // awaiting-user and file activity from `session/event` as events are appended); an older shim's
      // `eventsOf` paid it on every list and send. Another reader may already have paid the getter since
      // the change, so the copy the getter makes is also timed directly.
      const session = ctx.agents?.get?.(job.id)?.session
      const t0 = performance.now(); const events = session?.events; const t1 = performance.now()
      const copy = Object.freeze([...(events ?? [])]); const t2 = performance.now()
      return { events: copy.length, firstMs: t1 - t0, copyMs: t2 - t1 }
    }
    if (job.op === 'delivered') {
      // the text a send delivered into session `id` (its body contains `marker`): from the session's inbox while
      // it waits there, else from the log's user messages once a turn took it (up to 3 s)
      const textOf = m => (Array.isArray(m?.content) ? m.content : []).filter(c => c?.type === 'text').map(c => c.text).join('')
      for (const t0 = Date.now(); Date.now() - t0 < 3000; await new Promise(r => setTimeout(r, 20))) {
        const agent = ctx.agents?.get?.(job.id)
        const waiting = [...(agent?.inbox?.nextTurn ?? []), ...(agent?.inbox?.nextStep ?? [])]
        const logged = (agent?.session?.events ?? []).filter(e => e?.type === 'user/message').map(e => e.data?.message ?? e.data)
        const hit = [...waiting, ...logged].map(textOf).find(t => t.includes(job.marker))
        if (hit !== undefined) return { text: hit }
      }
      return { error: `no delivered text with ${job.marker}` }
    }
    if (job.op === 'idle') {
      const c = cpuMeter()
      await new Promise(resolve => setTimeout(resolve, job.ms))
      return c()
    }
    return { error: `unknown op ${job.op}` }
  }
  const timer = setInterval(async () => {
    if (busy) return
    busy = true
    try {
      for (const n of readdirSync(dir)) {
        const m = /^job-(\d+)\.json$/.exec(n)
        if (!m || done.has(n)) continue
        done.add(n)
        let out
        try { out = await run(JSON.parse(readFileSync(join(dir, n), 'utf8'))) } catch (e) { out = { error: String(e?.stack ?? e) } }
        const file = join(dir, `result-${m[1]}.json`)
        writeFileSync(`${file}.tmp`, JSON.stringify(out))
        renameSync(`${file}.tmp`, file)
      }
    } catch {} finally { busy = false }
  }, 25)
  timer.unref?.()
  ctx.effect?.(() => () => clearInterval(timer))
  if (!existsSync(dir)) return
}
