#!/usr/bin/env node
// `node bench/peer-syscalls.mjs [--also OTHER.node] [--levels 1,100,1000]` (issue 30 target 1): the system calls
// of one send from another process on the home, at +K presence records — a count the machine's load does not
// move, beside bench/send.mjs's timings. A real rc.8 `dsh web` (harness sandbox, plugin installed) holds the
// target S live; at each level K `sleep` processes and K presence records (bench/send.mjs's planter: fresh, one per
// pid, rewritten every second); a node process loads the addon and makes N sends into S (150 ms apart) under
// `strace -f -c`, N = 1 and 21: (calls of 21 − calls of 1) / 20 is one send's, by system call. `--also` counts the
// same through a second build (an earlier commit's addon). Needs strace.
import { readFileSync, writeFileSync, existsSync, readdirSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { spawn, spawnSync } from 'node:child_process'
import { createRequire } from 'node:module'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const argv = process.argv.slice(2)
const opt = (name, dflt) => argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt
const sleep = ms => new Promise(r => setTimeout(r, ms))

if (argv[0] === '--sends') {
  // the traced child: N sends into S through the addon `build`
  const [, build, home, S, A, n] = argv
  const core = createRequire(import.meta.url)(resolve(build))
  const config = { budgetPerPair: 100_000, budgetPerSender: 100_000, maxStackedPerSender: 1000 }
  for (let i = 0; i < Number(n); i++) {
    await sleep(150)
    const v = await core.run(JSON.stringify({ tool: 'sessions_send', args: { session_id: S, message: `syscalls ${i}` }, caller: { sessionId: A, agentId: null, title: null }, config, host: { dshHome: home, baseUrl: null, version: null, secret: null, profile: null }, live: [] }))
    if (!v.text.startsWith('accepted')) { console.error(v.text.slice(0, 300)); process.exit(2) }
  }
  process.exit(0)
}

const H = await import('../test/real-host/harness.mjs')
const builds = { 'this build': join(REPO, 'binding.cjs') }
if (opt('--also', null)) builds[opt('--also')] = resolve(opt('--also'))
const LEVELS = String(opt('--levels', '1,100,1000')).split(',').map(Number).filter(k => k >= 0)
const src = readFileSync(join(HERE, 'send.mjs'), 'utf8')
const PLANTER = src.slice(src.indexOf('const PLANTER = `') + 'const PLANTER = `'.length, src.indexOf('`\n\nconst box'))
const box = await H.makeSandbox()
const sleepers = []
let writer
try {
  H.packAndInstall(H.initProfile(box, 'web'), REPO, { mode: 'manual' })
  const web = await H.bootWeb(box)
  const A = await web.createSession(box.ws)
  const S = await web.createSession(box.mkdir('ws-s'))
  await sleep(2500) // S's owner has published it
  const presence = join(box.home, 'dsh-session-mail', 'presence')
  for (const k of LEVELS) {
    while (sleepers.length < k) { const c = spawn('sleep', ['3600'], { stdio: 'ignore' }); await new Promise(r => c.once('spawn', r)); sleepers.push(c) }
    writer?.kill()
    writeFileSync(join(box.dir, 'planted-pids.json'), JSON.stringify(sleepers.slice(0, k).map(c => c.pid)))
    writer = spawn(process.execPath, ['-e', PLANTER, presence, join(box.dir, 'planted-pids.json'), '1000'], { stdio: 'ignore' })
    for (const t0 = Date.now(); Date.now() - t0 < 10_000; await sleep(50)) if (readdirSync(presence).filter(n => n.endsWith('.json')).length >= k + 1) break
    await sleep(300)
    for (const [name, build] of Object.entries(builds)) {
      const calls = {}
      for (const n of [1, 21]) {
        const out = join(box.dir, `strace-${k}-${n}.txt`)
        const r = spawnSync('strace', ['-f', '-c', '-o', out, process.execPath, fileURLToPath(import.meta.url), '--sends', build, box.home, S, A, String(n)], { stdio: 'inherit' })
        if (r.status !== 0 || !existsSync(out)) throw new Error(`the sends through ${name} failed (status ${r.status})`)
        calls[n] = {}
        for (const line of readFileSync(out, 'utf8').split('\n')) {
          const f = line.trim().split(/\s+/)
          if (f.length >= 5 && /^\d/.test(f[0]) && f.at(-1) !== 'total') calls[n][f.at(-1)] = Number(f[3])
        }
      }
      const per = Object.fromEntries([...new Set([...Object.keys(calls[1]), ...Object.keys(calls[21])])].map(c => [c, ((calls[21][c] ?? 0) - (calls[1][c] ?? 0)) / 20]))
      const sum = Object.values(per).reduce((a, b) => a + b, 0)
      const top = Object.entries(per).sort((a, b) => b[1] - a[1]).slice(0, 8).map(([c, v]) => `${c} ${v.toFixed(1)}`).join(', ')
      console.log(`+${k} records, ${name}: ${sum.toFixed(1)} system calls a send (${top})`)
    }
  }
} finally {
  writer?.kill()
  for (const c of sleepers) c.kill()
  await box.cleanup()
}
process.exit(0)
