#!/usr/bin/env node
// `npm run bench`: performance of sessions_list / sessions_read against baselines measured in the
// same run. A benchmark, not a test: it prints PASS/MISS per target and exits 0 unless a
// measurement crashed. See bench/README.md.
//
// Options: --quick (small corpus, fewer repetitions; for trying the bench itself), --no-host (skip
// the real-host comparison), --reps N. Env: BENCH_DIR (default .cache/bench), DSH_HOST_DIR
// (default .cache/dsh-host), BENCH_QUICK=1.
import { spawn, spawnSync } from 'node:child_process'
import { copyFileSync, cpSync, existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, readdirSync } from 'node:fs'
import os from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import zlib from 'node:zlib'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const HOST_DIR = resolve(process.env.DSH_HOST_DIR?.trim() || join(REPO, '.cache', 'dsh-host'))

// The corpus writer needs zlib zstd (Node >= 22.15). Under an older Node, re-run with the host's Node 22.
if (typeof zlib.zstdCompressSync !== 'function') {
  const node22 = join(HOST_DIR, 'node22', 'bin', 'node')
  if (!existsSync(node22)) {
    console.error(`bench: Node ${process.version} has no zlib zstd and ${node22} does not exist; run with Node >= 22.15 or set DSH_HOST_DIR`)
    process.exit(2)
  }
  const r = spawnSync(node22, [fileURLToPath(import.meta.url), ...process.argv.slice(2)], { stdio: 'inherit' })
  process.exit(r.status ?? 1)
}

const { ensureCorpus, FULL, QUICK, TITLE_ONCE, TITLE_ONCE_QUICK, benchDir } = await import('./gen-corpus.mjs')

const argv = process.argv.slice(2)
const QUICK_MODE = argv.includes('--quick') || process.env.BENCH_QUICK === '1'
const NO_HOST = argv.includes('--no-host')
const REPS = Number(argv[argv.indexOf('--reps') + 1]) > 0 && argv.includes('--reps') ? Number(argv[argv.indexOf('--reps') + 1]) : 3
const CHEAP_REPS = Math.max(REPS, 5) // cold list, cold read, zstd of one file: cheap, so more samples
const LIST_LIMIT = 200
const READ_MAX = 50
const WARM_CALLS = 5
// The read checkpoints (crates/core/src/store/checkpoint.rs) of the bench's children: a private folder of
// the bench's own, emptied before each "first read".
const CK_DIR = join(benchDir(), 'read-cache')
const CK_ENV = { DSH_SESSION_MAIL_CACHE_DIR: CK_DIR }
const NO_CK_ENV = { DSH_SESSION_MAIL_NO_CHECKPOINT: '1' }
// The window read (crates/store/src/window.rs) off: the read folds the whole history (or resumes a checkpoint).
const NO_WIN_ENV = { DSH_SESSION_MAIL_NO_WINDOW: '1' }
const FULL_ENV = { ...NO_CK_ENV, ...NO_WIN_ENV }
// A cache folder that never holds a checkpoint (a window read leaves none): every read there is a first read.
const WIN_ENV = { DSH_SESSION_MAIL_CACHE_DIR: join(benchDir(), 'read-cache-empty') }
// A window read of a log of >= 8 MiB leaves its fold as a read checkpoint: every "no checkpoint" child starts
// from a cache folder without one. The folder's key stays (made once, with an fsync, by the first read that ever
// writes there: not a cost of every first read of a log).
const winEnv = () => {
  const d = join(WIN_ENV.DSH_SESSION_MAIL_CACHE_DIR, 'read-index')
  for (const f of existsSync(d) ? readdirSync(d) : []) if (f.endsWith('.ckpt')) rmSync(join(d, f), { force: true })
  return WIN_ENV
}
const WIN_REPS = Math.max(REPS, 9) // the window rows are cheap: more samples for p99/max
const pct = (xs, q) => { const v = xs.filter(Number.isFinite).sort((a, b) => a - b); return v.length ? v[Math.min(v.length - 1, Math.ceil(q * v.length) - 1)] : NaN }
const spread = (xs) => `p50 ${fmtMs(pct(xs, 0.5))} p99 ${fmtMs(pct(xs, 0.99))} max ${fmtMs(Math.max(...xs.filter(Number.isFinite)))}`
const CHILD = join(HERE, 'child.mjs')
const PLUGIN_SRC = join(HERE, 'host-plugin')
const PLUGIN_NAME = 'dsh-session-mail-bench-host'

const log = (s) => process.stderr.write(`bench: ${s}\n`)
const median = (xs) => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); if (!a.length) return NaN; const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2 }
const sleep = (ms) => new Promise(r => setTimeout(r, ms))
let crashed = false

// ---------------------------------------------------------------- processes
/** Run bench/child.mjs with one job; resolves to its BENCH_RESULT object or {error}. */
function child(job, timeoutMs = 600_000, env = {}) {
  return new Promise((resolvePromise) => {
    const p = spawn(process.execPath, [CHILD, JSON.stringify(job)], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } })
    let out = ''; let err = ''
    p.stdout.on('data', d => { out += d })
    p.stderr.on('data', d => { err += d; if (err.length > 20_000) err = err.slice(-10_000) })
    const timer = setTimeout(() => p.kill('SIGKILL'), timeoutMs)
    p.on('close', (code, signal) => {
      clearTimeout(timer)
      const line = out.split('\n').find(l => l.startsWith('BENCH_RESULT '))
      if (code === 0 && line) return resolvePromise(JSON.parse(line.slice('BENCH_RESULT '.length)))
      crashed = true
      resolvePromise({ error: `child ${job.op} exited ${code ?? signal}: ${err.trim().split('\n').slice(-6).join(' | ')}` })
    })
  })
}

const TIME_BIN = existsSync('/usr/bin/time') ? '/usr/bin/time' : null
/**
 * `zstd -dcq <files…> > /dev/null` (one process, files in the given order): wall ms, and CPU ms
 * (user + system, 10 ms resolution) when /usr/bin/time exists.
 */
function zstdDecompress(files) {
  return new Promise((resolvePromise, reject) => {
    const devnull = openSync('/dev/null', 'w')
    const timeOut = join(benchDir(), `.zstd-time-${process.pid}`)
    const [cmd, args] = TIME_BIN ? [TIME_BIN, ['-f', '%U %S', '-o', timeOut, 'zstd', '-dcq', '--', ...files]] : ['zstd', ['-dcq', '--', ...files]]
    const t0 = performance.now()
    const p = spawn(cmd, args, { stdio: ['ignore', devnull, 'pipe'] })
    let err = ''
    p.stderr.on('data', d => { err += d })
    p.on('error', reject)
    p.on('close', (code) => {
      const ms = performance.now() - t0
      closeSync(devnull)
      if (code !== 0) return reject(new Error(`zstd -dc exited ${code}: ${err.slice(0, 500)}`))
      let cpuMs = null
      if (TIME_BIN) {
        try { cpuMs = readFileSync(timeOut, 'utf8').trim().split(/\s+/).map(Number).reduce((a, b) => a + b, 0) * 1000 } catch {}
        rmSync(timeOut, { force: true })
      }
      resolvePromise({ ms, cpuMs })
    })
  })
}


// ---------------------------------------------------------------- output parsing (sanity checks)
const isRefusal = (text) => typeof text === 'string' && text.startsWith('refused')
/** Row ids and titles of a sessions_list text (docs/output-contract.md "sessions_list — output"). */
function listRows(text) {
  const rows = []; const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const m = /^- (\S+) \[/.exec(lines[i])
    if (m) rows.push({ id: m[1], title: lines[i + 1]?.startsWith('  ') ? lines[i + 1].slice(2) : null })
  }
  return rows
}
const readMessages = (text) => (text.match(/^--- \S+ \(seq \d+/gm) ?? []).length

/** Files the corpus generator did not write: DSH_HOME's top level and the big logs' directories. */
function foreignFiles(m) {
  const found = readdirSync(m.home).filter(f => f !== 'sessions')
  for (const b of Object.values(m.big)) {
    const dir = dirname(join(m.home, b.file))
    for (const f of readdirSync(dir)) if (f !== 'session.jsonl.zstd') found.push(join(b.file, '..', f))
  }
  return found.length ? found : null
}

// ---------------------------------------------------------------- the real host's own listing
async function hostListing(m) {
  const dsh = join(HOST_DIR, 'host', 'node_modules', '.bin', 'dsh')
  const nodeBin = join(HOST_DIR, 'node22', 'bin')
  if (!existsSync(dsh)) return { skipped: `no DSH host at ${dsh} (set DSH_HOST_DIR)` }
  const base = join(benchDir(), 'host-run')
  rmSync(base, { recursive: true, force: true })
  const home = join(base, 'home'); const ws = join(base, 'ws')
  mkdirSync(home, { recursive: true }); mkdirSync(ws, { recursive: true })
  // The host reads the corpus in place (read-only: listing and title folds never write a log);
  // its profile, storages and caches go to the throwaway home.
  symlinkSync(join(m.home, 'sessions'), join(home, 'sessions'))
  const out = join(base, 'host-result.json')
  const env = {
    ...process.env, PATH: `${nodeBin}:${process.env.PATH}`, DSH_HOME: home,
    DEEPSEEK_API_KEY: 'fake', DEEPSEEK_BASE_URL: 'http://127.0.0.1:9/v1', DSH_TELEMETRY_DISABLED: '1',
    DSH_BENCH_HOST_OUT: out, DSH_BENCH_HOST_REPS: String(REPS), DSH_BENCH_HOST_LIMIT: String(LIST_LIMIT),
  }
  const dump = spawnSync(dsh, ['--profile', 'web', '--dump-config'], { cwd: ws, env, encoding: 'utf8' })
  const profile = join(home, 'profiles', 'web')
  if (dump.status !== 0 || !existsSync(join(profile, 'package.json'))) {
    return { error: `dsh --profile web --dump-config failed (${dump.status}): ${String(dump.stderr).slice(-500)}` }
  }
  // Install the bench plugin by hand: a real directory in the profile's node_modules + the manifest.
  cpSync(PLUGIN_SRC, join(profile, 'node_modules', PLUGIN_NAME), { recursive: true })
  const pkgPath = join(profile, 'package.json')
  const pkg = JSON.parse(readFileSync(pkgPath, 'utf8'))
  pkg.dependencies = { ...pkg.dependencies, [PLUGIN_NAME]: '0.0.0' }
  pkg.dsh.profile.bundles = [...pkg.dsh.profile.bundles.filter(b => b !== PLUGIN_NAME), PLUGIN_NAME]
  writeFileSync(pkgPath, JSON.stringify(pkg, null, 2) + '\n')

  const t0 = performance.now()
  const host = spawn(dsh, ['web', '--no-open', '--port', '0'], { cwd: ws, env, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let stdout = ''; let stderr = ''; let exited = null
  host.stdout.on('data', d => { stdout += d })
  host.stderr.on('data', d => { stderr += d; if (stderr.length > 50_000) stderr = stderr.slice(-20_000) })
  host.on('exit', (code, signal) => { exited = code ?? signal })
  const stop = async () => {
    if (exited !== null) return
    try { process.kill(-host.pid, 'SIGTERM') } catch {}
    for (let i = 0; i < 100 && exited === null; i++) await sleep(100)
    if (exited === null) { try { process.kill(-host.pid, 'SIGKILL') } catch {} }
  }
  try {
    while (!/http:\/\/127\.0\.0\.1:\d+/.test(stdout)) {
      if (exited !== null) return { error: `host exited (${exited}) before ready: ${stderr.trim().split('\n').slice(-5).join(' | ')}` }
      if (performance.now() - t0 > 90_000) return { error: 'host not ready after 90 s' }
      await sleep(50)
    }
    const readyMs = performance.now() - t0
    if (!stderr.includes(`[${PLUGIN_NAME}] apply`)) {
      await sleep(1000)
      if (!stderr.includes(`[${PLUGIN_NAME}] apply`)) return { error: `bench host plugin did not load: ${stderr.trim().split('\n').slice(-5).join(' | ')}` }
    }
    await sleep(1500) // let boot-time work settle before the timed calls
    writeFileSync(`${out}.go`, '')
    const tGo = performance.now()
    while (!existsSync(out)) {
      if (exited !== null) return { error: `host exited (${exited}) during the measurement: ${stderr.trim().split('\n').slice(-5).join(' | ')}` }
      if (performance.now() - tGo > 900_000) return { error: 'host measurement did not finish in 15 min' }
      await sleep(100)
    }
    const result = JSON.parse(readFileSync(out, 'utf8'))
    if (!result.ok) return { error: `host sessionQuery failed: ${result.error}` }
    return { readyMs, ...result }
  } finally {
    await stop()
  }
}

/** Whether an ELF64 little-endian file has a `.debug_info` section (null when not such a file). */
function elfHasDebugInfo(buf) {
  if (buf.length < 64 || buf.readUInt32BE(0) !== 0x7f454c46 || buf[4] !== 2 || buf[5] !== 1) return null
  const shoff = Number(buf.readBigUInt64LE(0x28)); const shentsize = buf.readUInt16LE(0x3a)
  const shnum = buf.readUInt16LE(0x3c); const shstrndx = buf.readUInt16LE(0x3e)
  if (!shoff || shstrndx >= shnum || shoff + shnum * shentsize > buf.length) return null
  const strOff = Number(buf.readBigUInt64LE(shoff + shstrndx * shentsize + 0x18))
  for (let i = 0; i < shnum; i++) {
    const nameOff = buf.readUInt32LE(shoff + i * shentsize)
    const end = buf.indexOf(0, strOff + nameOff)
    if (buf.toString('latin1', strOff + nameOff, end) === '.debug_info') return true
  }
  return false
}

// ---------------------------------------------------------------- main
function fmtMs(ms) { return !Number.isFinite(ms) ? '—' : ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : ms >= 10 ? `${ms.toFixed(0)} ms` : `${ms.toFixed(2)} ms` }
const cpuRatio = (a, b) => Number.isFinite(a / b) && b > 0 ? `${(a / b).toFixed(2)}×` : '—'
const fmtMB = (kb) => Number.isFinite(kb) ? `${(kb / 1024).toFixed(1)} MB` : '—'
const MiB = 1024 * 1024

async function main() {
  const params = QUICK_MODE ? QUICK : FULL
  const tStart = performance.now()
  const m = ensureCorpus(params, { log })
  const files = m.sessions.map(s => join(m.home, s.file))
  const big100 = m.big.big100m; const big1g = m.big.big1g
  const addon = readdirSync(REPO).find(f => /^dsh-session-mail\..*\.node$/.test(f))
  const addonMtime = addon ? statSync(join(REPO, addon)).mtime : null
  // An unoptimized build (napi build without --release/--profile ci) carries DWARF sections.
  const addonDebug = addon ? elfHasDebugInfo(readFileSync(join(REPO, addon))) : null
  const git = spawnSync('git', ['-C', REPO, 'log', '-1', '--format=%h %s'], { encoding: 'utf8' }).stdout.trim()
  const env = {
    date: new Date().toISOString(), node: process.version, cpu: os.cpus()[0]?.model, cores: os.cpus().length,
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1), git, addon: addon ?? null, addonBuilt: addonMtime?.toISOString() ?? null, addonDebug,
    core: process.env.BENCH_CORE ? 'BENCH_CORE' : 'binding.cjs',
    zstd: spawnSync('zstd', ['--version'], { encoding: 'utf8' }).stdout.trim(),
    loadavgStart: os.loadavg().map(x => +x.toFixed(2)),
  }
  log(`corpus ${m.dir}: ${m.totals.files} logs, ${(m.totals.plainBytes / MiB).toFixed(0)} MiB decompressed, ${(m.totals.zstdBytes / MiB).toFixed(0)} MiB zstd`)
  const srcNewest = Math.max(...['src', 'crates/base/src', 'crates/store/src', 'crates/core/src', 'crates/core/src/tools', 'crates/core/src/render'].flatMap(d => { try { return readdirSync(join(REPO, d)).map(f => statSync(join(REPO, d, f)).mtimeMs) } catch { return [] } }))
  if (addonMtime && srcNewest > addonMtime.getTime()) log('warning: src/ is newer than the built addon; rebuild it (see bench/README.md)')
  if (addonDebug && !process.env.BENCH_CORE) log('warning: the addon is a debug build (it has .debug_info); build with --profile ci or --release for meaningful numbers')

  const R = {}

  // 1. whole-corpus decompression baseline, and the cold list
  // Baseline and measurement runs alternate, so load from other processes on the machine hits both alike.
  log(`zstd -dc of the whole corpus ×${REPS} and sessions_list cold ×${CHEAP_REPS} (fresh process each, ${WARM_CALLS} warm calls after), interleaved…`)
  await zstdDecompress(files) // warm-up (also warms the page cache), not counted
  const zc = []; const lists = []
  for (let i = 0; i < CHEAP_REPS; i++) {
    if (i >= REPS && lists[0].coldMs > 5000) break // not cheap after all
    if (i < REPS) zc.push(await zstdDecompress(files))
    // the listing index off (crates/store/src/listindex.rs): this row is the listing that reads the logs; the
    // index's cold row is bench:peers' 20,000-session one
    lists.push(await child({ op: 'list', home: m.home, limit: LIST_LIMIT, warm: WARM_CALLS }, undefined, { ...CK_ENV, DSH_SESSION_MAIL_NO_LIST_INDEX: '1' }))
  }
  R.zstdCorpus = { ms: zc.map(z => z.ms), median: median(zc.map(z => z.ms)), cpuMs: zc.map(z => z.cpuMs), cpu: median(zc.map(z => z.cpuMs)) }
  const listErr = lists.find(l => l.error)?.error
  const listText = lists.find(l => l.text)?.text ?? ''
  R.list = {
    coldMs: lists.map(l => l.coldMs), cold: median(lists.map(l => l.coldMs)), coldCpu: median(lists.map(l => l.coldCpuMs)),
    warmMs: lists.flatMap(l => l.warmMs ?? []), warm: median(lists.flatMap(l => l.warmMs ?? [])),
    loadMs: median(lists.map(l => l.loadMs)), warmSameAsCold: lists.every(l => l.sameAsCold),
    rows: listRows(listText).length, refused: isRefusal(listText), error: listErr, head: listText.slice(0, 300),
    // A list that leaves files in DSH_HOME (a persistent index) would make later "cold" runs warm.
    homeWrites: foreignFiles(m),
  }

  // 2. the same listing by the real host's own session query service
  if (NO_HOST) R.host = { skipped: '--no-host' }
  else {
    log(`real host: dsh web + bench plugin, listSessions + readTitleSnapshots(first ${LIST_LIMIT}) ×${REPS}…`)
    R.host = await hostListing(m)
    if (R.host.error) { crashed = true; log(`host: ${R.host.error}`) }
    if (R.host.runs) {
      R.host.totalMs = R.host.runs.map(r => r.totalMs); R.host.median = median(R.host.totalMs); R.host.cpu = median(R.host.runs.map(r => r.cpuMs))
      const ours = listRows(listText)
      const theirs = R.host.rows ?? []
      let sameOrder = ours.length === theirs.length
      let titleDiffs = 0; const examples = []
      for (let i = 0; i < Math.min(ours.length, theirs.length); i++) {
        if (ours[i].id !== theirs[i].id) sameOrder = false
        else if ((ours[i].title === '(untitled)' ? null : ours[i].title) !== theirs[i].title) {
          titleDiffs++
          if (examples.length < 3) examples.push(`${ours[i].id}: ours ${JSON.stringify(ours[i].title)} vs host ${JSON.stringify(theirs[i].title)}`)
        }
      }
      R.host.agreement = { ourRows: ours.length, hostRows: theirs.length, sameIdsInOrder: sameOrder, titleDiffs, examples }
      delete R.host.rows
    }
  }

  // 3. read the last 50 messages of the 100 MB log in a fresh process, vs zstd -dc of that file, interleaved:
  //    window = the first read of a fresh process with no checkpoint: read from the log's end (store/window.rs);
  //    ckpt   = resuming from the read checkpoint a full fold left (store/checkpoint.rs; in the bench's own
  //             private cache folder, outside DSH_HOME);
  //    first  = the window off, no checkpoint yet: folds the whole history once and leaves one;
  //    full   = window and checkpoint off: the whole history folded, every time.
  // Every read's text must equal the full fold's.
  const big100File = join(m.home, big100.file)
  rmSync(CK_DIR, { recursive: true, force: true })
  rmSync(WIN_ENV.DSH_SESSION_MAIL_CACHE_DIR, { recursive: true, force: true })
  log(`zstd -dc of the ${(big100.plainBytes / MiB).toFixed(0)} MiB log and sessions_read (window, checkpoint, full fold), ×${WIN_REPS} interleaved…`)
  await child({ op: 'read', home: m.home, id: big100.id, max: READ_MAX }, undefined, winEnv()) // makes the folder's key: not counted
  await zstdDecompress([big100File])
  const zb = []; const wins = []; const reads = []; const fulls = []
  const first100 = await child({ op: 'read', home: m.home, id: big100.id, max: READ_MAX }, undefined, { ...CK_ENV, ...NO_WIN_ENV })
  for (let i = 0; i < WIN_REPS; i++) {
    zb.push(await zstdDecompress([big100File]))
    if (i < REPS) fulls.push(await child({ op: 'read', home: m.home, id: big100.id, max: READ_MAX }, undefined, FULL_ENV))
    wins.push(await child({ op: 'read', home: m.home, id: big100.id, max: READ_MAX }, undefined, winEnv()))
    if (i < CHEAP_REPS) reads.push(await child({ op: 'read', home: m.home, id: big100.id, max: READ_MAX }, undefined, CK_ENV))
  }
  R.zstdBig100 = { ms: zb.map(z => z.ms), median: median(zb.map(z => z.ms)), cpuMs: zb.map(z => z.cpuMs), cpu: median(zb.map(z => z.cpuMs)) }
  const readText = reads.find(r => r.text)?.text ?? ''
  const fullText = fulls.find(r => r.text)?.text ?? ''
  R.read = {
    coldMs: reads.map(r => r.coldMs), cold: median(reads.map(r => r.coldMs)), coldCpu: median(reads.map(r => r.coldCpuMs)), loadMs: median(reads.map(r => r.loadMs)),
    messages: readMessages(readText), refused: isRefusal(readText), error: reads.find(r => r.error)?.error, head: readText.slice(0, 300),
    sameAsFull: [first100, ...reads].every(r => r.text === fullText),
  }
  R.readWindow = {
    coldMs: wins.map(r => r.coldMs), cold: median(wins.map(r => r.coldMs)), coldCpu: median(wins.map(r => r.coldCpuMs)),
    error: wins.find(r => r.error)?.error, messages: readMessages(wins[0]?.text ?? ''), sameAsFull: wins.every(r => r.text === fullText),
  }
  R.readFull = { coldMs: fulls.map(r => r.coldMs), cold: median(fulls.map(r => r.coldMs)), coldCpu: median(fulls.map(r => r.coldCpuMs)), error: fulls.find(r => r.error)?.error }
  R.readFirst = { coldMs: first100.coldMs, coldCpu: first100.coldCpuMs, error: first100.error }

  // 4. warm read after one appended event (on a scratch copy: the cached corpus is never modified)
  log('sessions_read warm after an appended frame…')
  const scratch = join(benchDir(), 'scratch-home')
  rmSync(scratch, { recursive: true, force: true })
  const scratchFile = join(scratch, big100.file)
  mkdirSync(dirname(scratchFile), { recursive: true })
  copyFileSync(big100File, scratchFile)
  const ra = await child({ op: 'read-append', home: scratch, id: big100.id, max: READ_MAX, file: scratchFile, lastSeq: big100.lastSeq, lastTime: big100.lastTime, reps: Math.max(REPS, 5) }, undefined, CK_ENV)
  R.readAppend = {
    coldMs: ra.coldMs, warmMs: ra.warmMs ?? [], warm: median(ra.warmMs ?? []),
    sawAppend: ra.sawAppend ?? [], refused: isRefusal(ra.coldText), error: ra.error,
  }
  rmSync(scratch, { recursive: true, force: true })

  // 5. the 1 GB log: peak RSS of the read (the window read: a first read in a fresh process) and of the full
  //    fold (the window off, no checkpoint: the worst case, one sample; it leaves the checkpoint), then cold
  //    reads — window and checkpoint — interleaved with zstd -dc of that file
  log(`peak RSS: addon-only child, then sessions_read of the ${(big1g.plainBytes / MiB).toFixed(0)} MiB log (window; full fold)…`)
  const base = []; const rss = []
  const big1gFile = join(m.home, big1g.file)
  for (let i = 0; i < REPS; i++) {
    base.push(await child({ op: 'load' }))
    rss.push(await child({ op: 'read', home: m.home, id: big1g.id, max: READ_MAX }, undefined, winEnv()))
  }
  rmSync(CK_DIR, { recursive: true, force: true })
  const fullRss = await child({ op: 'read', home: m.home, id: big1g.id, max: READ_MAX }, undefined, { ...CK_ENV, ...NO_WIN_ENV })
  const baseKb = median(base.map(b => b.hwmKb)); const peakKb = median(rss.map(r => r.hwmKb))
  const rssText = fullRss.text ?? ''
  R.rss = {
    baseKb, peakKb, deltaKb: peakKb - baseKb, samplesKb: rss.map(r => r.hwmKb), baseSamplesKb: base.map(b => b.hwmKb),
    readMs: rss.map(r => r.coldMs), messages: readMessages(rss[0]?.text ?? ''), refused: isRefusal(rss[0]?.text ?? ''), error: rss.find(r => r.error)?.error,
    fullKb: fullRss.hwmKb, fullDeltaKb: fullRss.hwmKb - baseKb, fullMs: fullRss.coldMs, fullError: fullRss.error, fullMessages: readMessages(rssText),
  }
  log(`zstd -dc of the ${(big1g.plainBytes / MiB).toFixed(0)} MiB log and cold sessions_read (window; checkpoint), ×${WIN_REPS} interleaved…`)
  const zg = []; const reads1g = []; const wins1g = []
  for (let i = 0; i < WIN_REPS; i++) {
    if (i < REPS + 2) zg.push(await zstdDecompress([big1gFile]))
    wins1g.push(await child({ op: 'read', home: m.home, id: big1g.id, max: READ_MAX }, undefined, winEnv()))
    if (i < REPS) reads1g.push(await child({ op: 'read', home: m.home, id: big1g.id, max: READ_MAX }, undefined, CK_ENV))
  }
  R.zstdBig1g = { ms: zg.map(z => z.ms), median: median(zg.map(z => z.ms)), cpu: median(zg.map(z => z.cpuMs)) }
  R.read1g = {
    coldMs: reads1g.map(r => r.coldMs), cold: median(reads1g.map(r => r.coldMs)), coldCpu: median(reads1g.map(r => r.coldCpuMs)),
    error: reads1g.find(r => r.error)?.error, sameAsFirst: reads1g.every(r => r.text === rssText), messages: readMessages(reads1g[0]?.text ?? ''),
  }
  R.read1gWindow = {
    coldMs: wins1g.map(r => r.coldMs), cold: median(wins1g.map(r => r.coldMs)), coldCpu: median(wins1g.map(r => r.coldCpuMs)),
    error: wins1g.find(r => r.error)?.error, sameAsFull: wins1g.every(r => r.text === rssText) && [...rss].every(r => r.text === rssText), messages: readMessages(wins1g[0]?.text ?? ''),
  }
  rmSync(CK_DIR, { recursive: true, force: true })

  // 6. the window's worst case (issue 18): a 100 MiB log whose only titles are the first turn's, so a first read
  //    decodes every frame back to it (a corpus of its own, bench/gen-corpus.mjs TITLE_ONCE). Interleaved: zstd -dc
  //    of the file; a first read in a fresh process with an empty cache folder (the window; it leaves its fold as
  //    a checkpoint); the next fresh process with that folder (resumes the window's checkpoint). The full fold's
  //    text (window and checkpoint off) is what both must show.
  const tm = ensureCorpus(QUICK_MODE ? TITLE_ONCE_QUICK : TITLE_ONCE, { log })
  const t1 = tm.big.title1; const t1File = join(tm.home, t1.file)
  log(`the window's worst case: the ${(t1.plainBytes / MiB).toFixed(0)} MiB log titled only at turn 1, ×${WIN_REPS} interleaved…`)
  await zstdDecompress([t1File])
  const t1Full = await child({ op: 'read', home: tm.home, id: t1.id, max: READ_MAX }, undefined, FULL_ENV)
  const zt = []; const t1First = []; const t1Next = []
  for (let i = 0; i < WIN_REPS; i++) {
    zt.push(await zstdDecompress([t1File]))
    t1First.push(await child({ op: 'read', home: tm.home, id: t1.id, max: READ_MAX }, undefined, winEnv()))
    t1Next.push(await child({ op: 'read', home: tm.home, id: t1.id, max: READ_MAX }, undefined, WIN_ENV))
  }
  rmSync(WIN_ENV.DSH_SESSION_MAIL_CACHE_DIR, { recursive: true, force: true })
  R.zstdTitle1 = { ms: zt.map(z => z.ms), median: median(zt.map(z => z.ms)), cpu: median(zt.map(z => z.cpuMs)) }
  const t1Row = (xs) => ({
    coldMs: xs.map(r => r.coldMs), cold: median(xs.map(r => r.coldMs)), coldCpu: median(xs.map(r => r.coldCpuMs)),
    error: xs.find(r => r.error)?.error ?? t1Full.error, messages: readMessages(xs[0]?.text ?? ''), sameAsFull: !!t1Full.text && xs.every(r => r.text === t1Full.text),
  })
  R.title1First = t1Row(t1First); R.title1Next = t1Row(t1Next); R.title1Full = { coldMs: t1Full.coldMs }

  // ---------------------------------------------------------------- report
  const rows = []
  const verdict = (ok, invalid) => invalid ? 'MISS*' : ok ? 'PASS' : 'MISS'
  const listInvalid = R.list.refused || !!R.list.error || R.list.rows === 0
  rows.push({
    metric: 'list cold (fresh process)', measured: fmtMs(R.list.cold), baseline: `zstd -dc corpus ${fmtMs(R.zstdCorpus.median)}`,
    ratio: `${(R.list.cold / R.zstdCorpus.median).toFixed(2)}×`, cpu: cpuRatio(R.list.coldCpu, R.zstdCorpus.cpu), target: '≤ 0.75×', verdict: verdict(R.list.cold / R.zstdCorpus.median <= 0.75, listInvalid),
    value: R.list.cold, base: R.zstdCorpus.median,
  })
  if (R.host.median !== undefined) {
    const speedup = R.host.median / R.list.cold
    rows.push({
      metric: 'list vs host sessionQuery', measured: fmtMs(R.list.cold), baseline: `host ${fmtMs(R.host.median)}`,
      ratio: `${speedup.toFixed(1)}× faster`, cpu: Number.isFinite(R.host.cpu / R.list.coldCpu) ? `${(R.host.cpu / R.list.coldCpu).toFixed(1)}× less` : '—', target: '≥ 10× faster', verdict: verdict(speedup >= 10, listInvalid || R.host.runs.some(r => r.rejected > 0)),
      value: R.list.cold, base: R.host.median,
    })
  } else {
    rows.push({ metric: 'list vs host sessionQuery', measured: fmtMs(R.list.cold), baseline: `host: ${R.host.skipped ?? 'ERROR'}`, ratio: '—', target: '≥ 10× faster', verdict: R.host.skipped ? 'SKIP' : 'ERROR', value: R.list.cold, base: null })
  }
  rows.push({
    metric: 'list warm (same process)', measured: fmtMs(R.list.warm), baseline: `cold ${fmtMs(R.list.cold)}`,
    ratio: `${(R.list.warm / R.list.cold).toFixed(3)}×`, target: '≤ 20 ms', verdict: verdict(R.list.warm <= 20, listInvalid || !R.list.warmSameAsCold),
    value: R.list.warm, base: R.list.cold,
  })
  const readInvalid = R.read.refused || !!R.read.error || R.read.messages === 0 || !R.read.sameAsFull
  const mib100 = (big100.plainBytes / MiB).toFixed(0); const mib1g = (big1g.plainBytes / MiB).toFixed(0)
  const winInvalid = !!R.readWindow.error || R.readWindow.messages === 0 || !R.readWindow.sameAsFull
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib100} MiB log, cold (window, no checkpoint)${R.readWindow.sameAsFull ? '' : ' (text differs from the full fold!)'}`, measured: fmtMs(R.readWindow.cold), baseline: `zstd -dc file ${fmtMs(R.zstdBig100.median)}`,
    ratio: `${(R.readWindow.cold / R.zstdBig100.median).toFixed(2)}×`, cpu: cpuRatio(R.readWindow.coldCpu, R.zstdBig100.cpu), target: '≤ 0.3×', verdict: verdict(R.readWindow.cold / R.zstdBig100.median <= 0.3, winInvalid),
    value: R.readWindow.cold, base: R.zstdBig100.median,
  })
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib100} MiB log, cold (checkpoint)${R.read.sameAsFull ? '' : ' (text differs from the full fold!)'}`, measured: fmtMs(R.read.cold), baseline: `zstd -dc file ${fmtMs(R.zstdBig100.median)}`,
    ratio: `${(R.read.cold / R.zstdBig100.median).toFixed(2)}×`, cpu: cpuRatio(R.read.coldCpu, R.zstdBig100.cpu), target: '≤ 0.3×', verdict: verdict(R.read.cold / R.zstdBig100.median <= 0.3, readInvalid),
    value: R.read.cold, base: R.zstdBig100.median,
  })
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib100} MiB log, first full fold (window off; leaves the checkpoint)`, measured: fmtMs(R.readFirst.coldMs), baseline: `zstd -dc file ${fmtMs(R.zstdBig100.median)}`,
    ratio: `${(R.readFirst.coldMs / R.zstdBig100.median).toFixed(2)}×`, cpu: cpuRatio(R.readFirst.coldCpu, R.zstdBig100.cpu), target: '—', verdict: R.readFirst.error ? 'MISS*' : 'info',
    value: R.readFirst.coldMs, base: R.zstdBig100.median,
  })
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib100} MiB log, full fold (window and checkpoint off)`, measured: fmtMs(R.readFull.cold), baseline: `zstd -dc file ${fmtMs(R.zstdBig100.median)}`,
    ratio: `${(R.readFull.cold / R.zstdBig100.median).toFixed(2)}×`, cpu: cpuRatio(R.readFull.coldCpu, R.zstdBig100.cpu), target: '≤ 1.2×', verdict: verdict(R.readFull.cold / R.zstdBig100.median <= 1.2, !!R.readFull.error),
    value: R.readFull.cold, base: R.zstdBig100.median,
  })
  const win1gInvalid = !!R.read1gWindow.error || R.read1gWindow.messages === 0 || !R.read1gWindow.sameAsFull
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib1g} MiB log, cold (window, no checkpoint)${R.read1gWindow.sameAsFull ? '' : ' (text differs from the full fold!)'}`, measured: fmtMs(R.read1gWindow.cold), baseline: `zstd -dc file ${fmtMs(R.zstdBig1g.median)}`,
    ratio: `${(R.read1gWindow.cold / R.zstdBig1g.median).toFixed(3)}×`, cpu: cpuRatio(R.read1gWindow.coldCpu, R.zstdBig1g.cpu), target: '≤ 0.1× and ≤ 0.5 s', verdict: verdict(R.read1gWindow.cold / R.zstdBig1g.median <= 0.1 && R.read1gWindow.cold <= 500, win1gInvalid),
    value: R.read1gWindow.cold, base: R.zstdBig1g.median,
  })
  const read1gInvalid = !!R.read1g.error || R.read1g.messages === 0 || !R.read1g.sameAsFirst
  rows.push({
    metric: `read ${READ_MAX} msgs, ${mib1g} MiB log, cold (checkpoint)${R.read1g.sameAsFirst ? '' : ' (text differs from the full fold!)'}`, measured: fmtMs(R.read1g.cold), baseline: `zstd -dc file ${fmtMs(R.zstdBig1g.median)}`,
    ratio: `${(R.read1g.cold / R.zstdBig1g.median).toFixed(3)}×`, cpu: cpuRatio(R.read1g.coldCpu, R.zstdBig1g.cpu), target: '≤ 0.1× and ≤ 0.5 s', verdict: verdict(R.read1g.cold / R.zstdBig1g.median <= 0.1 && R.read1g.cold <= 500, read1gInvalid),
    value: R.read1g.cold, base: R.zstdBig1g.median,
  })
  const mibT1 = (t1.plainBytes / MiB).toFixed(0)
  for (const [r, what] of [[R.title1First, 'first read (window: decodes every frame back to the title; leaves its checkpoint)'], [R.title1Next, 'the next fresh process (the window\'s checkpoint)']]) {
    rows.push({
      metric: `read ${READ_MAX} msgs, ${mibT1} MiB log titled only at turn 1, ${what}${r.sameAsFull ? '' : ' (text differs from the full fold!)'}`, measured: fmtMs(r.cold), baseline: `zstd -dc file ${fmtMs(R.zstdTitle1.median)}`,
      ratio: `${(r.cold / R.zstdTitle1.median).toFixed(2)}×`, cpu: cpuRatio(r.coldCpu, R.zstdTitle1.cpu), target: '≤ 0.3×', verdict: verdict(r.cold / R.zstdTitle1.median <= 0.3, !!r.error || r.messages === 0 || !r.sameAsFull),
      value: r.cold, base: R.zstdTitle1.median,
    })
  }
  const appendInvalid = R.readAppend.refused || !!R.readAppend.error || !R.readAppend.sawAppend.length || !R.readAppend.sawAppend.every(Boolean)
  rows.push({
    metric: 'read warm after 1 appended event', measured: fmtMs(R.readAppend.warm), baseline: `cold ${fmtMs(R.readAppend.coldMs)}`,
    ratio: `${(R.readAppend.warm / R.readAppend.coldMs).toFixed(3)}×`, target: '≤ 5 ms', verdict: verdict(R.readAppend.warm <= 5, appendInvalid),
    value: R.readAppend.warm, base: R.readAppend.coldMs,
  })
  const rssInvalid = R.rss.refused || !!R.rss.error || R.rss.messages === 0
  rows.push({
    metric: `peak RSS, read ${mib1g} MiB log (window; Δ VmHWM)`, measured: fmtMB(R.rss.deltaKb), baseline: `addon only ${fmtMB(R.rss.baseKb)}`,
    ratio: `${(R.rss.peakKb / R.rss.baseKb).toFixed(2)}× peak`, target: '≤ 64 MB', verdict: verdict(R.rss.deltaKb / 1024 <= 64, rssInvalid),
    value: R.rss.deltaKb / 1024, base: R.rss.baseKb / 1024,
  })
  rows.push({
    metric: `peak RSS, full fold of the ${mib1g} MiB log (window off; Δ VmHWM)`, measured: fmtMB(R.rss.fullDeltaKb), baseline: `addon only ${fmtMB(R.rss.baseKb)}`,
    ratio: `${(R.rss.fullKb / R.rss.baseKb).toFixed(2)}× peak`, target: '≤ 64 MB', verdict: verdict(R.rss.fullDeltaKb / 1024 <= 64, !!R.rss.fullError || R.rss.fullMessages === 0),
    value: R.rss.fullDeltaKb / 1024, base: R.rss.baseKb / 1024,
  })

  for (const r of rows) r.cpu ??= ''
  const cols = ['metric', 'measured', 'baseline', 'ratio', 'cpu ratio', 'target', 'verdict']
  for (const r of rows) r['cpu ratio'] = r.cpu
  const width = Object.fromEntries(cols.map(c => [c, Math.max(c.length, ...rows.map(r => String(r[c]).length))]))
  const line = (r) => cols.map(c => String(r[c]).padEnd(width[c])).join('  ').trimEnd()
  const lines = []
  env.loadavgEnd = os.loadavg().map(x => +x.toFixed(2))
  lines.push(`dsh-session-mail bench — ${env.date} — ${env.cpu} ×${env.cores}, ${env.memGiB} GiB — node ${env.node} — load avg ${env.loadavgStart[0]} → ${env.loadavgEnd[0]}`)
  const addonNow = addon ? statSync(join(REPO, addon)).mtime.toISOString() : null
  lines.push(process.env.BENCH_CORE
    ? `commit ${env.git} — core: BENCH_CORE=${process.env.BENCH_CORE} (not the repo's addon)${process.env.BENCH_CORE.endsWith('.node') && elfHasDebugInfo(readFileSync(process.env.BENCH_CORE)) ? ' — DEBUG BUILD' : ''}`
    : `commit ${env.git} — addon ${env.addon ?? 'MISSING'} built ${env.addonBuilt ?? '—'}${addonDebug ? ' — DEBUG BUILD' : ''}`)
  lines.push(`corpus: ${m.totals.files} logs in ${params.projects} project dirs, ${(m.totals.plainBytes / MiB).toFixed(0)} MiB decompressed / ${(m.totals.zstdBytes / MiB).toFixed(0)} MiB zstd, ${m.totals.frames} frames${QUICK_MODE ? ' (QUICK corpus)' : ''}; medians of ${REPS} (cheap ones: ${CHEAP_REPS})`)
  lines.push('')
  lines.push(line(Object.fromEntries(cols.map(c => [c, c]))))
  lines.push(cols.map(c => '-'.repeat(width[c])).join('  '))
  for (const r of rows) lines.push(line(r))
  lines.push('')
  lines.push(`samples (ms): zstd corpus ${R.zstdCorpus.ms.map(x => x.toFixed(0)).join(' ')} | list cold ${R.list.coldMs.map(x => x?.toFixed(1)).join(' ')} | list warm ${R.list.warmMs.map(x => x.toFixed(2)).join(' ')}`)
  if (R.host.runs) lines.push(`             host total ${R.host.totalMs.map(x => x.toFixed(0)).join(' ')} (listSessions ${R.host.runs.map(r => r.listMs.toFixed(0)).join(' ')}, readTitleSnapshots ${R.host.runs.map(r => r.titlesMs.toFixed(0)).join(' ')}; boot ${R.host.readyMs.toFixed(0)}, host VmHWM ${fmtMB(R.host.hwmAfterKb)})`)
  lines.push(`             zstd 100M ${R.zstdBig100.ms.map(x => x.toFixed(0)).join(' ')} | read cold ${R.read.coldMs.map(x => x?.toFixed(1)).join(' ')} | first ${R.readFirst.coldMs?.toFixed(0)} | full fold ${R.readFull.coldMs.map(x => x?.toFixed(0)).join(' ')} | read warm+append ${R.readAppend.warmMs.map(x => x.toFixed(2)).join(' ')}`)
  lines.push(`             zstd 1G ${R.zstdBig1g.ms.map(x => x.toFixed(0)).join(' ')} | 1G read cold ${R.read1g.coldMs.map(x => x?.toFixed(1)).join(' ')} | 1G full fold ${fmtMs(R.rss.fullMs)}`)
  lines.push(`             read window 100M ${spread(R.readWindow.coldMs)} [${R.readWindow.coldMs.map(x => x?.toFixed(1)).join(' ')}] | 1G ${spread([...R.rss.readMs, ...R.read1gWindow.coldMs])} [${[...R.rss.readMs, ...R.read1gWindow.coldMs].map(x => x?.toFixed(1)).join(' ')}]`)
  lines.push(`             titled at turn 1: zstd ${R.zstdTitle1.ms.map(x => x.toFixed(0)).join(' ')} | first read ${spread(R.title1First.coldMs)} [${R.title1First.coldMs.map(x => x?.toFixed(1)).join(' ')}] | next process ${spread(R.title1Next.coldMs)} [${R.title1Next.coldMs.map(x => x?.toFixed(1)).join(' ')}] | full fold ${fmtMs(R.title1Full.coldMs)}`)
  lines.push(`             RSS: addon-only VmHWM ${R.rss.baseSamplesKb.map(fmtMB).join(' ')}; after 1G read ${R.rss.samplesKb.map(fmtMB).join(' ')}; addon load ${fmtMs(R.list.loadMs)}`)
  const best = (xs) => Math.min(...xs.filter(Number.isFinite))
  lines.push(`best-of ratios (min/min; noise only ever adds time): list/zstd corpus ${(best(R.list.coldMs) / best(R.zstdCorpus.ms)).toFixed(2)}× | host/list ${R.host.runs ? (best(R.host.totalMs) / best(R.list.coldMs)).toFixed(1) + '×' : '—'} | read/zstd file ${(best(R.read.coldMs) / best(R.zstdBig100.ms)).toFixed(2)}× (window ${(best(R.readWindow.coldMs) / best(R.zstdBig100.ms)).toFixed(2)}×; 1G ${(best(R.read1gWindow.coldMs) / best(R.zstdBig1g.ms)).toFixed(3)}×) | warm list ${fmtMs(best(R.list.warmMs))} | warm read ${fmtMs(best(R.readAppend.warmMs))}`)
  const notes = []
  if (R.list.error) notes.push(`list: ${R.list.error}`)
  if (R.list.refused) notes.push(`list output is a refusal: ${JSON.stringify(R.list.head.split('\n')[0])}`)
  else if (!listInvalid && R.list.rows !== Math.min(LIST_LIMIT, m.totals.files)) notes.push(`list shows ${R.list.rows} rows; expected ${Math.min(LIST_LIMIT, m.totals.files)}`)
  if (R.list.homeWrites) notes.push(`the list wrote into DSH_HOME: ${R.list.homeWrites.join(', ')} (a persistent cache: "cold" runs after the first are not cold)`)
  if (!R.list.warmSameAsCold) notes.push('warm list output differs from the cold one')
  if (R.host.agreement) notes.push(`host agreement: our ${R.host.agreement.ourRows} rows vs host ${R.host.agreement.hostRows}, same ids in order: ${R.host.agreement.sameIdsInOrder}, title differences: ${R.host.agreement.titleDiffs}${R.host.agreement.examples.length ? ` (${R.host.agreement.examples.join('; ')})` : ''}`)
  if (R.host.runs?.some(r => r.rejected > 0)) notes.push(`host rejected titles: ${R.host.runs[0].rejectReasons.join('; ')}`)
  if (R.host.error) notes.push(`host: ${R.host.error}`)
  if (R.read.error) notes.push(`read: ${R.read.error}`)
  if (R.read.refused) notes.push(`read output is a refusal: ${JSON.stringify(R.read.head.split('\n')[0])}`)
  else if (!readInvalid && R.read.messages !== READ_MAX) notes.push(`read shows ${R.read.messages} messages; expected ${READ_MAX}`)
  if (R.readAppend.error) notes.push(`read-append: ${R.readAppend.error}`)
  if (R.readAppend.sawAppend.length && !R.readAppend.sawAppend.every(Boolean)) notes.push(`warm read did not show the appended event in ${R.readAppend.sawAppend.filter(x => !x).length} of ${R.readAppend.sawAppend.length} reads (stale cache?)`)
  if (R.rss.error) notes.push(`rss: ${R.rss.error}`)
  if (R.rss.fullError) notes.push(`rss (full fold): ${R.rss.fullError}`)
  if (R.readWindow.error) notes.push(`read (window): ${R.readWindow.error}`)
  if (R.read1gWindow.error) notes.push(`read 1G (window): ${R.read1gWindow.error}`)
  if (R.title1First.error) notes.push(`read titled at turn 1: ${R.title1First.error}`)
  if (addonDebug && !process.env.BENCH_CORE) notes.push('the addon is a debug build: rebuild with `--profile ci` (or `--release`) before reading these numbers')
  if (addonNow !== env.addonBuilt && !process.env.BENCH_CORE) notes.push(`the addon was rebuilt during the run (${env.addonBuilt} → ${addonNow}): rows may mix two builds`)
  if (notes.length) { lines.push(''); lines.push('notes:'); for (const n of notes) lines.push(`  - ${n}`) }
  lines.push('')
  lines.push('ratio = wall-time ratio (what the target is about); cpu ratio = the same ratio in CPU time (user + system, all threads), less sensitive to other load on the machine.')
  lines.push('MISS* = the measurement is not meaningful (the tool refused, crashed, or its output failed a sanity check); see notes.')
  lines.push(`total bench time ${((performance.now() - tStart) / 1000).toFixed(0)} s`)
  console.log(lines.join('\n'))

  // the corpus folder relative to the checkout: results.json carries no machine path
  const results = { env, corpus: { dir: relative(REPO, m.dir), params, totals: m.totals, big: { big100m: { id: big100.id, plainBytes: big100.plainBytes, zBytes: big100.zBytes }, big1g: { id: big1g.id, plainBytes: big1g.plainBytes, zBytes: big1g.zBytes } } }, reps: REPS, quick: QUICK_MODE, table: rows, raw: R, notes }
  mkdirSync(benchDir(), { recursive: true })
  writeFileSync(join(benchDir(), 'results.json'), JSON.stringify(results, null, 2) + '\n')
  log(`results written to ${join(benchDir(), 'results.json')}`)
  if (process.env.BENCH_KEEP !== '1') rmSync(join(benchDir(), 'host-run'), { recursive: true, force: true })
}

await main().catch((e) => { console.error(e?.stack ?? e); process.exit(1) })
// The live-peer rows (issue 8: 20,000-session scale, live read, host stall, send overhead): bench/peers.mjs.
if (!argv.includes('--no-peers')) {
  log('live-peer rows (bench/peers.mjs)…')
  const r = spawnSync(process.execPath, [join(HERE, 'peers.mjs'), ...argv], { stdio: 'inherit' })
  if (r.status !== 0) process.exitCode = r.status ?? 1
}
// The human's mail index (issue 32: 100,000 messages, the page's routes): bench/index.mjs.
if (!argv.includes('--no-index')) {
  log('mail index rows (bench/index.mjs)…')
  const r = spawnSync(process.execPath, [join(HERE, 'index.mjs'), ...argv.filter(a => a === '--quick')], { stdio: 'inherit' })
  if (r.status !== 0) process.exitCode = r.status ?? 1
}
process.exit(crashed ? 1 : 0)
