// Preloaded into the host by bench/burst.mjs (NODE_OPTIONS=--import): the host's own event-loop delay,
// measured inside it (perf_hooks.monitorEventLoopDelay, 1 ms resolution). Only when DSH_BENCH_ELD_DIR is set.
// It writes `<dir>/eld-<pid>.ready` (its argv); on SIGUSR2 it writes `<dir>/eld-<pid>.json` (the histogram
// since the last one, in ms: p50, p99, max, mean) and resets. Signals arrive on the event loop: no timer of its own.
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { renameSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

const dir = process.env.DSH_BENCH_ELD_DIR
if (dir) {
  const h = monitorEventLoopDelay({ resolution: 1 })
  h.enable()
  const out = join(dir, `eld-${process.pid}`)
  writeFileSync(`${out}.ready`, JSON.stringify(process.argv))
  process.on('SIGUSR2', () => {
    const ms = ns => ns / 1e6
    const v = { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), mean: ms(h.mean), count: h.count }
    h.reset()
    writeFileSync(`${out}.tmp`, JSON.stringify(v))
    renameSync(`${out}.tmp`, `${out}.json`)
  })
}
