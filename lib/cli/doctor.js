// `doctor`: is dsh-session-mail set up to work here? Each check is ok / FAIL / skip with a one-line
// fix; a check that needs a failed one is skipped and names it. The last check sends one real
// message into a scratch session and confirms from its log that it landed.
import { existsSync, lstatSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { isAbsolute, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { EXIT, durationOption, parse } from './args.js'
import { core, PACKAGE, PACKAGE_DIR, toolRequest } from './core.js'
import { resolveDshHome } from '../home.js'
import { hostUrl, rc8 } from './host.js'

const NAME = PACKAGE.name
const ROW_ID = 'dsh-session-mail'
/** Sender id of the self-check message: not a session, so nobody can answer it by mistake. */
const DOCTOR_SENDER = 'dsh-session-mail-doctor'

const DOCTOR_HELP = `usage: dsh-session-mail doctor [--profile NAME|DIR] [--home DIR] [--url URL] [--scratch ID]
                             [--no-self-check] [--timeout DURATION] [--json]

Checks, in order, each ok / FAIL / skip with a fix:
  home        DSH_HOME exists
  profile     the profile (default: web, else desktop) has a package.json
  installed   ${NAME} is a real directory in the profile's node_modules, a dependency, and in
              dsh.profile.bundles
  row         the bundle row is not switched off (a "- id: ${ROW_ID}" / "disabled: true" override in
              the profile's or DSH_HOME's cordis.patch.yml, or config enabled: false)
  addon       the installed copy's native addon loads here and matches its package version
  files       the audit ledger is a regular file of this user, not a link (else sends are refused
              while a budget is on); .credentials.yaml is not readable by other users
  host        the web server answers (POST /api/host.describe)
  cookie      DSH 0.1.2+: a cookie signed with $DSH_HOME/.credentials.yaml is accepted (rc.8: skip)
  self-check  one message to a scratch session lands (its log shows the request id)

  --profile P       a profile name under $DSH_HOME/profiles, or a profile directory
  --home DIR        DSH_HOME (default: $DSH_HOME, else ~/.dsh)
  --url URL         the host's web server (default: $DSH_WEB_URL without ?token=, else
                    http://127.0.0.1:3080)
  --scratch ID      the session the self-check writes to (default: the doctor's own scratch
                    session under $DSH_HOME/.dsh-session-mail/doctor, created on rc.8; on DSH
                    0.1.2+ pass one you can spare)
  --no-self-check   skip the message
  --timeout D       how long to wait for the self-check to land (default 20s)
  --json            {ok, failed:[names], checks:[{name, status, detail, fix}]}

The self-check starts one turn in the scratch session (its model sees "No reply needed").
Exit: 0 no check failed, 1 a check failed, 2 bad usage.
`

const sleep = ms => new Promise(r => setTimeout(r, ms))

function readJson(file) {
  try { return JSON.parse(readFileSync(file, 'utf8')) } catch { return undefined }
}

function readText(file) {
  try { return readFileSync(file, 'utf8') } catch { return null }
}

function isDir(p) {
  try { return statSync(p).isDirectory() } catch { return false }
}

class Checks {
  constructor() { this.list = [] }
  add(name, status, detail, fix) {
    const c = { name, status, detail, ...(fix ? { fix } : {}) }
    this.list.push(c)
    return c
  }
  ok(name, detail) { return this.add(name, 'ok', detail) }
  fail(name, detail, fix) { return this.add(name, 'FAIL', detail, fix) }
  skip(name, detail, fix) { return this.add(name, 'skip', detail, fix) }
  status(name) { return this.list.find(c => c.name === name)?.status }
  passed(...names) { return names.every(n => this.status(n) === 'ok') }
  blocker(...names) { return names.find(n => this.status(n) !== 'ok') }
}

function installCommand(profileDir) {
  const script = fileURLToPath(new URL('scripts/install.mjs', PACKAGE_DIR))
  return existsSync(script)
    ? `node ${script} --profile ${profileDir}`
    : `node <dsh-session-mail package>/scripts/install.mjs --profile ${profileDir}`
}

/** Profile directory from --profile (a name under profiles/ or a directory), else web, else desktop. */
function findProfile(home, arg) {
  if (arg !== undefined) {
    const looksLikePath = isAbsolute(arg) || arg.includes('/') || arg.includes('\\') || arg.startsWith('.')
    const dir = looksLikePath ? resolve(arg) : join(home, 'profiles', arg)
    return { dir, name: looksLikePath ? dir : arg, tried: [dir] }
  }
  const tried = []
  for (const name of ['web', 'desktop']) {
    const dir = join(home, 'profiles', name)
    tried.push(dir)
    if (existsSync(join(dir, 'package.json'))) return { dir, name, tried }
  }
  return { dir: tried[0], name: 'web', tried }
}

export async function doctor(argv, out) {
  const { help, values } = parse('doctor', argv, {
    profile: { type: 'string' }, home: { type: 'string' }, url: { type: 'string' }, scratch: { type: 'string' },
    'no-self-check': { type: 'boolean' }, timeout: { type: 'string' }, json: { type: 'boolean' },
  })
  if (help) return out.help(DOCTOR_HELP)
  const timeoutMs = durationOption('doctor', values, 'timeout') ?? 20_000
  const { url, source: urlSource } = hostUrl(values.url, process.env, 'doctor')
  const checks = new Checks()
  const live = values.json ? undefined : out

  const say = (c) => {
    if (!live) return
    const tag = c.status.padEnd(5)
    live.stdout(`${tag} ${c.name.padEnd(11)} ${c.detail}`)
    if (c.fix) live.stdout(`${' '.repeat(18)}fix: ${c.fix}`)
  }
  const add = (fn) => (...a) => { const c = fn.apply(checks, a); say(c); return c }
  const ok = add(checks.ok); const fail = add(checks.fail); const skip = add(checks.skip)

  if (live) live.stdout(`${NAME} doctor ${PACKAGE.version} (Node ${process.version}, ${process.platform}-${process.arch})`)

  // ---- home
  const home = resolveDshHome(values.home)
  if (isDir(home)) ok('home', `DSH_HOME ${home}`)
  else fail('home', `DSH_HOME ${home} does not exist`, 'run DSH once (it creates DSH_HOME), or pass --home / set DSH_HOME to the directory DSH uses')

  // ---- profile
  let profile
  if (checks.passed('home')) {
    profile = findProfile(home, values.profile)
    if (existsSync(join(profile.dir, 'package.json'))) ok('profile', `${profile.name} (${profile.dir})`)
    else {
      fail('profile', `no profile at ${profile.tried.join(' or ')}`,
        values.profile === undefined
          ? 'start DSH with the profile once (dsh --profile web), or pass --profile NAME|DIR'
          : `check the name; profiles live in ${join(home, 'profiles')}/<name>/ with a package.json`)
    }
  } else skip('profile', 'needs home')

  // ---- installed
  let installedDir
  let installedPkg
  if (checks.passed('profile')) {
    const manifest = readJson(join(profile.dir, 'package.json')) ?? {}
    const dir = join(profile.dir, 'node_modules', NAME)
    const st = (() => { try { return lstatSync(dir) } catch { return undefined } })()
    const pkg = st?.isDirectory() ? readJson(join(dir, 'package.json')) : undefined
    const dep = manifest.dependencies?.[NAME]
    const bundles = manifest.dsh?.profile?.bundles
    const fix = installCommand(profile.dir)
    if (st === undefined) fail('installed', `${NAME} is not in ${join(profile.dir, 'node_modules')}`, fix)
    else if (st.isSymbolicLink()) {
      fail('installed', `${dir} is a link; the host cannot resolve the plugin's peers through a link out of DSH_HOME`,
        `reinstall as a copy: ${fix}`)
    } else if (!st.isDirectory() || pkg?.name !== NAME) fail('installed', `${dir} is not the ${NAME} package`, `reinstall: ${fix}`)
    else if (dep === undefined) fail('installed', `${NAME} is in node_modules but not a dependency in ${join(profile.dir, 'package.json')}`, `reinstall: ${fix}`)
    else if (!Array.isArray(bundles) || !bundles.includes(NAME)) {
      fail('installed', `${NAME} is installed but not listed in dsh.profile.bundles of ${join(profile.dir, 'package.json')}`, `reinstall (it adds the bundle entry): ${fix}; then restart DSH`)
    } else {
      installedDir = dir
      installedPkg = pkg
      ok('installed', `${NAME} ${pkg.version} in ${dir} (dependency ${dep}; bundle listed)`)
    }
  } else skip('installed', `needs ${checks.blocker('home', 'profile')}`)

  // ---- row
  let c
  let coreError
  try { c = core() } catch (e) { coreError = e }
  if (installedDir === undefined) skip('row', 'needs installed')
  else if (c === undefined) skip('row', `needs this command's own addon: ${coreError.message}`)
  else {
    const patchRel = installedPkg.dsh?.bundle?.patch
    const patchFiles = (Array.isArray(patchRel) ? patchRel : [patchRel]).filter(p => typeof p === 'string')
    const layers = [
      ...patchFiles.map(p => ({ label: `${NAME}/${p.replace(/^\.\//, '')} (bundle)`, text: readText(join(installedDir, p)) })),
      { label: join(profile.dir, 'cordis.patch.yml'), text: readText(join(profile.dir, 'cordis.patch.yml')) },
      { label: join(home, 'cordis.patch.yml'), text: readText(join(home, 'cordis.patch.yml')) },
    ]
    const s = c.patchRowState(layers, ROW_ID, NAME)
    if (patchFiles.length === 0) fail('row', `the installed ${NAME} declares no dsh.bundle.patch`, `reinstall: ${installCommand(profile.dir)}`)
    else if (s.errors.length > 0) fail('row', s.errors[0], 'fix that file: it must be a YAML list of patch entries (the host refuses to boot otherwise)')
    else if (!s.inserted) fail('row', `no layer inserts the row ${ROW_ID}`, `reinstall: ${installCommand(profile.dir)}`)
    else if (s.disabled) {
      fail('row', `the row ${ROW_ID} is switched off by ${s.disabledBy} (disabled: true)`,
        `delete the "- id: ${ROW_ID}" / "disabled: true" entry from ${s.disabledBy} (or switch the plugin on in the Plugins page); rc.8 applies it live`)
    } else if (s.configEnabled === false) {
      fail('row', `the row's config sets enabled: false (${s.configBy}): the plugin registers no tools`, `remove enabled: false from the ${ROW_ID} config in ${s.configBy}`)
    } else ok('row', `row ${ROW_ID} enabled${s.notes.length ? `; ${s.notes[0]}` : ''}`)
  }

  // ---- addon (the copy the host loads when installed, else this command's own)
  {
    const dir = installedDir ?? fileURLToPath(PACKAGE_DIR)
    const pkg = installedPkg ?? PACKAGE
    const which = installedDir ? 'the installed copy' : "this command's copy (not installed)"
    try {
      const binding = installedDir ? createRequire(join(dir, 'package.json'))('./binding.cjs') : c ?? (() => { throw coreError })()
      const v = binding.coreVersion()
      if (v === pkg.version) ok('addon', `native core ${v} loads on ${process.platform}-${process.arch} (${which})`)
      else fail('addon', `native core ${v} does not match package ${pkg.version} (${which})`, `reinstall ${NAME}: the addon and the JavaScript come from different builds`)
    } catch (e) {
      fail('addon', `the native addon of ${which} does not load on ${process.platform}-${process.arch}: ${String(e?.message ?? e).split('\n')[0]}`,
        `install a build of ${NAME} for ${process.platform}-${process.arch} (npm run build in a checkout), then reinstall into the profile`)
    }
  }

  // ---- files (the ledger the budget counts from; the secret's file)
  if (!checks.passed('home')) skip('files', 'needs home')
  else if (c === undefined || typeof c.homeFilesJson !== 'function') skip('files', `needs this command's own addon: ${coreError?.message ?? 'too old'}`)
  else {
    const f = JSON.parse(await c.homeFilesJson(home))
    if (f.ledger) {
      fail('files', `the audit ledger cannot be used: ${f.ledger}; it is not followed or written, and sends are refused while a send budget is on`,
        'move that file or folder away (the plugin recreates $DSH_HOME/dsh-session-mail/ledger.jsonl, owner-only)')
    } else if (f.credentials) ok('files', `warning: ${f.credentials} (fix: chmod 600 ${join(home, '.credentials.yaml')})`)
    else ok('files', 'audit ledger and .credentials.yaml: regular, owner-only, no links')
  }

  // ---- host
  let dialect
  {
    const where = `${url}${urlSource === '--url' ? '' : ` (${urlSource})`}`
    // The send path's own probe (core `delivery::dialect::probe`), so doctor and send agree.
    const r = c === undefined ? undefined : await c.probeHost(url, 3000)
    // `state` is the binding's HostState string enum (core doctor::HostState): compared by its members
    const H = c?.HostState ?? {}
    if (r === undefined) {
      skip('host', `needs this command's own addon: ${coreError.message}`)
    } else if (r.state === H.Unreachable) {
      fail('host', `nothing answers at ${where}: ${r.detail}`,
        'start DSH with a web server (dsh --profile web), or pass --url / set DSH_WEB_URL to the address its "dsh web:" line prints')
    } else if (r.state === H.Rc8) {
      dialect = 'rc8'
      ok('host', `DSH answers at ${where} (rc.8 route, no auth)`)
    } else if (r.state === H.V2) {
      dialect = 'v2'
      ok('host', `DSH answers at ${where} (0.1.2+ route: HTTP ${r.status} without a cookie)`)
    } else if (r.state === H.Forbidden) {
      fail('host', `${where} refused the request with HTTP 403 (the Host/Origin fence)`, 'use the loopback address DSH listens on (127.0.0.1 or localhost), not a proxy')
    } else {
      fail('host', `${where} answered HTTP ${r.status}, not like DSH: ${r.detail ?? ''}`,
        'point --url / DSH_WEB_URL at the DSH web server')
    }
  }

  // ---- cookie
  if (!checks.passed('host')) skip('cookie', 'needs host')
  else if (dialect === 'rc8') skip('cookie', 'rc.8 host: no browser-session auth')
  else if (c === undefined) skip('cookie', `needs this command's own addon: ${coreError.message}`)
  else {
    const a = await c.authProbe(url, home)
    const cred = join(home, '.credentials.yaml')
    if (a.state === 'ok') ok('cookie', `a cookie signed with ${cred} is accepted (HTTP ${a.status} after auth)`)
    else if (a.state === 'rejected') {
      fail('cookie', `the host refused (HTTP 401) a cookie signed with the secret in ${cred}: the running host loaded another secret`,
        'the file changed after DSH started, or DSH runs with another DSH_HOME: restart DSH, or pass --home with the DSH_HOME it runs with')
    } else if (a.state === 'no-secret') {
      fail('cookie', `no usable browser-session secret: ${a.detail}`, `start DSH once with this DSH_HOME (it writes ${cred}), or pass --home with the DSH_HOME it runs with`)
    } else if (a.state === 'forbidden') {
      fail('cookie', 'the host refused the request with HTTP 403 (the Host/Origin fence)', 'use the loopback address DSH listens on')
    } else fail('cookie', `the probe failed: ${a.state}: ${a.detail ?? ''}`, 'run doctor again; if it persists, check --url')
  }

  // ---- self-check
  const blocked = c === undefined ? "this command's own addon"
    : checks.status('host') !== 'ok' ? 'host' : checks.status('cookie') === 'FAIL' ? 'cookie' : undefined
  if (values['no-self-check']) skip('self-check', '--no-self-check')
  else if (blocked) skip('self-check', `needs ${blocked}`)
  else {
    const r = await selfCheck({ c, home, url, dialect, scratch: values.scratch, timeoutMs })
    if (r.status === 'ok') ok('self-check', r.detail)
    else if (r.status === 'skip') skip('self-check', r.detail, r.fix)
    else fail('self-check', r.detail, r.fix)
  }

  const failed = checks.list.filter(x => x.status === 'FAIL').map(x => x.name)
  if (values.json) {
    out.stdout(JSON.stringify({ ok: failed.length === 0, failed, home, url, checks: checks.list }, null, 2))
  } else if (failed.length === 0) {
    out.stdout('doctor: no check failed.')
  } else {
    out.stdout(`doctor: ${failed.length} check${failed.length > 1 ? 's' : ''} failed: ${failed.join(', ')}. Fix ${failed[0]} first, then run doctor again.`)
  }
  return failed.length === 0 ? EXIT.OK : EXIT.FAILED
}

/** The doctor's scratch session: its cwd, so a later run finds and reuses it. */
function scratchDir(home) {
  return join(home, '.dsh-session-mail', 'doctor')
}

async function selfCheck({ c, home, url, dialect, scratch, timeoutMs }) {
  const step = { name: 'pick a scratch session' }
  try {
    let target = scratch
    let live = []
    if (target === undefined) {
      const cwd = scratchDir(home)
      const v = await c.listSessions(toolRequest('sessions_list', { query: cwd, limit: 200 }, { home, config: { maxListResults: 200 } }))
      target = v.ok ? v.rows.find(r => r.cwd === cwd)?.id : undefined
      if (target === undefined) {
        if (dialect !== 'rc8') {
          return { status: 'skip', detail: 'no scratch session on this host (the doctor creates one only on rc.8)', fix: 'pass --scratch <id of a session you can spare> to send the self-check message' }
        }
        step.name = 'create a scratch session (session.create)'
        mkdirSync(cwd, { recursive: true })
        target = (await rc8(url, 'session.create', { cwd }, { timeoutMs: 10_000 })).sessionId
        // Just created: live in the host; its log may not be on disk yet.
        live = [{ id: target, status: 'idle', header: { cwd }, pendingRpcIds: [], pendingNextTurn: 0 }]
      }
    }
    step.name = `send to ${target}`
    const args = { toSessionId: target, message: `${PACKAGE.name} doctor self-check at ${new Date().toISOString()}. No reply needed.` }
    const s = await c.run(toolRequest('send_session_message', args, { home, caller: DOCTOR_SENDER, baseUrl: url, live }))
    if (!s.accepted) {
      return { status: 'FAIL', detail: `${step.name}: ${s.text.split('\n')[0]}`, fix: 'the line above says what the host or the core refused' }
    }
    step.name = `find ${s.requestId} in ${target}'s log`
    const deadline = Date.now() + timeoutMs
    let v
    for (;;) {
      v = await c.verifyRequest(home, s.requestId, target)
      if (v.state === 'landed' || Date.now() > deadline) break
      await sleep(250)
    }
    if (v.state === 'landed') {
      return { status: 'ok', detail: `a message to scratch session ${target} landed at seq ${v.seq}${v.turn == null ? '' : ` (turn ${v.turn})`}: ${s.requestId}` }
    }
    if (v.state === 'queued') {
      return { status: 'ok', detail: `a message to scratch session ${target} is queued at seq ${v.seq} (${v.target}), not landed within ${timeoutMs / 1000} s (that session is busy): ${s.requestId}` }
    }
    return {
      status: 'FAIL',
      detail: `${step.name}: the host accepted the message, but after ${timeoutMs / 1000} s its request id is ${v.state} there`,
      fix: `check that the host writes to ${join(home, 'sessions')} (--home must be the DSH_HOME the host runs with); dsh-session-mail verify ${s.requestId}`,
    }
  } catch (e) {
    return { status: 'FAIL', detail: `${step.name}: ${String(e?.message ?? e).split('\n')[0]}`, fix: 'run doctor again; if it persists, check the host\'s log' }
  }
}
