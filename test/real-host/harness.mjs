// Real-host end-to-end harness: drives the npm-installed DSH host (0.1.0-rc.8) with a scripted fake LLM.
// Needs Node >= 22.15 (the session log is multi-frame zstd). See test/real-host.test.mjs for usage.
//
//   installHost()                          -> host { dir, node, dsh, binDir, path }
//   makeSandbox({ t?, host?, keep? })       -> box  { dir, home, ws, env, llm, host, profileDir(p), cleanup() }
//   packAndInstall(profileDir, pkgDir, { mode: 'manual'|'pnpm'|'script', script?, env?, host?, verify? })
//   bootWeb(box, { profile?, args?, readyTimeoutMs?, cwd?, env? }) -> web { base, rpc, rpcRaw, createSession, prompt,  (one boot at a time per box)
//                                                          history, waitFor, stop, stderr, stdout, child, readyMs }
//   createSession(web, cwd) / prompt(web, id, text, mode) / waitFor(web, id, predicate, opts)  (also methods)
//   callTool(web, id, tool, args, opts) -> { text, isError, call, result, events, reply, ms }
//   initProfile(box, profile), installPlugin(box, profile?) (a fresh profile with this plugin installed, mode manual)
//   readSessionLog(file), findSessionLog(home, id), waitForLog(home, id, predicate, opts)
//   setRowDisabled(profileDir, rowId, disabled), dumpConfig(box, profile)
//   event helpers: userTexts, assistantTexts, turnEnd, turnEndCount, isIdle, turnOfSeq, messageText; printMetrics
//   test helpers every real-host suite shares: sleep, until(what, fn, opts), boxCli(box, ...args) (the CLI on the
//   box's home), esc (a RegExp-safe string), requestIdIn / requestIdOf (the
//   `request:` line of a send result; Of asserts it is there), landedCount (deliveries of one rpcId in a log),
//   presenceRecords(home), hasLog(home, id), runHeadless(box, task), headlessOwner(home, {notPid, maxAgeMs}),
//   idleSession(web, cwd, text), webAndHeadless(box), webWithSlowTool(box, m), assertOneHistory(home, id),
//   clientRoute(web, endpoint, payload) (a route of the web client half, as the page calls it)
//
// Importing this module checks the Node it runs on (>= 22.15: the host's, $DSH_NODE) before anything runs.
import assert from 'node:assert/strict'
import { spawn, spawnSync, execFileSync } from 'node:child_process'
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as zlib from 'node:zlib'

export const HERE = dirname(fileURLToPath(import.meta.url))
export const REPO_ROOT = resolve(HERE, '..', '..')
export const FIXTURES = join(REPO_ROOT, 'test', 'fixtures')
export const DSH_VERSION = '0.1.0-rc.8'

/** Bundles of the shipped rc.8 profile templates (`profile.ts` initProfile). */
export const PROFILE_TEMPLATES = {
  web: ['@deepseek-ai/dsh-base', '@deepseek-ai/dsh-web-app'],
  headless: ['@deepseek-ai/dsh-base', '@deepseek-ai/dsh-headless'],
}

const [major, minor] = process.versions.node.split('.').map(Number)
if (major < 22 || (major === 22 && minor < 15)) {
  throw new Error(`run this under Node >= 22.15 (the host's Node 22: $DSH_NODE); this is ${process.version}`)
}

export const sleep = ms => new Promise(r => setTimeout(r, ms))
/** `s` as a RegExp source that matches it literally. */
export const esc = s => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** The request id a send result names (its `request: dsh-session-mail:…` line), or undefined. */
export function requestIdIn(text) {
  return /^request: (dsh-session-mail:\S+)$/m.exec(text)?.[1]
}

/** The request id a send result names; asserts there is one. */
export function requestIdOf(text) {
  const id = requestIdIn(text)
  assert.ok(id, `a request id in:\n${text}`)
  return id
}

/** How many user messages of the log carry `rpcId` (each delivery lands as exactly one). */
export function landedCount(events, rpcId) {
  return userTexts(events).filter(u => u.source?.rpcId === rpcId).length
}

/** Poll `fn` (sync or async) until it is truthy; resolves to its value, throws naming `what` after `timeout`. */
export async function until(what, fn, { timeout = 20_000, interval = 100 } = {}) {
  const t0 = Date.now()
  for (;;) {
    const v = await fn()
    if (v) return v
    if (Date.now() - t0 > timeout) throw new Error(`timed out after ${timeout} ms waiting for ${what}`)
    await sleep(interval)
  }
}

/** Run this package's CLI (`bin/dsh-session-mail.mjs … --home <box.home>`) with the host's node: `{code, out}`. */
export function boxCli(box, ...args) {
  try {
    return { code: 0, out: execFileSync(box.host.node, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), ...args, '--home', box.home], { encoding: 'utf8', env: box.env }) }
  } catch (e) {
    return { code: e.status, out: String(e.stdout ?? '') + String(e.stderr ?? '') }
  }
}

/**
 * Start this package's CLI (`bin/dsh-session-mail.mjs … --home <box.home>`) without waiting, with `env` on top of
 * the box's: `{ done: Promise<{code, stdout, stderr}>, out() }` (out: the stdout so far; `link` prints its invite
 * and then waits until it is used).
 */
export function startCli(box, args, env = {}) {
  const child = spawn(process.execPath, [join(REPO_ROOT, 'bin', 'dsh-session-mail.mjs'), ...args, '--home', box.home], { env: { ...box.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (d) => { stdout += d })
  child.stderr.on('data', (d) => { stderr += d })
  const done = new Promise((resolve) => child.on('close', code => resolve({ code, stdout, stderr })))
  return { done, out: () => stdout }
}

/**
 * A route of the web client half on `web` (lib/client-host.js), called as the page calls it (a Connection RPC POST
 * to /dsh-session-mail/<endpoint>): its `value`; asserts the answer is ok.
 */
export async function clientRoute(web, endpoint, payload = {}) {
  const res = await fetch(`${web.base}/dsh-session-mail/${endpoint}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: web.base },
    body: JSON.stringify({ type: 'client-request', rpcId: `e2e-${Date.now()}`, method: endpoint, payload }),
  })
  assert.equal(res.status, 200)
  const r = (await res.json()).result
  assert.equal(r.ok, true, `${endpoint}: ${JSON.stringify(r)}`)
  return r.value
}

/** The machine lease record of `home` (docs/machines.md) once a live process other than the command line holds it. */
export async function leaseHeldByHost(home, timeout = 20_000) {
  for (const t0 = Date.now(); ; await sleep(100)) {
    try {
      const r = JSON.parse(readFileSync(join(home, 'dsh-session-mail', 'machine', 'lease.json'), 'utf8'))
      const cmd = readFileSync(`/proc/${r.pid}/cmdline`, 'utf8')
      if (Date.now() - r.renewedAt < 5000 && !cmd.includes('dsh-session-mail.mjs')) return r
    } catch { /* not yet */ }
    if (Date.now() - t0 > timeout) throw new Error(`${home}: no dsh process holds the machine lease`)
  }
}

/** The plugin's presence records in `home`: pid -> record (a record being replaced is skipped). */
export function presenceRecords(home) {
  const dir = join(home, 'dsh-session-mail', 'presence')
  const out = new Map()
  let names = []
  try { names = readdirSync(dir) } catch { return out }
  for (const n of names) {
    if (!/^\d+\.json$/.test(n)) continue
    try { const r = JSON.parse(readFileSync(join(dir, n), 'utf8')); out.set(r.pid, r) } catch {}
  }
  return out
}

/** The session's log is on disk and not empty (its header written: a sender reads it to rule out a subagent). */
export function hasLog(home, id) {
  try { return statSync(findSessionLog(home, id)).size > 0 } catch { return false }
}

/** A one-shot `dsh --profile headless "<task>"` in the sandbox; `done` resolves to {code, stdout, stderr}. */
export function runHeadless(box, task) {
  const child = spawn(box.host.dsh, ['--profile', 'headless', task], { cwd: box.ws, env: box.env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', d => { stdout += d })
  child.stderr.on('data', d => { stderr += d })
  const done = new Promise(r => child.on('exit', code => r({ code, stdout, stderr })))
  return { child, done }
}

/**
 * The fresh presence record of a headless process (profile headless, not `notPid`) with one live session whose
 * log is written; waits up to `timeout`. Fresh: at most `maxAgeMs` (300 ms) old, because tests freeze the owner
 * right after, and a sender drops a record not refreshed for 5 s: the sender's whole turn (a fake-LLM round trip)
 * must fit in what is left, also under load. Written: presence lists a new session at once, up to 200 ms before
 * rc.8's write-behind writes its log, and an owner frozen in between never writes it (a sender then finds no
 * such session).
 */
export async function headlessOwner(home, { notPid = null, timeout = 20_000, maxAgeMs = 300 } = {}) {
  const t0 = Date.now()
  for (;;) {
    for (const r of presenceRecords(home).values()) {
      if (r.profile === 'headless' && r.pid !== notPid && r.sessions?.length === 1 && Date.now() - r.updatedAt < maxAgeMs && hasLog(home, r.sessions[0].id)) return r
    }
    if (Date.now() - t0 > timeout) throw new Error('no headless presence record')
    await sleep(50)
  }
}

// Children this process started (fake LLMs, hosts): killed if the test process exits without cleanup.
const children = new Set()
function track(child) {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}
function killChildren() {
  for (const c of children) { try { c.kill('SIGKILL') } catch { /* gone */ } }
}
process.once('exit', killChildren)
for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => { killChildren(); process.exit(128 + (sig === 'SIGINT' ? 2 : 15)) })

// ---------------------------------------------------------------------------------------------- host

let cachedHost

/**
 * The installed host. Uses DSH_BIN + DSH_NODE from the environment when both exist (the
 * `eval "$(bash test/real-host/install-host.sh)"` path); otherwise runs install-host.sh (idempotent)
 * into `dir` (default $DSH_HOST_DIR or <repo>/.cache/dsh-host).
 * @param {{ dir?: string }} [options]
 * @returns {{ dir: string, node: string, dsh: string, binDir: string[], path: string, installMs: number }}
 */
export function installHost({ dir } = {}) {
  if (cachedHost !== undefined && dir === undefined) return cachedHost
  const t0 = Date.now()
  let dsh = process.env.DSH_BIN
  let node = process.env.DSH_NODE
  let hostDir = process.env.DSH_HOST_DIR
  if (dir !== undefined || !dsh || !node || !existsSync(dsh) || !existsSync(node)) {
    const res = spawnSync('bash', [join(HERE, 'install-host.sh'), ...(dir ? [dir] : [])], {
      encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 24,
    })
    if (res.status !== 0) throw new Error(`install-host.sh failed (exit ${res.status})`)
    const last = res.stdout.trim().split('\n').pop()
    const get = k => new RegExp(`${k}="([^"]*)"`).exec(last)?.[1]
    dsh = get('DSH_BIN'); node = get('DSH_NODE'); hostDir = get('DSH_HOST_DIR')
    if (!dsh || !node) throw new Error(`install-host.sh printed no export line: ${last}`)
  }
  const binDir = [dirname(node)]
  const pnpmDir = hostDir ? join(hostDir, 'tools', 'node_modules', '.bin') : undefined
  if (pnpmDir && existsSync(pnpmDir)) binDir.push(pnpmDir)
  const host = {
    dir: hostDir ?? dirname(dirname(dirname(dirname(dsh)))),
    node, dsh, binDir,
    path: [...binDir, process.env.PATH ?? ''].join(':'),
    installMs: Date.now() - t0,
  }
  if (dir === undefined) cachedHost = host
  return host
}

// ---------------------------------------------------------------------------------------------- fake LLM

/** Start fake-llm.mjs as a child process (so a blocking test step never stalls a model reply). */
async function startFakeLlmProcess(node, log) {
  const child = track(spawn(node, [join(HERE, 'fake-llm.mjs')], {
    env: { ...process.env, FAKE_PORT: '0', FAKE_LOG: log },
    stdio: ['ignore', 'pipe', 'inherit'],
  }))
  let buf = ''
  for await (const chunk of child.stdout) {
    buf += chunk
    if (buf.includes('\n')) break
  }
  const line = buf.split('\n')[0]
  if (!line.startsWith('{')) throw new Error(`fake LLM did not start: ${buf}`)
  const { baseURL } = JSON.parse(line)
  const requests = () => (existsSync(log) ? readFileSync(log, 'utf8').split('\n').filter(Boolean).map(l => JSON.parse(l)) : [])
  return {
    baseURL,
    log,
    child,
    /** Every request so far (parsed JSONL): { n, at, sessionId, tools[], messages[{role,content,tool_calls?,tool_call_id?}], decision }. */
    requests,
    /** Requests whose x-deepseek-harness-session-id header is `sessionId`. */
    requestsFor: sessionId => requests().filter(r => r.sessionId === sessionId),
    stop: () => { if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM') },
  }
}

// ---------------------------------------------------------------------------------------------- sandbox

/**
 * A fresh sandbox: temp dir with home/ (DSH_HOME), ws/ (a workspace), agents/, a fake LLM, and the env
 * every dsh call gets. With `t` (a node:test context) cleanup runs in t.after. KEEP_TMP=1 keeps the dir.
 * @param {{ t?: import('node:test').TestContext, host?: ReturnType<typeof installHost>, keep?: boolean, env?: object }} [options]
 */
export async function makeSandbox({ t, host = installHost(), keep = process.env.KEEP_TMP === '1', env = {} } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-e2e-'))
  const home = join(dir, 'home')
  const ws = join(dir, 'ws')
  for (const d of [home, ws, join(dir, 'agents'), join(dir, 'tmp')]) mkdirSync(d, { recursive: true })
  const llm = await startFakeLlmProcess(host.node, join(dir, 'fake-llm.jsonl'))
  const box = {
    dir, home, ws, host, llm,
    env: {
      ...process.env,
      PATH: host.path,
      DSH_HOME: home,
      DSH_AGENTS_HOME: join(dir, 'agents'),
      DEEPSEEK_BASE_URL: llm.baseURL,
      DEEPSEEK_API_KEY: 'fake-key',
      DSH_TELEMETRY_DISABLED: '1',
      // the plugin's read checkpoints (crates/core/src/store/checkpoint.rs) stay in the sandbox
      DSH_SESSION_MAIL_CACHE_DIR: join(dir, 'cache'),
      // no test may send a packet to a public relay: the core refuses that choice in the sandbox's processes
      DSH_SESSION_MAIL_NO_PUBLIC_NETWORK: '1',
      // the host's spill folder (rc.8 packages/spill/spill-local/src/store.ts: mkdtemp in os.tmpdir(), never
      // removed) and any other temp file of the sandbox's processes go with the sandbox
      TMPDIR: join(dir, 'tmp'),
      ...env,
    },
    webs: [],
    /** `$DSH_HOME/profiles/<name>` */
    profileDir: (name = 'web') => join(home, 'profiles', name),
    /** Make another workspace dir under the sandbox. */
    mkdir: (name) => { const p = join(dir, name); mkdirSync(p, { recursive: true }); return p },
    async cleanup() {
      await Promise.all(box.webs.map(w => w.stop().catch(() => {})))
      llm.stop()
      if (keep) console.log(`# kept sandbox ${dir}`)
      else rmSync(dir, { recursive: true, force: true })
    },
  }
  if (t) t.after(() => box.cleanup())
  return box
}

// ---------------------------------------------------------------------------------------------- plugin install

function readJson(file) { return JSON.parse(readFileSync(file, 'utf8')) }

/** `npm pack` a package dir into `dest`; returns the tarball path. */
export function packPlugin(pkgDir, dest) {
  mkdirSync(dest, { recursive: true })
  const out = execFileSync('npm', ['pack', '--silent', '--pack-destination', dest], {
    cwd: pkgDir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'],
  })
  return join(dest, out.trim().split('\n').pop())
}

/**
 * Install a bundle plugin into a profile.
 *  - 'manual': npm pack, untar into <profileDir>/node_modules/<name>, add it to the profile package.json
 *    (dependency `file:<tgz>` + dsh.profile.bundles, creating the profile from its template if needed).
 *    The plugin's own npm dependencies are NOT installed in this mode.
 *  - 'pnpm':   npm pack, then `dsh plugin --profile <name> add <tgz>` (what a user does; never `link:`).
 *  - 'script': run an installer command. `script` is an argv array (or a function of the context returning
 *    one); the strings {profileDir} {profile} {dshHome} {pkgDir} {tgz} are substituted ({tgz} packs first).
 *    Default: [DSH_NODE, <pkgDir>/scripts/install.mjs, '--profile', <profileDir>], cwd <pkgDir>.
 *    The command gets env DSH_HOME, DSH_BIN, DSH_NODE, DSH_PROFILE_DIR and PATH with Node 22 + pnpm first.
 * Afterwards (unless verify: false) the package must be listed in dsh.profile.bundles.
 * @returns {{ name: string, version: string, tgz?: string, ms: number, mode: string, stdout?: string }}
 */
export function packAndInstall(profileDir, pkgDir, { mode = 'manual', script, env = {}, host = installHost(), verify = true, packDir } = {}) {
  const t0 = Date.now()
  profileDir = resolve(profileDir); pkgDir = resolve(pkgDir)
  const profile = basename(profileDir)
  const dshHome = dirname(dirname(profileDir))
  const manifest = readJson(join(pkgDir, 'package.json'))
  const dest = packDir ?? join(dshHome, '.test-packs')
  const runEnv = {
    ...process.env, ...env,
    PATH: host.path, DSH_HOME: dshHome, DSH_BIN: host.dsh, DSH_NODE: host.node, DSH_PROFILE_DIR: profileDir,
  }
  let tgz
  let stdout
  if (mode === 'manual') {
    tgz = packPlugin(pkgDir, dest)
    const target = join(profileDir, 'node_modules', manifest.name)
    rmSync(target, { recursive: true, force: true })
    mkdirSync(target, { recursive: true })
    execFileSync('tar', ['xzf', tgz, '-C', target, '--strip-components=1'])
    const pj = join(profileDir, 'package.json')
    const prof = existsSync(pj)
      ? readJson(pj)
      : { name: `dsh-profile-${profile}`, private: true, dependencies: {}, dsh: { profile: { bundles: [...(PROFILE_TEMPLATES[profile] ?? ['@deepseek-ai/dsh-base'])] } } }
    prof.dependencies = { ...prof.dependencies, [manifest.name]: `file:${tgz}` }
    prof.dsh ??= {}; prof.dsh.profile ??= {}; prof.dsh.profile.bundles ??= []
    if (manifest.dsh?.bundle?.patch !== undefined && !prof.dsh.profile.bundles.includes(manifest.name)) prof.dsh.profile.bundles.push(manifest.name)
    writeFileSync(pj, JSON.stringify(prof, null, 2) + '\n')
    if (!existsSync(join(profileDir, 'cordis.patch.yml'))) writeFileSync(join(profileDir, 'cordis.patch.yml'), '[]\n')
  } else if (mode === 'pnpm') {
    tgz = packPlugin(pkgDir, dest)
    stdout = execFileSync(host.dsh, ['plugin', '--profile', profile, 'add', tgz], {
      cwd: dshHome, env: runEnv, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'],
    })
  } else if (mode === 'script') {
    const ctx = { profileDir, profile, dshHome, pkgDir, host }
    let argv = typeof script === 'function' ? script(ctx) : script
    argv ??= [host.node, join(pkgDir, 'scripts', 'install.mjs'), '--profile', '{profileDir}']
    if (argv.some(a => String(a).includes('{tgz}'))) tgz = packPlugin(pkgDir, dest)
    const vars = { profileDir, profile, dshHome, pkgDir, tgz: tgz ?? '' }
    argv = argv.map(a => String(a).replace(/\{(profileDir|profile|dshHome|pkgDir|tgz)\}/g, (_, k) => vars[k]))
    const res = spawnSync(argv[0], argv.slice(1), { cwd: pkgDir, env: runEnv, encoding: 'utf8' })
    stdout = res.stdout
    if (res.status !== 0) {
      throw new Error(`installer ${argv.join(' ')} exited ${res.status ?? res.signal}\n${res.stdout}\n${res.stderr}`)
    }
  } else {
    throw new Error(`packAndInstall: unknown mode ${mode}`)
  }
  if (verify) {
    const pj = join(profileDir, 'package.json')
    const prof = existsSync(pj) ? readJson(pj) : { dsh: '(no profile package.json)' }
    if (!prof.dsh?.profile?.bundles?.includes(manifest.name)) {
      throw new Error(`${manifest.name} is not in dsh.profile.bundles of ${profileDir}: ${JSON.stringify(prof.dsh)}`)
    }
  }
  return { name: manifest.name, version: manifest.version, tgz, ms: Date.now() - t0, mode, stdout }
}

/**
 * Create `$DSH_HOME/profiles/<profile>` from the host's own template, the way `dsh plugin --profile <p> …`
 * does (it runs `pnpm --version` there). No-op when the profile exists. Returns the profile dir.
 */
export function initProfile(box, profile = 'web') {
  const dir = box.profileDir(profile)
  if (!existsSync(join(dir, 'package.json'))) {
    execFileSync(box.host.dsh, ['plugin', '--profile', profile, '--version'], { cwd: box.dir, env: box.env, stdio: 'ignore' })
  }
  return dir
}

/** `dsh --profile <profile> --dump-config` in the sandbox: the composed profile tree (YAML text). */
export function dumpConfig(box, profile = 'web') {
  return execFileSync(box.host.dsh, ['--profile', profile, '--dump-config'], {
    cwd: box.ws, env: box.env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 1 << 26,
  })
}

// ---------------------------------------------------------------------------------------------- profile patch

/**
 * Switch one row on/off through the profile's user patch layer (`<profileDir>/cordis.patch.yml`), the
 * live switch rc.8 watches: `- id: <row>` / `  disabled: true`. Other rows this helper disabled stay
 * disabled; with none left the file is `[]`. Comments (the template's header) are dropped; any other entry
 * makes it throw. Written atomically (tmp + rename). Returns the new text.
 */
export function setRowDisabled(profileDir, rowId, disabled) {
  if (!/^[A-Za-z0-9_.:@/-]+$/.test(rowId)) throw new Error(`setRowDisabled: unsupported row id ${JSON.stringify(rowId)}`)
  const file = join(profileDir, 'cordis.patch.yml')
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '[]\n'
  const rows = new Set([...current.matchAll(/^- id: (\S+)\n\s+disabled: true\s*$/gm)].map(m => m[1]))
  const rest = current.replace(/^- id: (\S+)\n\s+disabled: true\s*$\n?/gm, '').replace(/^\s*#.*$/gm, '').trim()
  if (rest !== '' && rest !== '[]') throw new Error(`setRowDisabled: ${file} holds entries this helper does not manage:\n${rest}`)
  if (disabled) rows.add(rowId); else rows.delete(rowId)
  const text = rows.size === 0 ? '[]\n' : [...rows].map(id => `- id: ${id}\n  disabled: true\n`).join('')
  mkdirSync(profileDir, { recursive: true })
  const tmp = `${file}.tmp-${process.pid}`
  writeFileSync(tmp, text)
  renameSync(tmp, file)
  return text
}

// ---------------------------------------------------------------------------------------------- web host

/**
 * Boot `dsh --profile <profile> --no-open --port 0` in box.ws; resolves when the URL line appears.
 * @param {Awaited<ReturnType<typeof makeSandbox>>} box
 * @param {{ profile?: string, args?: string[], readyTimeoutMs?: number, cwd?: string }} [options]
 */
export function bootWeb(box, opts = {}) {
  // One boot at a time per sandbox: rc.8 rewrites the profile's root config at every boot
  // (apps/cli/src/profile-boot.ts `prepareProfile` → `writeFileSync(<profile>/cordis.yml)`, not atomic) and heals
  // the shared module fallback, so two `dsh web` booting at once on one home can read each other's half-written
  // file. A suite that boots two processes with Promise.all gets them one after the other, the second spawned once
  // the first is ready (or failed).
  const before = box.booting ?? Promise.resolve()
  const boot = before.catch(() => {}).then(() => bootWebNow(box, opts))
  box.booting = boot.catch(() => {})
  return boot
}

async function bootWebNow(box, { profile = 'web', args = [], readyTimeoutMs = 60_000, cwd = box.ws, env = {} } = {}) {
  const t0 = Date.now()
  const child = track(spawn(box.host.dsh, ['--profile', profile, '--no-open', '--port', '0', ...args], {
    cwd, env: { ...box.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  }))
  let err = ''
  let out = ''
  child.stderr.on('data', d => { err += d })
  const base = await new Promise((resolveBase, reject) => {
    const timer = setTimeout(() => reject(new Error(`dsh web not ready in ${readyTimeoutMs} ms; stderr:\n${err}`)), readyTimeoutMs)
    const onExit = code => { clearTimeout(timer); reject(new Error(`dsh web exited ${code} before ready; stderr:\n${err}`)) }
    child.on('exit', onExit)
    child.stdout.on('data', (d) => {
      out += d
      const m = /dsh web: (http:\/\/[^\s]+?)\/?\s/.exec(out) ?? /(http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (m) { clearTimeout(timer); child.off('exit', onExit); resolveBase(m[1].replace(/\/$/, '')) }
    })
  })
  let rpcN = 0
  const web = {
    base, child, pid: child.pid, readyMs: Date.now() - t0,
    stderr: () => err,
    stdout: () => out,
    /** POST /api/<method>; resolves to { status, body } without judging it. */
    async rpcRaw(method, payload, headers = {}) {
      const res = await fetch(`${base}/api/${method}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: JSON.stringify({ type: 'client-request', rpcId: `e2e-${process.pid}-${++rpcN}`, method, payload }),
      })
      const text = await res.text()
      let body
      try { body = JSON.parse(text) } catch { body = text }
      return { status: res.status, body }
    },
    /** POST /api/<method>; resolves to result.value, throws on HTTP != 200 or result.ok false. */
    async rpc(method, payload) {
      const { status, body } = await web.rpcRaw(method, payload)
      if (status !== 200 || body?.result?.ok !== true) {
        const e = new Error(`${method} -> HTTP ${status}: ${typeof body === 'string' ? body : JSON.stringify(body?.result ?? body)}`)
        e.status = status; e.body = body
        throw e
      }
      return body.result.value
    },
    createSession: (cwd2 = box.ws) => createSession(web, cwd2),
    prompt: (id, text, mode = 'queue') => prompt(web, id, text, mode),
    history: id => history(web, id),
    waitFor: (id, predicate, opts) => waitFor(web, id, predicate, opts),
    callTool: (id, name, args, opts) => callTool(web, id, name, args, opts),
    /** SIGTERM, then SIGKILL after `graceMs`; resolves to { code, signal, ms }. */
    async stop(graceMs = 5000) {
      const t1 = Date.now()
      if (child.exitCode !== null || child.signalCode !== null) return { code: child.exitCode, signal: child.signalCode, ms: 0 }
      const exited = new Promise(r => child.once('exit', (code, signal) => r({ code, signal })))
      child.kill('SIGTERM')
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs)
      const res = await exited
      clearTimeout(timer)
      return { ...res, ms: Date.now() - t1 }
    },
  }
  box.webs.push(web)
  return web
}

/** session.create in `cwd`; resolves to the session id. */
export async function createSession(web, cwd) {
  const value = await web.rpc('session.create', { cwd })
  return value.sessionId
}

/** session.prompt with one text part; mode 'queue' (next turn) or 'steer' (into the running turn). */
export async function prompt(web, sessionId, text, mode = 'queue') {
  return web.rpc('session.prompt', { sessionId, mode, content: [{ type: 'text', text }] })
}

/** session.history, unwrapped to the plain events [{ type, seq, time, data }]. */
export async function history(web, sessionId) {
  const value = await web.rpc('session.history', { sessionId })
  return value.events.map(e => e.event ?? e)
}

/**
 * Poll session.history until predicate(events) is truthy; resolves to the events.
 * @param {{ timeout?: number, interval?: number }} [options]
 */
export async function waitFor(web, sessionId, predicate, { timeout = 30_000, interval = 50 } = {}) {
  const deadline = Date.now() + timeout
  let events = []
  for (;;) {
    events = await history(web, sessionId)
    if (predicate(events)) return events
    if (Date.now() > deadline) {
      const tail = events.slice(-12).map(e => `${e.seq ?? '-'} ${e.type}`).join(', ')
      throw new Error(`waitFor(${sessionId}) timed out after ${timeout} ms; last events: ${tail}\nstderr tail:\n${web.stderr().slice(-1500)}`)
    }
    await sleep(interval)
  }
}

/**
 * Make the session's model call one tool (a `@@call` prompt to the fake LLM): wait until the session is idle,
 * prompt, wait for the turn it opens to end, and
 * resolve to { text, isError, call, result, events, reply, ms }: `text` is the tool result as the model got it.
 * Throws if the model did not call the tool (e.g. TOOL_NOT_OFFERED). `prefix` adds prompt text before the directive.
 */
export async function callTool(web, sessionId, name, args = {}, { timeout = 30_000, prefix = '' } = {}) {
  // first let a running turn finish, so the turn counted below is the one this prompt opens
  const before = await waitFor(web, sessionId, isIdle, { timeout })
  const lastSeq = before.at(-1)?.seq ?? -1
  const ends = before.filter(e => e.type === 'turn/end').length
  const t0 = Date.now()
  await prompt(web, sessionId, `${prefix}${prefix ? '\n' : ''}@@call ${name} ${JSON.stringify(args)}`)
  const events = await waitFor(web, sessionId, ev => ev.filter(e => e.type === 'turn/end').length > ends, { timeout })
  const fresh = events.filter(e => e.seq > lastSeq)
  const reply = fresh.filter(e => e.type === 'assistant/message').map(e => messageText(e.data?.message)).at(-1)
  const call = fresh.find(e => e.type === 'tool/call' && e.data?.name === name)
  if (!call) throw new Error(`${sessionId}: the model did not call ${name}; reply: ${reply}`)
  const result = fresh.find(e => e.type === 'tool/result' && e.data?.message?.source?.callId === call.data.callId)
  const block = result?.data?.message?.content?.find(b => b.type === 'tool-result')
  return { text: messageText(block), isError: block?.isError, call, result, events, reply, ms: Date.now() - t0 }
}

// ---------------------------------------------------------------------------------------------- session log

const ZSTD_MAGIC = 0xfd2fb528

/**
 * Byte ranges [start, end) of the zstd frames in `buf` (RFC 8878: frame header, then blocks until the
 * last-block bit, then the optional checksum). Skippable frames are dropped; a torn tail is ignored.
 */
export function zstdFrames(buf) {
  const frames = []
  let pos = 0
  while (pos + 4 <= buf.length) {
    const magic = buf.readUInt32LE(pos)
    if ((magic & 0xfffffff0) === 0x184d2a50) {
      if (pos + 8 > buf.length) break
      pos += 8 + buf.readUInt32LE(pos + 4)
      continue
    }
    if (magic !== ZSTD_MAGIC) throw new Error(`not a zstd frame at byte ${pos}`)
    if (pos + 5 > buf.length) break
    const fhd = buf[pos + 4]
    const fcsFlag = fhd >> 6
    const singleSegment = (fhd >> 5) & 1
    const hasChecksum = (fhd >> 2) & 1
    const dictIdFlag = fhd & 3
    let p = pos + 5 + (singleSegment ? 0 : 1) + [0, 1, 2, 4][dictIdFlag] + [singleSegment, 2, 4, 8][fcsFlag]
    let complete = false
    while (p + 3 <= buf.length) {
      const header = buf[p] | (buf[p + 1] << 8) | (buf[p + 2] << 16)
      const last = header & 1
      const type = (header >> 1) & 3
      const size = header >>> 3
      if (type === 3) throw new Error(`reserved zstd block type at byte ${p}`)
      p += 3 + (type === 1 ? 1 : size) // RLE blocks carry one byte
      if (last) { complete = true; break }
    }
    if (hasChecksum) p += 4
    if (!complete || p > buf.length) break
    frames.push([pos, p])
    pos = p
  }
  return frames
}

/** Parse a session log (session.jsonl or the multi-frame session.jsonl.zstd) into its lines (objects). */
export function readSessionLog(file) {
  const raw = readFileSync(file)
  let text
  if (file.endsWith('.zstd')) {
    if (typeof zlib.zstdDecompressSync !== 'function') throw new Error(`readSessionLog needs Node >= 22.15 (zlib zstd); this is ${process.version}`)
    text = zstdFrames(raw).map(([s, e]) => zlib.zstdDecompressSync(raw.subarray(s, e)).toString('utf8')).join('')
  } else {
    text = raw.toString('utf8')
  }
  const lines = text.split('\n')
  // a torn last line (writer mid-flush) is dropped, every complete line must parse
  if (!text.endsWith('\n')) lines.pop()
  return lines.filter(l => l.trim() !== '').map(l => JSON.parse(l))
}

/** Path of a session's log under $DSH_HOME/sessions/<cwd-key>/<id>/; throws if none. */
export function findSessionLog(home, sessionId) {
  const root = join(home, 'sessions')
  if (existsSync(root)) {
    for (const cwdDir of readdirSync(root)) {
      const dir = join(root, cwdDir, sessionId)
      for (const f of ['session.jsonl.zstd', 'session.jsonl']) {
        if (existsSync(join(dir, f))) return join(dir, f)
      }
    }
  }
  throw new Error(`no session log for ${sessionId} under ${root}`)
}

/** Poll the on-disk log (writes are batched, ~200 ms) until predicate(events) holds; resolves to the events. */
export async function waitForLog(home, sessionId, predicate, { timeout = 10_000, interval = 100 } = {}) {
  const deadline = Date.now() + timeout
  let events = []
  let lastErr
  for (;;) {
    try {
      events = readSessionLog(findSessionLog(home, sessionId))
      if (predicate(events)) return events
    } catch (e) { lastErr = e }
    if (Date.now() > deadline) {
      throw new Error(`waitForLog(${sessionId}) timed out; ${events.length} events${lastErr ? `; last error: ${lastErr.message}` : ''}`)
    }
    await sleep(interval)
  }
}

// ---------------------------------------------------------------------------------------------- event helpers

/** Concatenated text blocks of a message ({content: string | blocks[]}). */
export function messageText(message) {
  const c = message?.content
  if (typeof c === 'string') return c
  if (!Array.isArray(c)) return ''
  return c.map(b => (b?.type === 'text' ? b.text : b?.type === 'tool-result' ? messageText(b) : '')).join('')
}

/** user/message events (their data IS the message) as { seq, turn, text, source }; turn from turn/start bounds. */
export function userTexts(events) {
  return events.filter(e => e.type === 'user/message').map((e) => {
    const message = e.data?.message ?? e.data
    return { seq: e.seq, turn: turnOfSeq(events, e.seq), text: messageText(message), source: message?.source }
  })
}

/** Text of the assistant/message events, in order, as { seq, turn, step, text }. */
export function assistantTexts(events) {
  return events.filter(e => e.type === 'assistant/message').map(e => ({
    seq: e.seq, turn: e.data?.turn, step: e.data?.step, text: messageText(e.data?.message),
  }))
}

/** True when every turn/start has its turn/end (nothing running; a prompt just accepted may not have started yet). */
export function isIdle(events) {
  // the last turn event is an end (not the counts of both: a long session's history — 700+ events in
  // real-host-machines after the loop across machines — can hold a turn/end whose turn/start it no longer has)
  for (let i = events.length - 1; i >= 0; i--) {
    if (events[i].type === 'turn/end') return true
    if (events[i].type === 'turn/start') return false
  }
  return true
}

/** Number of turn/end events. */
export function turnEndCount(events) {
  return events.filter(e => e.type === 'turn/end').length
}

/** The turn/end event of `turn`, if any. */
export function turnEnd(events, turn) {
  return events.find(e => e.type === 'turn/end' && e.data?.turn === turn)
}

/** The turn number a seq falls into (by turn/start boundaries). */
export function turnOfSeq(events, seq) {
  let turn
  for (const e of events) {
    if (typeof e.seq !== 'number' || e.seq > seq) break
    if (e.type === 'turn/start') turn = e.data?.turn
  }
  return turn
}

/**
 * Print one metrics line. Under `node --test` stdout lines of a test file become diagnostics, so the
 * TAP reporter (the default when stdout is not a TTY, e.g. CI) shows `# metrics {...}`.
 */
export function printMetrics(label, obj) {
  console.log(`metrics ${JSON.stringify({ test: label, ...obj })}`)
}

/** A new session of `web` in `cwd` that has answered `text` and is idle again (one turn ended). */
export async function idleSession(web, cwd, text) {
  const id = await web.createSession(cwd)
  await web.prompt(id, text)
  await web.waitFor(id, ev => turnEndCount(ev) >= 1 && isIdle(ev))
  return id
}

/** A fresh `profile` of `box` with this plugin installed in it by hand (mode manual). -> the profile's dir */
export function installPlugin(box, profile = 'web') {
  const pdir = initProfile(box, profile)
  packAndInstall(pdir, REPO_ROOT, { mode: 'manual' })
  return pdir
}

/**
 * The plugin installed in `box`'s `web` and `headless` profiles, a web process booted, and its first session
 * A (in `box.ws`) idle after one turn: the start of the suites with a headless owner. -> { web, A }
 */
export async function webAndHeadless(box) {
  installPlugin(box, 'web')
  installPlugin(box, 'headless')
  const web = await bootWeb(box)
  return { web, A: await idleSession(web, box.ws, 'hello from A') }
}

/**
 * One writer, one history: the seqs of `id`'s log only ever go up (rc.8 packs runs of events into `text-chunks`
 * records, so gaps are normal; a second writer shows as a seq that repeats or goes back, e.g. 36 then 22).
 * Returns the seqs.
 */
export function assertOneHistory(home, id) {
  const seqs = readSessionLog(findSessionLog(home, id)).map(e => e.seq).filter(s => s !== undefined)
  for (let i = 1; i < seqs.length; i++) {
    assert.ok(seqs[i] > seqs[i - 1], `seq ${seqs[i]} after ${seqs[i - 1]} in ${id}: the history forked (${seqs.slice(Math.max(0, i - 3), i + 3)})`)
  }
  return seqs
}

/** The fixture plugin with a slow tool (test/fixtures/slow-tool-plugin). */
export const SLOW_PLUGIN = join(FIXTURES, 'slow-tool-plugin')

/**
 * The plugin installed in `box`'s web profile by its own scripts/install.mjs, the slow-tool fixture beside it,
 * and a web process booted; `m` gets `installScriptMs` and `webReadyMs`. -> { pdir, web }
 */
export async function webWithSlowTool(box, m) {
  const pdir = initProfile(box, 'web')
  m.installScriptMs = packAndInstall(pdir, REPO_ROOT, { mode: 'script' }).ms
  packAndInstall(pdir, SLOW_PLUGIN, { mode: 'manual' })
  const web = await bootWeb(box)
  m.webReadyMs = web.readyMs
  return { pdir, web }
}
