// Bench-only host plugin (bench/run.mjs installs it into a temporary web profile).
// It measures the listing the real host computes with its own session query service:
// `sessionQuery.listSessions()` (newest first) + `sessionQuery.readTitleSnapshots(<first LIMIT ids>)`,
// i.e. the same rows `sessions_list {scope:'all', limit}` shows, with titles.
//
// Protocol (env): DSH_BENCH_HOST_OUT=<file>. The plugin waits until `<file>.go` exists (the runner
// creates it once the host printed its URL, so boot work does not overlap the timing), runs
// DSH_BENCH_HOST_REPS repetitions (default 3) and writes the JSON result to <file> (tmp + rename).
// The runner then stops the host. Without DSH_BENCH_HOST_OUT the plugin does nothing.
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs'

export const name = 'dsh-session-mail-bench-host'
export const inject = { sessionQuery: { required: true } }

function vmHwmKb() {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1])
  } catch {
    return null
  }
}

async function measure(query, reps, limit) {
  const runs = []
  let rows = null
  for (let i = 0; i < reps; i++) {
    const c0 = process.cpuUsage()
    const t0 = performance.now()
    const records = await query.listSessions()
    const t1 = performance.now()
    const ids = records.slice(0, limit).map(r => r.header.id)
    const titles = await query.readTitleSnapshots(ids)
    const t2 = performance.now()
    const cpu = process.cpuUsage(c0)
    const rejected = titles.filter(t => t.status === 'rejected')
    runs.push({
      totalMs: t2 - t0, listMs: t1 - t0, titlesMs: t2 - t1, cpuMs: (cpu.user + cpu.system) / 1000,
      considered: records.length, rows: ids.length, rejected: rejected.length,
      rejectReasons: rejected.slice(0, 3).map(t => `${t.sessionId}: ${t.reason?.message ?? t.reason}`),
    })
    if (rows === null) {
      rows = titles.map(t => ({ id: t.sessionId, title: t.status === 'fulfilled' ? (t.value.title?.title ?? null) : null }))
    }
  }
  return { runs, rows }
}

export function apply(ctx) {
  const out = process.env.DSH_BENCH_HOST_OUT
  if (!out) return
  const reps = Math.max(1, Number(process.env.DSH_BENCH_HOST_REPS) || 3)
  const limit = Math.max(1, Number(process.env.DSH_BENCH_HOST_LIMIT) || 200)
  const write = (value) => {
    writeFileSync(`${out}.tmp`, JSON.stringify(value))
    renameSync(`${out}.tmp`, out)
  }
  let started = false
  const timer = setInterval(() => {
    if (started || !existsSync(`${out}.go`)) return
    started = true
    clearInterval(timer)
    const hwmBefore = vmHwmKb()
    measure(ctx.sessionQuery, reps, limit).then(
      result => write({ ok: true, node: process.version, pid: process.pid, hwmBeforeKb: hwmBefore, hwmAfterKb: vmHwmKb(), ...result }),
      error => write({ ok: false, error: String(error?.stack ?? error) }),
    )
  }, 50)
  timer.unref?.()
  console.error(`[${name}] apply: waiting for ${out}.go`)
}
