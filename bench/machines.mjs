#!/usr/bin/env node
// `npm run bench:machines` (issue 31): the tools across a direct link on loopback, each against its local
// baseline measured in the same run. Two DSH homes on this machine, each a real rc.8 `dsh web` with the plugin
// installed and bench/peers-plugin beside it (the plugin's own execute run inside the host with the host's ctx,
// as bench/send.mjs and bench/peers.mjs time the tool path), linked through the command line with relay none and
// DSH_SESSION_MAIL_LINK_BIND=127.0.0.1:0 (no packet leaves 127.0.0.1). Each host holds its home's endpoint.
//
//   rtt      one round trip: `links` probes (the holder's ping over the link), the median of --rtt probes
//   send     sessions_send both ways, each against a local send into the SAME session from another session of
//            its host: A → B (remote) vs B2 → B (local), B → A (remote) vs A2 → A (local), the four in a rotating
//            order; the difference is the mean of the two directions' (remote p50 − local p50): what each host
//            spends of its own on a send (its tool call, its turn admission) cancels out, the link's cost stays
//            (bench/README.md runs S38: host B admits a turn up to ~1.3 ms slower than host A, remote or not);
//            target: that difference ≤ one round trip + 2 ms
//   list     sessions_list of home B's --sessions generated cold sessions (plus B): from A (remote, query the
//            generated title) vs in B itself before the link (local, no machine to ask) and after it (local, which
//            then also asks A); target: remote ≤ local (before the link) + RTT + 10 ms
//   read     sessions_read of B's session (max_messages 50) from A vs in B
//   read100  sessions_read of a 100 MiB log on B (bench/gen-corpus.mjs TITLE_ONCE: its only titles are the first
//            turn's, the window read's worst case; 10 MiB with --quick) from A vs in B; target: remote ≤ local
//            + RTT + transfer (the answer's bytes, printed: on loopback its transfer is within the RTT's noise)
//   idle     home A's host process (the endpoint holder) over 10 s idle, before the link and after it (before the
//            rows below): % of a core (utime + stime from /proc) and RSS; target < 1 % and ≤ 30 MB more
//   stall    the worst answer time of a loopback request to A's web server every 20 ms (rc.8's host.describe)
//            during each phase vs idle before the link; target ≤ 50 ms
//
// Both homes' plugin rows turn the budgets, the stacking guard and the relay limit off (UNLIMITED: 2N+ sends to
// one target are the point; the sending side's tools get the same config, as bench/send.mjs's jobs do); the frame, the policy, the header guard and the ledger run as shipped.
//
// Options: --n N (pairs per row, default 30), --sessions N (generated on B, default 2000), --rtt N (default 20),
// --pause MS (before each call, default 150), --quick (the big log 10 MiB), --only ROWS (a comma-separated subset of
// send, list, read, read100, idle: the round trip and those rows only; `--only send` writes no corpus, `--only
// read100` no cold sessions but the big log),
// --addon FILE (run with this addon in both homes instead of the worktree's: a baseline build beside the new one,
// e.g. `--addon /tmp/base.node` then without, back to back at the same load).
import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, utimesSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { loadavg } from 'node:os'
import zlib from 'node:zlib'

const HERE = dirname(fileURLToPath(import.meta.url))
const REPO = resolve(HERE, '..')
const H = await import('../test/real-host/harness.mjs')
const { projectKey, ensureCorpus, TITLE_ONCE, TITLE_ONCE_QUICK } = await import('./gen-corpus.mjs')
const { addPeersPlugin, jobs } = await import('./peers-jobs.mjs')
const ENV = { DSH_SESSION_MAIL_LINK_BIND: '127.0.0.1:0' }
// no bench may send a packet to a public relay: the core refuses that choice here and in every process started
process.env.DSH_SESSION_MAIL_NO_PUBLIC_NETWORK = '1'
const UNLIMITED = { budgetPerPair: 0, budgetPerSender: 0, budgetPerMachine: 0, maxStackedPerSender: 0, maxRelayHops: 0 }

const argv = process.argv.slice(2)
const opt = (name, dflt) => argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : dflt
const N = Math.max(3, opt('--n', 30))
const SESSIONS = Math.max(1, opt('--sessions', 2000))
const RTT_N = Math.max(3, opt('--rtt', 20))
const PAUSE = Math.max(0, opt('--pause', 150))
const ONLY = argv.includes('--only') ? new Set(argv[argv.indexOf('--only') + 1].split(',')) : null
const wants = r => !ONLY || ONLY.has(r)
const ADDON = argv.includes('--addon') ? resolve(argv[argv.indexOf('--addon') + 1]) : null
const log = s => process.stderr.write(`bench-machines: ${s}\n`)
const sleep = ms => new Promise(r => setTimeout(r, ms))
const q = (xs, p) => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); return a.length ? a[Math.min(a.length - 1, Math.floor(p * a.length))] : NaN }
const med = xs => { const a = xs.filter(Number.isFinite).sort((x, y) => x - y); const m = a.length >> 1; return a.length % 2 ? a[m] : (a[m - 1] + a[m]) / 2 }
const f = x => Number.isFinite(x) ? x.toFixed(2) : '—'
const ppm = xs => `${f(med(xs))} / ${f(q(xs, 0.99))} / ${f(Math.max(...xs))}`

const cli = (box, args) => H.startCli(box, args, ENV)

/** `count` small cold session logs in `home` (as bench/peers.mjs's scale home), titled `remote-listed <i>`. */
function generate(home, count) {
  for (let i = 0; i < count; i++) {
    const cwd = `/w/proj-${i % 40}`
    const id = `session-${String(i).padStart(8, '0')}-0000-4000-8000-${String(i).padStart(12, '0')}`
    const dir = join(home, 'sessions', projectKey(cwd), id)
    mkdirSync(dir, { recursive: true })
    const lines = [
      { type: 'session', version: 0, id, createdAt: 1_700_000_000_000 + i * 1000, cwd, agentPreset: 'standard' },
      { type: 'turn/start', seq: 0, time: 1, data: { turn: 1 } },
      { type: 'session/title', seq: 1, time: 2, data: { title: `remote-listed ${i}`, source: { kind: 'model' } } },
      { type: 'turn/end', seq: 2, time: 3, data: { turn: 1 } },
    ]
    // rc.8 boots only over logs whose first zstd frame is the header line alone
    const frame = ls => zlib.zstdCompressSync(Buffer.from(ls.map(l => JSON.stringify(l)).join('\n') + '\n'))
    writeFileSync(join(dir, 'session.jsonl.zstd'), Buffer.concat([frame(lines.slice(0, 1)), frame(lines.slice(1))]))
    const at = lines[0].createdAt / 1000
    utimesSync(join(dir, 'session.jsonl.zstd'), at, at)
    utimesSync(dir, at, at)
  }
}

const webPid = home => [...H.presenceRecords(home).values()].find(r => r.profile === 'web')?.pid
const cpuTicks = pid => { const s = readFileSync(`/proc/${pid}/stat`, 'utf8'); const v = s.slice(s.lastIndexOf(')') + 2).split(' '); return Number(v[11]) + Number(v[12]) }
const rssMB = pid => Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024
async function idle(pid, ms = 10_000) {
  if (!wants('idle')) return { corePct: NaN, rss: NaN }
  const c0 = cpuTicks(pid); const t0 = performance.now()
  await sleep(ms)
  return { corePct: ((cpuTicks(pid) - c0) / 100) / ((performance.now() - t0) / 1000) * 100, rss: rssMB(pid) }
}

const boxA = await H.makeSandbox({ env: ENV })
const boxB = await H.makeSandbox({ env: ENV })
const rows = []
const ONLY_DONE = Symbol('the --only rows are done')
const row = (name, value, base, diff, target, ok) => rows.push({ name, value, base, diff, target, ok })
try {
  const jobA = jobs(boxA); const jobB = jobs(boxB)
  for (const box of [boxA, boxB]) {
    const pdir = H.initProfile(box, 'web')
    H.packAndInstall(pdir, REPO, { mode: 'manual' })
    // 2N+ sends to one target: no budget, stacking or relay limit on either side (the receiving home runs its own)
    writeFileSync(join(pdir, 'cordis.patch.yml'), `- id: dsh-session-mail\n  config: ${JSON.stringify(UNLIMITED)}\n`)
    addPeersPlugin(pdir)
    // a baseline build: the same package with another addon
    if (ADDON) cpSync(ADDON, join(pdir, 'node_modules', 'dsh-session-mail', 'dsh-session-mail.linux-x64-gnu.node'))
  }
  if (wants('list')) {
    log(`writing ${SESSIONS} cold sessions on home B`)
    generate(boxB.home, SESSIONS)
  }
  // the big log, copied from its cached corpus into B's sessions
  const corpus = wants('read100') ? ensureCorpus(argv.includes('--quick') ? TITLE_ONCE_QUICK : TITLE_ONCE, { log }) : null
  const bigLog = corpus?.big.title1
  if (corpus) cpSync(join(corpus.home, dirname(bigLog.file)), join(boxB.home, dirname(bigLog.file)), { recursive: true })
  const [webA, webB] = await Promise.all([H.bootWeb(boxA), H.bootWeb(boxB)])
  const A = await webA.createSession(boxA.ws)
  const A2 = await webA.createSession(boxA.mkdir('ws-a2'))
  const B = await webB.createSession(boxB.ws)
  const B2 = await webB.createSession(boxB.mkdir('ws-b2'))
  for (const [web, id] of [[webA, A], [webA, A2], [webB, B], [webB, B2]]) { await web.prompt(id, 'hello'); await web.waitFor(id, ev => H.turnEndCount(ev) >= 1 && H.isIdle(ev)) }
  await sleep(1500)
  const pidA = webPid(boxA.home)
  log(`host pids: A ${pidA}, B ${webPid(boxB.home)}`)
  const load0 = loadavg()

  // the stall probe on A's web server
  const probes = []
  let probing = true
  const probe = (async () => {
    while (probing) {
      const t = performance.now()
      try { await fetch(`${webA.base}/api/host.describe`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ type: 'client-request', rpcId: `p${t}`, method: 'host.describe', payload: {} }) }).then(r => r.arrayBuffer()) } catch {}
      probes.push([t, performance.now() - t])
      const wait = 20 - (performance.now() - t)
      if (wait > 0) await sleep(wait)
    }
  })()
  const worst = (t0, t1) => Math.max(0, ...probes.filter(([t, ms]) => t + ms >= t0 && t <= t1).map(([, ms]) => ms))

  // before the link: A idle (CPU, RSS, stall) and B's local list
  let t0 = performance.now()
  const idleBefore = await idle(pidA)
  const stallIdle = worst(t0, performance.now())
  const listArgs = { query: 'remote-listed', scope: 'all', limit: 200 }
  const tool = (job, caller, name, args) => job({ op: 'tool', tool: name, args, caller, config: UNLIMITED })
  const listLocalPre = []
  let listText
  for (let i = -1; i < (wants('list') ? N : -1); i++) {
    await sleep(PAUSE)
    const r = await tool(jobB, B, 'sessions_list', listArgs)
    if (i >= 0) listLocalPre.push(r.ms)
    listText = r.text
  }
  if (listText) log(`B's local list: ${listText.split('\n').at(-2)}`)

  // the link, through the command line
  const inviting = cli(boxA, ['link', '--relay', 'none', '--json', '--ttl-minutes', '5'])
  let made
  for (const t = Date.now(); made === undefined; await sleep(50)) {
    try { made = JSON.parse(inviting.out()) } catch { if (Date.now() - t > 30_000) throw new Error('no invite') }
  }
  const joined = await cli(boxB, ['link', made.invite, '--name', 'home-a', '--json']).done
  if (joined.code !== 0) throw new Error(`link: ${joined.stdout}${joined.stderr}`)
  await inviting.done
  const asA = JSON.parse((await cli(boxA, ['links', '--no-probe', '--json']).done).stdout)
  await cli(boxA, ['machines', 'rename', asA.links[0].name, 'home-b']).done
  await Promise.all([H.leaseHeldByHost(boxA.home), H.leaseHeldByHost(boxB.home)])
  await sleep(3000)

  const out = () => {
    const load1 = loadavg()
    console.log(`\nbench:machines — direct link on loopback (relay none), N=${N} per row, pause ${PAUSE} ms${ADDON ? `, addon ${ADDON}` : ''}; load ${load0.map(x => x.toFixed(1)).join(' ')} → ${load1.map(x => x.toFixed(1)).join(' ')}`)
    console.log('p50 / p99 / max in ms\n')
    for (const r of rows) console.log(`${r.ok ? 'ok  ' : 'MISS'} ${r.name}: ${r.value}\n       baseline: ${r.base}\n       difference: ${r.diff}   target ${r.target}`)
  }
  // one round trip: the holder's probe over the link (links)
  const rtt = []
  for (let i = 0; i < RTT_N; i++) {
    const r = JSON.parse((await cli(boxA, ['links', '--json']).done).stdout)
    const l = r.links.find(x => x.name === 'home-b')
    if (l?.online) rtt.push(l.rttMs)
  }
  const RTT = med(rtt)
  row('round trip (links probe)', ppm(rtt), '—', '—', '—', true)

  // the idle endpoint, linked, before the rows' calls (their heap is not the endpoint's)
  t0 = performance.now()
  const idleAfter = await idle(pidA)
  const stallIdleLinked = worst(t0, performance.now())
  const dCpu = idleAfter.corePct - idleBefore.corePct
  const dRss = idleAfter.rss - idleBefore.rss
  // send, both ways: each remote send against a local send into the same session (its host's own costs cancel)
  const rAB = []; const lB = []; const rBA = []; const lA = []
  const kinds = [['remote A → B', jobA, A, B, rAB], ['local B2 → B', jobB, B2, B, lB], ['remote B → A', jobB, B, A, rBA], ['local A2 → A', jobA, A2, A, lA]]
  t0 = performance.now()
  for (let i = -1; i < (wants('send') ? N : -1); i++) {
    for (let k = 0; k < kinds.length; k++) {
      const [kind, job, caller, target, xs] = kinds[(k + Math.max(0, i)) % kinds.length]
      await sleep(PAUSE)
      const r = await tool(job, caller, 'sessions_send', { session_id: target, message: `bench ${kind} ${i}` })
      if (!r.text.startsWith('accepted')) throw new Error(`${kind} send: ${r.text.slice(0, 300)}`)
      if (i >= 0) xs.push(r.ms)
    }
  }
  const stallSend = worst(t0, performance.now())
  for (const [kind, , , , xs] of kinds) log(`send ms in order, ${kind}: ${xs.map(x => x.toFixed(1)).join(' ')}`)
  const dAB = med(rAB) - med(lB); const dBA = med(rBA) - med(lA)
  const dSend = (dAB + dBA) / 2
  const sign = x => `${x >= 0 ? '+' : ''}${f(x)}`
  if (wants('send')) row('sessions_send remote, both ways (A → B, B → A)', `A → B ${ppm(rAB)} · B → A ${ppm(rBA)}`, `local into the same session: B2 → B ${ppm(lB)} · A2 → A ${ppm(lA)}`, `${sign(dSend)} ms, the mean of A → B ${sign(dAB)} and B → A ${sign(dBA)} (RTT ${f(RTT)})`, '≤ local + RTT + 2 ms', dSend <= RTT + 2)

  if (ONLY && !['list', 'read', 'read100', 'idle'].some(wants)) {
    probing = false
    await probe
    out()
    throw ONLY_DONE
  }
  // list: remote from A vs local in B (after the link: B's list also asks A)
  const listRemote = []; const listLocalPost = []
  t0 = performance.now()
  let remoteText = ''
  for (let i = -1; i < (wants('list') ? N : -1); i++) {
    await sleep(PAUSE)
    const r = await tool(jobA, A, 'sessions_list', listArgs)
    if (i >= 0) listRemote.push(r.ms)
    remoteText = r.text
    await sleep(PAUSE)
    const l = await tool(jobB, B, 'sessions_list', listArgs)
    if (i >= 0) listLocalPost.push(l.ms)
  }
  const stallList = worst(t0, performance.now())
  if (wants('list')) log(`A's remote list: ${remoteText.split('\n').at(-2)}`)
  const dList = med(listRemote) - med(listLocalPre)
  if (wants('list')) row(`sessions_list remote (${SESSIONS} cold sessions on B)`, ppm(listRemote), `local in B before the link ${ppm(listLocalPre)}; after (asks A too) ${ppm(listLocalPost)}`, `+${f(dList)} ms`, '≤ local + RTT + 10 ms', dList <= RTT + 10)

  // read: B's session (it has taken 2N+ messages) from A vs in B
  const readRemote = []; const readLocal = []
  t0 = performance.now()
  let readText = ''
  for (let i = -1; i < (wants('read') ? N : -1); i++) {
    await sleep(PAUSE)
    const r = await tool(jobA, A, 'sessions_read', { session_id: B, max_messages: 50 })
    if (i >= 0) readRemote.push(r.ms)
    readText = r.text
    await sleep(PAUSE)
    const l = await tool(jobB, B, 'sessions_read', { session_id: B, max_messages: 50 })
    if (i >= 0) readLocal.push(l.ms)
  }
  let stallRead = worst(t0, performance.now())
  if (wants('read')) log(`A's remote read: ${readText.length} characters, first line ${readText.split('\n')[0].slice(0, 120)}`)
  const dRead = med(readRemote) - med(readLocal)
  if (wants('read')) row('sessions_read remote (B\'s session, 50 messages)', ppm(readRemote), `local in B ${ppm(readLocal)}`, `+${f(dRead)} ms`, '≤ local + RTT + transfer', true)

  // the window read of the big log: remote from A vs in B, alternating (the first of each warms its fold)
  if (wants('read100')) log('read100 rows start')
  const bigRemote = []; const bigLocal = []
  t0 = performance.now()
  let bigText = ''
  for (let i = -1; i < (wants('read100') ? N : -1); i++) {
    const order = i % 2 ? [[jobB, B, bigLocal], [jobA, A, bigRemote]] : [[jobA, A, bigRemote], [jobB, B, bigLocal]]
    for (const [job, caller, xs] of order) {
      await sleep(PAUSE)
      const r = await tool(job, caller, 'sessions_read', { session_id: bigLog.id })
      if (i >= 0) xs.push(r.ms)
      if (xs === bigRemote) bigText = r.text
    }
  }
  stallRead = Math.max(stallRead, worst(t0, performance.now()))
  const bigBytes = Buffer.byteLength(bigText)
  if (wants('read100')) log(`A's remote read of the ${(bigLog.plainBytes / 2 ** 20).toFixed(0)} MiB log: ${bigBytes} bytes, first line ${bigText.split('\n')[0].slice(0, 120)}`)
  const dBig = med(bigRemote) - med(bigLocal)
  if (wants('read100')) row(`sessions_read remote (a ${(bigLog.plainBytes / 2 ** 20).toFixed(0)} MiB log on B, default window)`, ppm(bigRemote), `local in B ${ppm(bigLocal)}`, `+${f(dBig)} ms (RTT ${f(RTT)}; answer ${bigBytes} bytes)`, '≤ local + RTT + transfer (2 ms on loopback)', dBig <= RTT + 2)

  const rssEnd = rssMB(pidA)
  if (wants('idle')) row('idle host A, CPU (% of a core, 10 s)', `linked ${f(idleAfter.corePct)} %`, `before the link ${f(idleBefore.corePct)} %`, `${dCpu >= 0 ? '+' : ''}${f(dCpu)} %`, '< 1 %', dCpu < 1)
  if (wants('idle')) row('idle host A, RSS', `linked ${f(idleAfter.rss)} MB`, `before the link ${f(idleBefore.rss)} MB (after the rows: ${f(rssEnd)} MB)`, `${dRss >= 0 ? '+' : ''}${f(dRss)} MB`, '≤ 30 MB', dRss <= 30)
  const stallMax = Math.max(stallSend, stallList, stallRead, stallIdleLinked)
  row('host A event-loop stall (worst probe answer)', `send ${f(stallSend)} · list ${f(stallList)} · read ${f(stallRead)} · idle linked ${f(stallIdleLinked)} ms`, `idle before the link ${f(stallIdle)} ms`, '—', '≤ 50 ms', stallMax <= 50)
  probing = false
  await probe

  out()
} catch (e) {
  if (e !== ONLY_DONE) throw e
} finally {
  await boxA.cleanup()
  await boxB.cleanup()
}
