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
import { listedIn, manifestPath, packageDir, profileDir, profilesDir } from '../../scripts/lib/layout.mjs'

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
  machines    this home's machine identity, the process holding its endpoint (the lease), and each
              linked machine: its relay and whether it answers now (dsh-session-mail links)
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
    const dir = looksLikePath ? resolve(arg) : profileDir(home, arg)
    return { dir, name: looksLikePath ? dir : arg, tried: [dir] }
  }
  const tried = []
  for (const name of ['web', 'desktop']) {
    const dir = profileDir(home, name)
    tried.push(dir)
    if (existsSync(manifestPath(dir))) return { dir, name, tried }
  }
  return { dir: tried[0], name: 'web', tried }
}

const ok = detail => ({ status: 'ok', detail })
const fail = (detail, fix) => ({ status: 'FAIL', detail, fix })
const skip = (detail, fix) => ({ status: 'skip', detail, fix })
/** A need on this command's own addon (`s.c`). */
const CORE = 'core'

/**
 * The checks, in order. `needs`: the checks (or CORE) that must have passed; the first one missing is named in the
 * skip. `run(s)` reads and extends the shared state `s` (home, profile, installedDir, dialect, …) and returns the
 * verdict. The install layout (profile, package dir, manifest, dependency and bundle entry) is
 * scripts/lib/layout.mjs's, the one the installer writes.
 */
const CHECKS = [
  {
    name: 'home',
    run: s => (isDir(s.home) ? ok(`DSH_HOME ${s.home}`)
      : fail(`DSH_HOME ${s.home} does not exist`, 'run DSH once (it creates DSH_HOME), or pass --home / set DSH_HOME to the directory DSH uses')),
  },
  {
    name: 'profile',
    needs: ['home'],
    run: (s) => {
      s.profile = findProfile(s.home, s.values.profile)
      if (existsSync(manifestPath(s.profile.dir))) return ok(`${s.profile.name} (${s.profile.dir})`)
      return fail(`no profile at ${s.profile.tried.join(' or ')}`,
        s.values.profile === undefined
          ? 'start DSH with the profile once (dsh --profile web), or pass --profile NAME|DIR'
          : `check the name; profiles live in ${profilesDir(s.home)}/<name>/ with a package.json`)
    },
  },
  {
    name: 'installed',
    needs: ['home', 'profile'],
    run: (s) => {
      const manifestFile = manifestPath(s.profile.dir)
      const { dependency: dep, bundled } = listedIn(readJson(manifestFile) ?? {}, NAME)
      const dir = packageDir(s.profile.dir, NAME)
      const st = (() => { try { return lstatSync(dir) } catch { return undefined } })()
      const pkg = st?.isDirectory() ? readJson(join(dir, 'package.json')) : undefined
      const fix = installCommand(s.profile.dir)
      if (st === undefined) return fail(`${NAME} is not in ${join(s.profile.dir, 'node_modules')}`, fix)
      if (st.isSymbolicLink()) {
        return fail(`${dir} is a link; the host cannot resolve the plugin's peers through a link out of DSH_HOME`, `reinstall as a copy: ${fix}`)
      }
      if (!st.isDirectory() || pkg?.name !== NAME) return fail(`${dir} is not the ${NAME} package`, `reinstall: ${fix}`)
      if (dep === undefined) return fail(`${NAME} is in node_modules but not a dependency in ${manifestFile}`, `reinstall: ${fix}`)
      if (!bundled) {
        return fail(`${NAME} is installed but not listed in dsh.profile.bundles of ${manifestFile}`, `reinstall (it adds the bundle entry): ${fix}; then restart DSH`)
      }
      s.installedDir = dir
      s.installedPkg = pkg
      return ok(`${NAME} ${pkg.version} in ${dir} (dependency ${dep}; bundle listed)`)
    },
  },
  {
    name: 'row',
    needs: ['installed', CORE],
    run: (s) => {
      const patchRel = s.installedPkg.dsh?.bundle?.patch
      const patchFiles = (Array.isArray(patchRel) ? patchRel : [patchRel]).filter(p => typeof p === 'string')
      const layers = [
        ...patchFiles.map(p => ({ label: `${NAME}/${p.replace(/^\.\//, '')} (bundle)`, text: readText(join(s.installedDir, p)) })),
        { label: join(s.profile.dir, 'cordis.patch.yml'), text: readText(join(s.profile.dir, 'cordis.patch.yml')) },
        { label: join(s.home, 'cordis.patch.yml'), text: readText(join(s.home, 'cordis.patch.yml')) },
      ]
      const r = s.c.patchRowState(layers, ROW_ID, NAME)
      if (patchFiles.length === 0) return fail(`the installed ${NAME} declares no dsh.bundle.patch`, `reinstall: ${installCommand(s.profile.dir)}`)
      if (r.errors.length > 0) return fail(r.errors[0], 'fix that file: it must be a YAML list of patch entries (the host refuses to boot otherwise)')
      if (!r.inserted) return fail(`no layer inserts the row ${ROW_ID}`, `reinstall: ${installCommand(s.profile.dir)}`)
      if (r.disabled) {
        return fail(`the row ${ROW_ID} is switched off by ${r.disabledBy} (disabled: true)`,
          `delete the "- id: ${ROW_ID}" / "disabled: true" entry from ${r.disabledBy} (or switch the plugin on in the Plugins page); rc.8 applies it live`)
      }
      if (r.configEnabled === false) {
        return fail(`the row's config sets enabled: false (${r.configBy}): the plugin registers no tools`, `remove enabled: false from the ${ROW_ID} config in ${r.configBy}`)
      }
      return ok(`row ${ROW_ID} enabled${r.notes.length ? `; ${r.notes[0]}` : ''}`)
    },
  },
  {
    // the copy the host loads when installed, else this command's own
    name: 'addon',
    run: (s) => {
      const dir = s.installedDir ?? fileURLToPath(PACKAGE_DIR)
      const pkg = s.installedPkg ?? PACKAGE
      const which = s.installedDir ? 'the installed copy' : "this command's copy (not installed)"
      try {
        const binding = s.installedDir ? createRequire(join(dir, 'package.json'))('./binding.cjs') : s.c ?? (() => { throw s.coreError })()
        const v = binding.coreVersion()
        if (v === pkg.version) return ok(`native core ${v} loads on ${process.platform}-${process.arch} (${which})`)
        return fail(`native core ${v} does not match package ${pkg.version} (${which})`, `reinstall ${NAME}: the addon and the JavaScript come from different builds`)
      } catch (e) {
        return fail(`the native addon of ${which} does not load on ${process.platform}-${process.arch}: ${String(e?.message ?? e).split('\n')[0]}`,
          `install a build of ${NAME} for ${process.platform}-${process.arch} (npm run build in a checkout), then reinstall into the profile`)
      }
    },
  },
  {
    // the ledger the budget counts from; the secret's file
    name: 'files',
    needs: ['home', CORE],
    run: async (s) => {
      if (typeof s.c.homeFilesJson !== 'function') return skip("needs this command's own addon: too old")
      const f = JSON.parse(await s.c.homeFilesJson(s.home))
      if (f.ledger) {
        return fail(`the audit ledger cannot be used: ${f.ledger}; it is not followed or written, and sends are refused while a send budget is on`,
          'move that file or folder away (the plugin recreates $DSH_HOME/dsh-session-mail/ledger.jsonl, owner-only)')
      }
      if (f.credentials) return ok(`warning: ${f.credentials} (fix: chmod 600 ${join(s.home, '.credentials.yaml')})`)
      return ok('audit ledger and .credentials.yaml: regular, owner-only, no links')
    },
  },
  {
    name: 'host',
    needs: [CORE],
    run: async (s) => {
      const where = `${s.url}${s.urlSource === '--url' ? '' : ` (${s.urlSource})`}`
      // The send path's own probe (core `delivery::dialect::probe`), so doctor and send agree.
      const r = await s.c.probeHost(s.url, 3000)
      // `state` is the binding's HostState string enum (core doctor::HostState): compared by its members
      const H = s.c.HostState ?? {}
      if (r.state === H.Unreachable) {
        return fail(`nothing answers at ${where}: ${r.detail}`,
          'start DSH with a web server (dsh --profile web), or pass --url / set DSH_WEB_URL to the address its "dsh web:" line prints')
      }
      if (r.state === H.Rc8) {
        s.dialect = 'rc8'
        return ok(`DSH answers at ${where} (rc.8 route, no auth)`)
      }
      if (r.state === H.V2) {
        s.dialect = 'v2'
        return ok(`DSH answers at ${where} (0.1.2+ route: HTTP ${r.status} without a cookie)`)
      }
      if (r.state === H.Forbidden) {
        return fail(`${where} refused the request with HTTP 403 (the Host/Origin fence)`, 'use the loopback address DSH listens on (127.0.0.1 or localhost), not a proxy')
      }
      return fail(`${where} answered HTTP ${r.status}, not like DSH: ${r.detail ?? ''}`, 'point --url / DSH_WEB_URL at the DSH web server')
    },
  },
  {
    name: 'cookie',
    needs: ['host', CORE],
    run: async (s) => {
      if (s.dialect === 'rc8') return skip('rc.8 host: no browser-session auth')
      const a = await s.c.authProbe(s.url, s.home)
      const cred = join(s.home, '.credentials.yaml')
      if (a.state === 'ok') return ok(`a cookie signed with ${cred} is accepted (HTTP ${a.status} after auth)`)
      if (a.state === 'rejected') {
        return fail(`the host refused (HTTP 401) a cookie signed with the secret in ${cred}: the running host loaded another secret`,
          'the file changed after DSH started, or DSH runs with another DSH_HOME: restart DSH, or pass --home with the DSH_HOME it runs with')
      }
      if (a.state === 'no-secret') {
        return fail(`no usable browser-session secret: ${a.detail}`, `start DSH once with this DSH_HOME (it writes ${cred}), or pass --home with the DSH_HOME it runs with`)
      }
      if (a.state === 'forbidden') return fail('the host refused the request with HTTP 403 (the Host/Origin fence)', 'use the loopback address DSH listens on')
      return fail(`the probe failed: ${a.state}: ${a.detail ?? ''}`, 'run doctor again; if it persists, check --url')
    },
  },
  {
    // issue 31: the machine identity, the lease holder, and each link (its relay, whether it answers now)
    name: 'machines',
    needs: ['home', CORE],
    run: async (s) => {
      if (typeof s.c.machinesDoctor !== 'function') return skip('this addon has no machines')
      const rows = JSON.parse(await s.c.machinesDoctor(s.home))
      await s.c.machinesStop(s.home) // the doctor may have bound the endpoint to probe the links
      return {
        rows: rows.map(r => ({
          name: r.name,
          status: r.status === 'fail' ? 'FAIL' : r.status,
          detail: r.detail,
          ...(r.status === 'fail' ? { fix: r.name.startsWith('link ') ? `is DSH running on that machine? dsh-session-mail links --home ${s.home}` : 'see docs/machines.md' } : {}),
        })),
      }
    },
  },
  {
    name: 'self-check',
    // a skipped cookie check (rc.8) does not block it; a failed one does
    blocked: s => (s.values['no-self-check'] ? '--no-self-check'
      : s.c === undefined ? "needs this command's own addon"
        : s.status('host') !== 'ok' ? 'needs host'
          : s.status('cookie') === 'FAIL' ? 'needs cookie' : undefined),
    run: s => selfCheck({ c: s.c, home: s.home, url: s.url, dialect: s.dialect, scratch: s.values.scratch, timeoutMs: s.timeoutMs }),
  },
]

/** Why `check` cannot run now (its skip line), or undefined. */
function blockedBy(check, s) {
  if (check.blocked) return check.blocked(s)
  for (const need of check.needs ?? []) {
    if (need === CORE) {
      if (s.c === undefined) return `needs this command's own addon: ${s.coreError?.message}`
    } else if (s.status(need) !== 'ok') return `needs ${need}`
  }
  return undefined
}

export async function doctor(argv, out) {
  const { help, values } = parse('doctor', argv, {
    profile: { type: 'string' }, home: { type: 'string' }, url: { type: 'string' }, scratch: { type: 'string' },
    'no-self-check': { type: 'boolean' }, timeout: { type: 'string' }, json: { type: 'boolean' },
  })
  if (help) return out.help(DOCTOR_HELP)
  const timeoutMs = durationOption('doctor', values, 'timeout') ?? 20_000
  const { url, source: urlSource } = hostUrl(values.url, process.env, 'doctor')
  const live = values.json ? undefined : out
  if (live) live.stdout(`${NAME} doctor ${PACKAGE.version} (Node ${process.version}, ${process.platform}-${process.arch})`)

  const list = []
  const s = { values, url, urlSource, timeoutMs, home: resolveDshHome(values.home), status: name => list.find(x => x.name === name)?.status }
  try { s.c = core() } catch (e) { s.coreError = e }
  for (const check of CHECKS) {
    const why = blockedBy(check, s)
    const r = why === undefined ? await check.run(s) : skip(why)
    // a check may answer several rows (machines: identity, lease holder, each link)
    for (const row of r.rows ?? [{ ...r, name: check.name }]) {
      const entry = { name: row.name, status: row.status, detail: row.detail, ...(row.fix ? { fix: row.fix } : {}) }
      list.push(entry)
      if (live) {
        live.stdout(`${entry.status.padEnd(5)} ${entry.name.padEnd(11)} ${entry.detail}`)
        if (entry.fix) live.stdout(`${' '.repeat(18)}fix: ${entry.fix}`)
      }
    }
  }

  const failed = list.filter(x => x.status === 'FAIL').map(x => x.name)
  if (values.json) {
    out.stdout(JSON.stringify({ ok: failed.length === 0, failed, home: s.home, url, checks: list }, null, 2))
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
