#!/usr/bin/env node
// `npm run bench:machines:path` (issue 31): the remote send against the local one with the two rc.8 hosts on
// two "machines" — network namespaces this bench makes — joined by a path of 0 ms and then 20 ms round trip.
// The kernel here has no sch_netem (and no iptables/nft), so the path is a delaying UDP bridge
// (crates/link/examples/udp_bridge.rs, built with `cargo build --example`) that holds each datagram half the
// round trip each way:
//
//   a: host A (dsh web, its fake LLM)      ra            rb      b: host B
//   va 10.78.1.1 ─── veth ─── xa 10.78.1.254          xb 10.78.2.254 ─── veth ─── vb 10.78.2.1
//                             lo 10.78.2.1 (B, seen from a)     lo 10.78.1.1 (A, seen from b)
//                             └────────── udp_bridge (the only path between ra and rb) ──────────┘
//
// ra and rb have no route to each other: what A sends to B's address ends at the bridge's socket in ra, and
// the bridge sends it on from A's address in rb (and back the same way), so both hosts see each other's real
// address and nothing is rewritten. Every namespace has a default route into a veth that leads nowhere: its
// packet counter must stay 0 (printed at the end). Each host's endpoint is bound on its namespace's address
// (DSH_SESSION_MAIL_LINK_BIND, a fixed port: the bridge listens there), relay none; the homes are directories
// this process sees too, so the tools are driven through bench/peers-plugin's job files, and everything that
// needs the host's HTTP port (boot, sessions, the CLI) runs in a small child started inside the host's
// namespace (`ip netns exec`, JSON lines on stdio: this file with --role-host).
//
// Rows, for each path: the path's bare round trip (a UDP ping from a to an echo in b through the bridge, Node
// dgram on both ends); then, with each host on cores of its own (host A's process tree, every thread, on the
// first half of the CPUs this process may use, B's on the second: `taskset -a` after the boot, what they start
// later inherits it — two machines, the path's model; one core each on a machine of two) and with both hosts on
// all of them: the link's round trip (`links` probes: the holder's QUIC ping);
// sessions_send both ways, each against a local send into the same session from another session of its host
// (A → B vs B2 → B, B → A vs A2 → A), the four in a rotating order, the difference the mean of the two
// directions' (remote p50 − local p50), as in bench/machines.mjs; target: that difference ≤ the link's round
// trip + 2 ms, judged on the cores-per-host rows. On shared cores the turn a message starts on B (its host, its
// fake LLM) runs on the cores A takes the answer on (bench/README.md runs M39): those rows are printed, not
// judged. Each model has its bias — fewer cores per host slow the local baseline — so both are printed.
//
// Options: --n N (pairs per path, default 60), --rtt N (probes, default 20), --pause MS (default 150),
// --paths 0,20 (round trips in ms), --cores own,shared (which rows; also `one`: both hosts pinned to the same
// single core, the control for `own` on a machine of two), --addon FILE (this addon in both homes
// instead of the worktree's: a baseline build beside the new one, back to back). Skipped, with a line saying why, where `ip netns` is not permitted.
import { spawn, spawnSync } from 'node:child_process'
import { cpSync, existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import dgram from 'node:dgram'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const SELF = fileURLToPath(import.meta.url)
const sleep = ms => new Promise(r => setTimeout(r, ms))
const argv = process.argv.slice(2)

const A_IP = '10.78.1.1'
const B_IP = '10.78.2.1'
const PORT_A = 47311
const PORT_B = 47312
const PORT_ECHO = 47313

if (argv[0] === '--role-host') await hostChild()
else await main()

/** The CPUs a CPU list names ("0-3,6" → [0, 1, 2, 3, 6]), as /proc's Cpus_allowed_list and taskset -c write it. */
function cpuList(list) {
  const out = []
  for (const part of String(list).split(',')) {
    const [a, b = a] = part.split('-').map(Number)
    for (let c = a; c <= b; c++) out.push(c)
  }
  return out
}
/** The Cpus_allowed_list of a /proc status file. */
function allowedOf(file) { return /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(file, 'utf8'))?.[1] }

/** Inside a host's namespace: JSON lines on stdin ({k, op, ...}), answers on stdout ({k, ok, value | error}). */
async function hostChild() {
  const H = await import('../test/real-host/harness.mjs')
  const { startFakeLlm } = await import('../test/real-host/fake-llm.mjs')
  let box, web, llm
  const clis = []
  const ops = {
    async boot({ box: b }) {
      llm = await startFakeLlm({ port: 0 })
      box = { ...b, host: H.installHost(), webs: [] }
      web = await H.bootWeb(box, { env: { DEEPSEEK_BASE_URL: llm.baseURL } })
      return { pid: web.pid }
    },
    session: ({ cwd }) => web.createSession(cwd ?? box.ws),
    async hello({ id }) { await web.prompt(id, 'hello'); await web.waitFor(id, ev => H.turnEndCount(ev) >= 1 && H.isIdle(ev)); return true },
    cliStart: ({ args }) => clis.push(H.startCli(box, args)) - 1,
    cliOut: ({ n }) => clis[n].out(),
    cliDone: ({ n }) => clis[n].done,
    echo({ at }) {
      const s = dgram.createSocket('udp4')
      s.on('message', (m, r) => s.send(m, r.port, r.address))
      return new Promise((res, rej) => { s.once('error', rej); s.bind(at.port, at.ip, () => res(true)) })
    },
    async ping({ to, n, pause }) {
      const s = dgram.createSocket('udp4')
      await new Promise(r => s.bind(0, A_IP, r))
      const out = []
      for (let i = 0; i < n; i++) {
        const t = performance.now()
        const got = new Promise(r => { s.once('message', () => r(performance.now() - t)) })
        s.send(Buffer.from(`ping ${i}`), to.port, to.ip)
        out.push(await Promise.race([got, sleep(2000).then(() => NaN)]))
        await sleep(pause)
      }
      s.close()
      return out
    },
    // this child and every process under it (the host, a CLI run), all their threads, on `cpus` (taskset -a);
    // what they start later inherits it. Answers how many processes and threads, and the threads not on it.
    pin({ cpus }) {
      const want = cpuList(cpus).join(',')
      const parent = new Map()
      for (const d of readdirSync('/proc')) {
        if (!/^[0-9]+$/.test(d)) continue
        try { const st = readFileSync(`/proc/${d}/stat`, 'utf8'); parent.set(Number(d), Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1])) } catch {}
      }
      const tree = [process.pid]
      for (let i = 0; i < tree.length; i++) for (const [pid, pp] of parent) if (pp === tree[i]) tree.push(pid)
      let threads = 0; const off = []
      for (const pid of tree) {
        const r = spawnSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { encoding: 'utf8' })
        // (a process gone meanwhile is no failure: its threads are not counted below)
        if (r.status !== 0 && existsSync(`/proc/${pid}`)) throw new Error(`taskset ${pid}: ${r.stderr || r.error?.message}`)
        let tasks = []
        try { tasks = readdirSync(`/proc/${pid}/task`) } catch {}
        for (const t of tasks) {
          try {
            const on = allowedOf(`/proc/${pid}/task/${t}/status`)
            threads++
            if (cpuList(on).join(',') !== want) off.push(`${pid}/${t} on ${on}`)
          } catch {}
        }
      }
      return { processes: tree.length, threads, off }
    },
    async stop() { await Promise.all(box?.webs.map(w => w.stop().catch(() => {})) ?? []); await llm?.close(); return true },
  }
  for await (const line of createInterface({ input: process.stdin })) {
    const m = JSON.parse(line)
    try {
      process.stdout.write(JSON.stringify({ k: m.k, ok: true, value: await ops[m.op](m) }) + '\n')
    } catch (e) {
      process.stdout.write(JSON.stringify({ k: m.k, ok: false, error: String(e?.stack ?? e) }) + '\n')
    }
  }
  await ops.stop().catch(() => {})
  process.exit(0)
}

function ip(line, { quiet = false } = {}) {
  const r = spawnSync('ip', line.split(' '), { encoding: 'utf8' })
  if (r.status !== 0) {
    const e = new Error(`ip ${line}: ${(r.stderr || r.error?.message || '').trim()}`)
    if (!quiet) throw e
    return { error: e }
  }
  return { out: r.stdout }
}

/** The four namespaces (a, ra, rb, b) as drawn at the top; `null` where they cannot be made. */
function makeNet() {
  const p = process.pid
  const ns = { a: `dshm-path-${p}-a`, ra: `dshm-path-${p}-ra`, rb: `dshm-path-${p}-rb`, b: `dshm-path-${p}-b` }
  const all = Object.values(ns)
  const made = []
  const drop = () => { for (const n of made) ip(`netns del ${n}`, { quiet: true }) }
  for (const n of all) {
    const r = ip(`netns add ${n}`, { quiet: true })
    if (r.error) { drop(); return { skip: r.error.message } }
    made.push(n)
  }
  const cmds = []
  for (const n of all) {
    cmds.push(
      `netns exec ${n} sysctl -qw net.ipv6.conf.all.disable_ipv6=1`,
      `netns exec ${n} sysctl -qw net.ipv6.conf.default.disable_ipv6=1`,
      `-n ${n} link set lo up`,
      `-n ${n} link add dz type veth peer name dz2`,
      `-n ${n} addr add 10.213.78.1/24 dev dz`,
      `-n ${n} link set dz up`,
      `-n ${n} link set dz2 up`,
      `-n ${n} route add default via 10.213.78.2 dev dz`,
      // the bench's own addresses never fall to the default route: unreachable, answered here
      `-n ${n} route add unreachable 10.78.0.0/16 metric 1000`,
    )
  }
  cmds.push(
    `-n ${ns.a} link add va type veth peer name xa netns ${ns.ra}`,
    `-n ${ns.b} link add vb type veth peer name xb netns ${ns.rb}`,
    `-n ${ns.a} addr add ${A_IP}/24 dev va`,
    `-n ${ns.b} addr add ${B_IP}/24 dev vb`,
    `-n ${ns.ra} addr add 10.78.1.254/24 dev xa`,
    `-n ${ns.rb} addr add 10.78.2.254/24 dev xb`,
    `-n ${ns.ra} addr add ${B_IP}/32 dev lo`,
    `-n ${ns.rb} addr add ${A_IP}/32 dev lo`,
    `-n ${ns.a} link set va up`,
    `-n ${ns.b} link set vb up`,
    `-n ${ns.ra} link set xa up`,
    `-n ${ns.rb} link set xb up`,
    `-n ${ns.a} route add 10.78.2.0/24 via 10.78.1.254`,
    `-n ${ns.b} route add 10.78.1.0/24 via 10.78.2.254`,
  )
  for (const c of cmds) {
    const r = ip(c, { quiet: true })
    if (r.error) { drop(); return { skip: r.error.message } }
  }
  const counters = () => Object.fromEntries(Object.entries(ns).map(([k, n]) =>
    [k, Number(spawnSync('ip', ['netns', 'exec', n, 'cat', '/sys/class/net/dz/statistics/tx_packets'], { encoding: 'utf8' }).stdout.trim())]))
  return { ns, drop, counters }
}

/** A child in namespace `n` running this file's --role-host: call(op, args) -> its answer. */
function hostIn(n) {
  const child = spawn('ip', ['netns', 'exec', n, process.execPath, SELF, '--role-host'], { stdio: ['pipe', 'pipe', 'inherit'] })
  const waiting = new Map()
  let k = 0
  createInterface({ input: child.stdout }).on('line', (line) => {
    let m
    try { m = JSON.parse(line) } catch { return process.stderr.write(`${n}: ${line}\n`) }
    const w = waiting.get(m.k); waiting.delete(m.k)
    if (m.ok) w?.resolve(m.value); else w?.reject(new Error(`${n}: ${m.error}`))
  })
  child.on('exit', () => { for (const w of waiting.values()) w.reject(new Error(`${n}: the host child exited`)) })
  return {
    call: (op, args = {}) => new Promise((resolve, reject) => {
      const m = { k: ++k, op, ...args }
      waiting.set(m.k, { resolve, reject })
      child.stdin.write(JSON.stringify(m) + '\n')
    }),
    async end() { child.stdin.end(); await new Promise(r => child.exitCode !== null ? r() : child.once('exit', r)) },
  }
}

async function main() {
  const log = s => process.stderr.write(`bench-machines-path: ${s}\n`)
  const opt = (name, dflt) => argv.includes(name) ? argv[argv.indexOf(name) + 1] : dflt
  const N = Math.max(3, Number(opt('--n', 60)))
  const RTT_N = Math.max(3, Number(opt('--rtt', 20)))
  const PAUSE = Math.max(0, Number(opt('--pause', 150)))
  const PATHS = String(opt('--paths', '0,20')).split(',').map(Number)
  const ADDON = argv.includes('--addon') ? resolve(opt('--addon')) : null
  const CORES = String(opt('--cores', 'own,shared')).split(',')
  if (!CORES.length || CORES.some(c => c !== 'own' && c !== 'shared' && c !== 'one')) throw new Error('--cores: own, shared and/or one, comma-separated')
  // the CPUs this process may use (a cgroup's cpuset may allow fewer than the machine has): own gives each
  // host half of them, one the first to both, shared all to both
  const SET = cpuList(allowedOf('/proc/self/status'))
  const HALF = SET.length >> 1
  const CPU_OF = {
    own: [SET.slice(0, HALF).join(','), SET.slice(HALF, 2 * HALF).join(',')],
    one: [String(SET[0]), String(SET[0])],
    shared: [SET.join(','), SET.join(',')],
  }
  const named = cs => cs.length === 1 ? `CPU ${cs}` : `CPUs ${cs}`
  // a core per host needs two
  const MODES = SET.length >= 2 ? CORES : CORES.filter(c => c !== 'own')
  if (!MODES.length) { console.log('bench:machines:path skipped: a core per host needs two cores, this process may use one (--cores shared runs here)'); return }
  const q = (xs, p) => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); return a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN }
  const med = xs => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2 }
  const f = x => Number.isFinite(x) ? x.toFixed(2) : '—'
  const ppm = xs => `${f(med(xs))} / ${f(q(xs, 0.99))} / ${f(Math.max(...xs.filter(Number.isFinite)))}`

  const net = makeNet()
  if (net.skip) {
    console.log(`bench:machines:path skipped: network namespaces cannot be made here (${net.skip})`)
    return
  }
  let bridge
  const boxes = []
  const hosts = []
  try {
    const before = net.counters()
    log('building the bridge (cargo build --example udp_bridge)')
    const built = spawnSync('cargo', ['build', '-q', '-p', 'dsh-session-mail-link', '--example', 'udp_bridge'], { cwd: REPO, stdio: ['ignore', 'inherit', 'inherit'], env: { CARGO_BUILD_JOBS: '2', ...process.env } })
    if (built.status !== 0) throw new Error('cargo build --example udp_bridge failed')
    const target = process.env.CARGO_TARGET_DIR ?? join(REPO, 'target')
    bridge = spawn(join(target, 'debug', 'examples', 'udp_bridge'),
      [net.ns.ra, net.ns.rb, `${B_IP}:${PORT_B},${B_IP}:${PORT_ECHO}`, `${A_IP}:${PORT_A}`], { stdio: ['pipe', 'pipe', 'inherit'] })
    const bridgeLines = createInterface({ input: bridge.stdout })[Symbol.asyncIterator]()
    const bridgeSays = async (cmd) => { if (cmd) bridge.stdin.write(cmd + '\n'); const r = await bridgeLines.next(); if (r.done || r.value.startsWith('error')) throw new Error(`udp_bridge: ${r.value}`); return r.value }
    await bridgeSays()

    const H = await import('../test/real-host/harness.mjs')
    const { addPeersPlugin, jobs } = await import('./peers-jobs.mjs')
    const UNLIMITED = { budgetPerPair: 0, budgetPerSender: 0, budgetPerMachine: 0, maxStackedPerSender: 0, maxRelayHops: 0 }
    const made = []
    for (const [ipAddr, port] of [[A_IP, PORT_A], [B_IP, PORT_B]]) {
      const box = await H.makeSandbox({ env: { DSH_SESSION_MAIL_LINK_BIND: `${ipAddr}:${port}` } })
      boxes.push(box)
      const pdir = H.initProfile(box, 'web')
      H.packAndInstall(pdir, REPO, { mode: 'manual' })
      if (ADDON) cpSync(ADDON, join(pdir, 'node_modules', 'dsh-session-mail', 'dsh-session-mail.linux-x64-gnu.node'))
      writeFileSync(join(pdir, 'cordis.patch.yml'), `- id: dsh-session-mail\n  config: ${JSON.stringify(UNLIMITED)}\n`)
      addPeersPlugin(pdir)
      made.push(jobs(box))
    }
    const [boxA, boxB] = boxes
    const [jobA, jobB] = made
    const wsA2 = boxA.mkdir('ws-a2'); const wsB2 = boxB.mkdir('ws-b2')
    const A = hostIn(net.ns.a); hosts.push(A)
    const B = hostIn(net.ns.b); hosts.push(B)
    const plain = box => ({ dir: box.dir, home: box.home, ws: box.ws, env: box.env })
    await A.call('boot', { box: plain(boxA) })
    await B.call('boot', { box: plain(boxB) })
    const sa = await A.call('session'); const sa2 = await A.call('session', { cwd: wsA2 }); const sb = await B.call('session')
    const sb2 = await B.call('session', { cwd: wsB2 })
    await Promise.all([A.call('hello', { id: sa }), A.call('hello', { id: sa2 }), B.call('hello', { id: sb }), B.call('hello', { id: sb2 })])
    await B.call('echo', { at: { ip: B_IP, port: PORT_ECHO } })

    // the link, through the command line in each namespace
    const inviting = await A.call('cliStart', { args: ['link', '--relay', 'none', '--json', '--ttl-minutes', '5'] })
    let invite
    for (const t = Date.now(); invite === undefined; await sleep(50)) {
      try { invite = JSON.parse(await A.call('cliOut', { n: inviting })).invite } catch { if (Date.now() - t > 30_000) throw new Error('no invite') }
    }
    const addrs = JSON.parse(Buffer.from(invite.slice('dshm1'.length), 'base64url')).addrs
    if (!addrs.includes(`${A_IP}:${PORT_A}`)) throw new Error(`A's endpoint is not on ${A_IP}:${PORT_A} (the bridge's address): ${addrs}`)
    const joined = await B.call('cliDone', { n: await B.call('cliStart', { args: ['link', invite, '--name', 'home-a', '--json'] }) })
    if (joined.code !== 0) throw new Error(`link: ${joined.stdout}${joined.stderr}`)
    await A.call('cliDone', { n: inviting })
    const cliA = async args => A.call('cliDone', { n: await A.call('cliStart', { args }) })
    const asA = JSON.parse((await cliA(['links', '--no-probe', '--json'])).stdout)
    await cliA(['machines', 'rename', asA.links[0].name, 'home-b'])
    await Promise.all([H.leaseHeldByHost(boxA.home), H.leaseHeldByHost(boxB.home)])
    await sleep(3000)
    const load0 = loadavg()

    const tool = (job, caller, name, args) => job({ op: 'tool', tool: name, args, caller, config: UNLIMITED })
    const out = []
    for (const [pi, ms] of PATHS.entries()) {
      await bridgeSays(`delay ${Math.round(ms * 500)}`)
      await sleep(1000)
      const bare = await A.call('ping', { to: { ip: B_IP, port: PORT_ECHO }, n: 50, pause: 20 })
      // own then shared, shared then own on the next path: drift within a run favours neither
      for (const cores of pi % 2 ? [...MODES].reverse() : MODES) {
        // own: each host (its process tree, every thread) on cores of its own, as two machines would be —
        // B's turn, started by the message, cannot take A's core as A takes the answer; shared: both hosts
        // on all the cores; one: both on one
        const [ca, cb] = CPU_OF[cores]
        const [pa, pb] = await Promise.all([A.call('pin', { cpus: ca }), B.call('pin', { cpus: cb })])
        if (pa.off.length || pb.off.length) throw new Error(`threads not pinned: ${[...pa.off, ...pb.off].join(', ')}`)
        await sleep(500)
        const rtt = []
        for (let i = 0; i < RTT_N; i++) {
          const l = JSON.parse((await cliA(['links', '--json'])).stdout).links.find(x => x.name === 'home-b')
          if (l?.online) rtt.push(l.rttMs)
        }
        // both ways, each remote send against a local send into the same session (bench/machines.mjs)
        const rAB = []; const lB = []; const rBA = []; const lA = []
        const kinds = [['remote A → B', jobA, sa, sb, rAB], ['local B2 → B', jobB, sb2, sb, lB], ['remote B → A', jobB, sb, sa, rBA], ['local A2 → A', jobA, sa2, sa, lA]]
        for (let i = -1; i < N; i++) {
          for (let k = 0; k < kinds.length; k++) {
            const [kind, job, caller, target, xs] = kinds[(k + Math.max(0, i)) % kinds.length]
            await sleep(PAUSE)
            const r = await tool(job, caller, 'sessions_send', { session_id: target, message: `bench ${kind} ${ms} ms ${cores} ${i}` })
            if (!r.text.startsWith('accepted')) throw new Error(`${kind} send over the ${ms} ms path: ${r.text.slice(0, 300)}`)
            if (i >= 0) xs.push(r.ms)
          }
        }
        const RTT = med(rtt)
        const dAB = med(rAB) - med(lB); const dBA = med(rBA) - med(lA)
        const d = (dAB + dBA) / 2
        out.push({ pi, ms, cores, on: [ca, cb], pinned: [pa, pb], bare, rtt, RTT, rAB, lB, rBA, lA, dAB, dBA, d, ok: d <= RTT + 2, load: loadavg()[0] })
        log(`${ms} ms path, ${cores} cores: A → B ${ppm(rAB)} vs B2 → B ${ppm(lB)}; B → A ${ppm(rBA)} vs A2 → A ${ppm(lA)}; link RTT ${f(RTT)}`)
      }
    }
    const through = await bridgeSays('stats')
    const after = net.counters()
    const load1 = loadavg()
    console.log(`\nbench:machines:path — hosts A and B in network namespaces, reached only through a delaying UDP bridge (relay none), N=${N} rounds (of four sends) per path and cores, pause ${PAUSE} ms${ADDON ? `, addon ${ADDON}` : ''}; load ${load0.map(x => x.toFixed(1)).join(' ')} → ${load1.map(x => x.toFixed(1)).join(' ')}`)
    console.log('p50 / p99 / max in ms\n')
    if (CORES.includes('own') && !MODES.includes('own')) console.log('MISS cores per host: this process may use one core, so no row is judged\n')
    if (MODES.includes('own')) console.log(`The target is judged on the rows with cores per host (A on ${named(CPU_OF.own[0])}, B on ${named(CPU_OF.own[1])}, each host's processes and threads: two machines of ${HALF} core${HALF > 1 ? 's' : ''} each, the model of the path; pinned after the boot, so each host's thread pools keep the sizes they took for ${SET.length} CPUs). The rows on shared cores (both hosts on ${named(CPU_OF.shared[0])}: one machine) are printed beside them, not judged: there the turn a message starts on B runs on the cores A takes the answer on. Each model has its bias: fewer cores per host slow the local baseline (a host's parallel work, and the turn a local send starts, share its cores); shared cores charge the remote send with the other host's work (bench/README.md runs M39).\n`)
    out.sort((x, y) => x.pi - y.pi || CORES.indexOf(x.cores) - CORES.indexOf(y.cores))
    let shown = -1
    for (const r of out) {
      const where = r.cores === 'own' ? `cores per host (A on ${named(r.on[0])}: ${r.pinned[0].processes} processes, ${r.pinned[0].threads} threads; B on ${named(r.on[1])}: ${r.pinned[1].processes}, ${r.pinned[1].threads})`
        : r.cores === 'one' ? `one core for both hosts (${named(r.on[0])})` : `shared cores (both hosts on ${named(r.on[0])})`
      // the bare round trip is the path's, taken once before its first rows
      const bare = r.pi !== shown ? `bare round trip (UDP ping through the bridge, Node dgram, once before the path's rows) ${ppm(r.bare)}; ` : ''
      shown = r.pi
      console.log(`   ${r.ms} ms path, ${where}: ${bare}link round trip (links probe) ${ppm(r.rtt)}`)
      const sign = x => `${x >= 0 ? '+' : ''}${f(x)}`
      const verdict = r.cores === 'own' ? (r.ok ? 'ok  ' : 'MISS') : 'info'
      const over = r.cores === 'own' ? '' : `, ${sign(r.d - r.RTT)} over the RTT: ${r.ok ? 'within' : 'over'} the target's bound, not judged`
      console.log(`${verdict} sessions_send remote, both ways, over the ${r.ms} ms path, ${{ own: 'cores per host', one: 'one core for both', shared: 'shared cores' }[r.cores]}: A → B ${ppm(r.rAB)} · B → A ${ppm(r.rBA)}\n       baseline: local into the same session: B2 → B ${ppm(r.lB)} · A2 → A ${ppm(r.lA)}\n       difference: ${sign(r.d)} ms, the mean of A → B ${sign(r.dAB)} and B → A ${sign(r.dBA)} (link RTT ${f(r.RTT)}${over})   target ≤ local + RTT + 2 ms   (load ${r.load.toFixed(1)})`)
    }
    const sent = Object.entries(after).map(([k, v]) => `${k} ${v - before[k]}`).join(', ')
    const clean = Object.entries(after).every(([k, v]) => v === before[k])
    console.log(`${clean ? 'ok  ' : 'FAIL'} packets out of each namespace's default route during the run: ${sent} (the bridge carried ${through.replace('datagrams ', '')} datagrams)`)
    if (!clean) process.exitCode = 1
  } finally {
    for (const h of hosts) await h.end().catch(() => {})
    if (bridge) { bridge.stdin.end(); bridge.kill() }
    for (const b of boxes) await b.cleanup().catch(() => {})
    net.drop()
  }
}
