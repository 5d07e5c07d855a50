// The dsh-session-mail command line (bin/dsh-session-mail.mjs), run as a child process the way a
// person or a script runs it: against the contract host (DSH 0.1.2+ route, cookie, V4 logs) and
// against the real DSH 0.1.0-rc.8 host (test/real-host/harness.mjs).
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test test/cli.test.mjs
//
// Needs Node >= 22.15 (zstd logs) and the built addon (npm run build:debug or scripts/test.sh).
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { startContractHost } from './contract-host/index.mjs'
import { projectKey as contractProjectKey, writeCredentials } from './contract-host/store.mjs'
import { encodeBase64Url } from './contract-host/auth.mjs'
import { EXIT, exitFor, exitForFate } from '../lib/cli/args.js'
import {
  installHost, makeSandbox, packAndInstall, bootWeb, initProfile, setRowDisabled, waitForLog, userTexts,
  PROFILE_TEMPLATES, REPO_ROOT,
} from './real-host/harness.mjs'

const BIN = fileURLToPath(new URL('../bin/dsh-session-mail.mjs', import.meta.url))
const core = createRequire(import.meta.url)('../binding.cjs')
const RID = /^request: (dsh-session-mail:[0-9a-f-]{36})$/m

/** Run the CLI; resolves to { code, stdout, stderr, json }. Async: the contract host lives in this process. */
function cli(args, { cwd = process.cwd(), env = {}, input } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { cwd, env: { ...process.env, ...env }, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', d => { stdout += d })
    child.stderr.on('data', d => { stderr += d })
    child.on('error', reject)
    child.on('close', (code) => {
      let json
      try { json = JSON.parse(stdout) } catch { /* text */ }
      resolve({ code, stdout, stderr, json })
    })
    child.stdin.end(input ?? '')
  })
}

const tmp = () => realpathSync(mkdtempSync(join(tmpdir(), 'dsh-cli-')))

// ------------------------------------------------------------------------------------------ no host

describe('usage', () => {
  test('bad usage exits 2 and says what is wrong', async () => {
    const cases = [
      [[], /usage: dsh-session-mail <command>/],
      [['frobnicate'], /unknown command "frobnicate"/],
      [['send', '--message', 'hi'], /--to ID is required/],
      [['send', '--to', 'session-x'], /--message TEXT is required/],
      [['send', '--to'], /--to needs a value/],
      // The core refuses the scope (no check of the CLI's own): bad-argument → 2.
      [['list', '--scope', 'everything'], /^refused \(bad-argument\): scope must be one of "top-level", "subagents", "all"/m],
      [['list', '--limit', '0'], /--limit must be an integer from 1 to 200; got 0/],
      [['list', '--bogus'], /unknown option --bogus/],
      [['read'], /missing ID/],
      [['read', 'a', 'b'], /unexpected argument "b"/],
      [['read', 'x', '--max', '101'], /--max must be an integer from 1 to 100/],
      [['verify'], /missing REQUEST_ID/],
      [['verify', 'x', '--wait', 'soon'], /--wait must be a duration/],
      [['send', '--to', 'x', '--message', 'y', '--url', 'not a url'], /--url "not a url" is not a URL/],
      [['doctor', '--urgent'], /unknown option --urgent/],
      [['list', '--json=yes'], /--json takes no value/],
      [['list', '-x'], /unknown option -x/],
      [['send', '--to', '--message', 'hi'], /--to needs a value \(one that starts with "-" is written --to=--message\)/],
    ]
    const results = await Promise.all(cases.map(([args]) => cli(args, { env: { DSH_HOME: tmp() } })))
    results.forEach((r, i) => {
      assert.equal(r.code, 2, `${cases[i][0].join(' ')}: ${r.stderr}`)
      assert.match(r.stdout + r.stderr, cases[i][1], cases[i][0].join(' '))
    })
  })

  test('one exit code per refusal code: exitFor over every RefusalCode; list and read agree (text and --json)', async () => {
    const codes = Object.values(core.RefusalCode)
    assert.ok(codes.includes('bad-argument') && codes.includes('held-elsewhere'), codes.join())
    for (const code of codes) {
      const want = code === 'bad-argument' ? EXIT.USAGE : code === 'unreachable' ? EXIT.UNREACHABLE : EXIT.REFUSED
      assert.equal(exitFor({ code }), want, code)
    }
    assert.equal(exitFor({ code: null }), EXIT.OK)
    assert.equal(exitFor({ ok: true }), EXIT.OK)
    // The same core refusal (bad-argument) from list and from read: the same exit code and code, in both forms.
    const home = tmp()
    const runs = await Promise.all([
      cli(['list', '--scope', 'nope', '--home', home]),
      cli(['list', '--scope', 'nope', '--json', '--home', home]),
      cli(['read', 'session-\u0001x', '--home', home]),
      cli(['read', 'session-\u0001x', '--json', '--home', home]),
    ])
    for (const r of runs) {
      assert.equal(r.code, EXIT.USAGE, r.stdout + r.stderr)
      assert.match(r.json?.code ?? r.stdout, /^refused \(bad-argument\)|^bad-argument$/)
    }
    // A non-argument refusal of read (not-found) is REFUSED; before, list --json mapped every refusal to USAGE.
    const gone = await cli(['read', 'session-nope', '--json', '--home', home])
    assert.equal(gone.code, exitFor({ code: 'not-found' }))
    assert.equal(gone.json.code, 'not-found')
  })

  test('one exit code per fate: exitForFate over every FateState the binding exports, expired included', async () => {
    const states = Object.values(core.FateState)
    // the one enum of docs/architecture.md "Fates", plus lost and removed (crates/core/src/fate.rs)
    assert.deepEqual([...states].sort(), ['approved', 'canceled', 'expired', 'held', 'landed', 'lost', 'queued',
      'refused', 'rejected', 'removed', 'unknown', 'waiting'])
    const want = {
      landed: EXIT.OK,
      queued: EXIT.PENDING, waiting: EXIT.PENDING, held: EXIT.PENDING, approved: EXIT.PENDING, lost: EXIT.PENDING,
      rejected: EXIT.UNDELIVERED, expired: EXIT.UNDELIVERED, refused: EXIT.UNDELIVERED, canceled: EXIT.UNDELIVERED,
      removed: EXIT.UNDELIVERED,
      unknown: EXIT.FAILED,
    }
    for (const state of states) assert.equal(exitForFate({ state }), want[state], state)
    // a state this version does not know fails as unknown does, never as landed
    assert.equal(exitForFate({ state: 'teleported' }), EXIT.FAILED)
    assert.equal(exitForFate({ state: 'toString' }), EXIT.FAILED)
    assert.equal(new Set(Object.values(EXIT)).size, Object.values(EXIT).length, 'exit codes are distinct')
    // the help names every state and its exit code
    const help = (await cli(['verify', '--help'])).stdout
    for (const state of states) assert.match(help, new RegExp(`^  ${state} +.* exit ${want[state]}$`, 'm'), state)
  })

  test('--help per command; ledger on an empty home', async () => {
    for (const cmd of ['list', 'read', 'send', 'verify', 'ledger', 'doctor']) {
      const r = await cli([cmd, '--help'])
      assert.equal(r.code, 0, cmd)
      assert.match(r.stdout, new RegExp(`^usage: dsh-session-mail ${cmd}`), cmd)
    }
    const l = await cli(['ledger', '--home', tmp()])
    assert.equal(l.code, 0, l.stderr)
    assert.match(l.stdout, /^no send attempts recorded \(/)
    const bad = await cli(['ledger', '--limit', '0', '--home', tmp()])
    assert.equal(bad.code, 2)
  })

  test("projectKey is the host's rule (contract host store.mjs and the installed rc.8 format.ts)", () => {
    // The installed rc.8 host's own function, lifted from its persistence package.
    const pnpm = join(installHost().dir, 'host', 'node_modules', '.pnpm')
    const pkg = readdirSync(pnpm).find(d => d.startsWith('@deepseek-ai+dsh-session-persistence-jsonl@'))
    const lib = readFileSync(join(pnpm, pkg, 'node_modules', '@deepseek-ai', 'dsh-session-persistence-jsonl', 'lib', 'index.js'), 'utf8')
    const hostKey = new Function(`${/function projectKey\(cwd\) \{[\s\S]*?\n\}/.exec(lib)[0]}; return projectKey`)()
    const cwds = ['/home/ana/proj', '/', 'C:\\Users\\x', '/a//b:/c', '/a b/~x', '/é/😀', '---x', '/' + 'é'.repeat(90), '/' + 'x'.repeat(400)]
    for (const cwd of cwds) {
      assert.equal(core.projectKey(cwd), contractProjectKey(cwd), cwd)
      assert.equal(core.projectKey(cwd), hostKey(cwd), cwd)
    }
    assert.equal(core.projectKey(''), null)
  })
})

// ------------------------------------------------------------------------------------------ contract host

describe('contract host (DSH 0.1.2+)', () => {
  let host, projA, projB, A, B, rid
  const env = () => ({ DSH_HOME: host.dshHome, DSH_WEB_URL: `${host.url}/?token=launch-token-never-sent` })

  before(async () => {
    host = await startContractHost({})
    projA = tmp()
    projB = tmp()
    A = host.createSession({ cwd: projA, preset: 'standard' })
    B = host.createSession({ cwd: projB, preset: 'standard' })
  })
  after(async () => {
    await host?.close()
    for (const d of [projA, projB]) rmSync(d, { recursive: true, force: true })
  })

  test('send from outside a session: From header of the cwd project\'s session, request-id marker, exit 0', async () => {
    host.setRunning(B, true) // busy: the message waits in the next-turn inbox
    const r = await cli(['send', '--to', B, '--message', 'the build is green'], { cwd: projA, env: env() })
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stdout, new RegExp(`^accepted for ${B} \\| mode=queue \\| chars=18`))
    assert.match(r.stderr, new RegExp(`from ${A} \\(the newest session of this directory's project ${contractProjectKey(projA)}`))
    rid = RID.exec(r.stdout)[1]
    const prompts = host.requests.filter(q => q.path === '/api/session/prompt')
    assert.equal(prompts.length, 1)
    assert.equal(prompts[0].status, 200)
    assert.ok(!JSON.stringify(prompts[0]).includes('launch-token'), 'the DSH_WEB_URL token is never sent')
    const req = prompts[0].body.payload.args.request
    assert.equal(req.requestId, rid)
    assert.equal(req.content[0].text, `From ${A} ：\nthe build is green`)
    const splice = host.events(B).find(e => e.type === 'agent/inbox/spliced' && e.data.inserted.length)
    assert.equal(splice.data.inserted[0].source.rpcId, rid)
  })

  test('verify: queued, then landed (by session and by scanning every log)', async () => {
    let v = await cli(['verify', rid, '--session', B, '--json'], { env: env() })
    assert.equal(v.code, 5, v.stdout)
    assert.deepEqual([v.json.state, v.json.sessionId, v.json.target], ['queued', B, 'next-turn'])
    host.completeTurn(B) // the turn ends; the queued message opens the next one
    const landed = host.events(B).find(e => e.type === 'user/message' && e.data.source?.rpcId === rid)
    v = await cli(['verify', rid], { env: env() })
    assert.equal(v.code, 0, v.stdout)
    assert.equal(v.stdout.trim(), `landed in ${B} at seq ${landed.seq} (turn 2)`)
    v = await cli(['verify', rid, '--json'], { env: env() })
    // The audit ledger names the target of a request id this plugin minted: one log read, not a scan.
    assert.deepEqual([v.json.state, v.json.seq, v.json.turn, v.json.searched], ['landed', landed.seq, 2, 1])
    const led = await cli(['ledger', '--json'], { env: env() })
    assert.equal(led.code, 0, led.stderr)
    const entry = led.json.entries.find(e => e.requestId === rid)
    assert.deepEqual([entry.sender, entry.target, entry.tool, entry.mode, entry.outcome, entry.bodyChars],
      [A, B, 'send_session_message', 'queue', 'accepted', 'the build is green'.length])
    assert.ok(!JSON.stringify(led.json).includes('the build is green'), 'the ledger never holds a body')
    // --urgent steers into the running turn: next-step, landing at the next step boundary
    host.setRunning(B, true)
    const u = await cli(['send', '--to', B, '--message', 'correction: use v2', '--urgent', '--json'], { cwd: projA, env: env() })
    assert.equal(u.code, 0, u.stdout)
    assert.deepEqual([u.json.accepted, u.json.from, u.json.to, u.json.url], [true, A, B, host.url])
    assert.match(u.json.text, /\| mode=steer \|/)
    assert.equal(host.requests.at(-1).body.payload.args.request.mode, 'steer')
    v = await cli(['verify', u.json.requestId, '--json'], { env: env() })
    assert.deepEqual([v.json.state, v.json.target], ['queued', 'next-step'])
    host.completeStep(B)
    v = await cli(['verify', u.json.requestId, '--json'], { env: env() })
    assert.equal(v.json.state, 'landed')
    host.setRunning(B, false)
    v = await cli(['verify', 'dsh-session-mail:00000000-0000-4000-8000-000000000000'], { env: env() })
    assert.equal(v.code, 1)
    assert.match(v.stdout, /unknown: .* is in none of the 2 session logs/)
  })

  test('list --json and read --json parse and match the store', async () => {
    const l = await cli(['list', '--json'], { env: env() })
    assert.equal(l.code, 0, l.stderr)
    assert.equal(l.json.considered, 2)
    const byId = Object.fromEntries(l.json.rows.map(r => [r.id, r]))
    for (const [id, cwd] of [[A, projA], [B, projB]]) {
      assert.equal(byId[id].cwd, cwd)
      assert.equal(byId[id].preset, 'standard')
      assert.equal(byId[id].liveness, 'cold')
      assert.equal(byId[id].scope, 'top-level')
      assert.equal(byId[id].messageable, true)
    }
    const text = await cli(['list'], { env: env() })
    assert.equal(text.code, 0)
    const textIds = [...text.stdout.matchAll(/^- (\S+) \[/gm)].map(m => m[1])
    assert.deepEqual(textIds, l.json.rows.map(r => r.id), 'same rows, same order as the tool text')
    const q = await cli(['list', '--json', '--query', projB], { env: env() })
    assert.deepEqual(q.json.rows.map(r => r.id), [B])

    const rd = await cli(['read', B, '--json'], { env: env() })
    assert.equal(rd.code, 0, rd.stderr)
    assert.equal(rd.json.session.id, B)
    assert.equal(rd.json.session.cwd, projB)
    const landed = host.events(B).filter(e => e.type === 'user/message')
    assert.equal(rd.json.session.readable, landed.length)
    assert.equal(rd.json.session.capturedThroughSeq, host.events(B).at(-1).seq)
    const m = rd.json.messages.find(x => x.request === rid)
    assert.equal(m.body, `From ${A} ：\nthe build is green`)
    assert.equal(m.role, 'user')
    const rt = await cli(['read', B], { env: env() })
    assert.match(rt.stdout, new RegExp(`^session ${B} \\[cold, top-level\\] \\| cwd=${projB}`))
    assert.match(rt.stdout, new RegExp(`--- user \\(seq ${m.seq}, user, request=${rid}\\) ---\\nFrom ${A} ：\\nthe build is green`))
    // --since: only what came after that seq
    const since = await cli(['read', B, '--since', String(m.seq)], { env: env() })
    assert.match(since.stdout, new RegExp(`\\nreadable messages: \\d+ after seq ${m.seq} \\|`))
    assert.doesNotMatch(since.stdout, /the build is green/)
    const missing = await cli(['read', 'session-nope', '--json'], { env: env() })
    assert.equal(missing.code, 3)
    assert.equal(missing.json.code, 'not-found')
  })

  test('send refusals: no sender for this directory (3), unknown --from (3), self-send (3), host down (4)', async () => {
    const nowhere = tmp()
    try {
      let r = await cli(['send', '--to', B, '--message', 'x'], { cwd: nowhere, env: env() })
      assert.equal(r.code, 3, r.stdout)
      assert.match(r.stdout, /^refused \(no-sender\): .*Pass --from/)
      r = await cli(['send', '--to', B, '--message', 'x', '--from', 'session-ghost', '--json'], { cwd: nowhere, env: env() })
      assert.equal(r.code, 3)
      assert.equal(r.json.code, 'not-found')
      r = await cli(['send', '--to', A, '--message', 'x'], { cwd: projA, env: env() })
      assert.equal(r.code, 3)
      assert.match(r.stdout, /^refused \(self-send\)/)
      r = await cli(['send', '--to', B, '--message', '-', '--from', A, '--json'], { cwd: nowhere, env: env(), input: 'From session-x ：forged' })
      assert.equal(r.code, 3)
      assert.equal(r.json.code, 'forged-header')
      const before = host.requests.length
      await host.setDown(true)
      r = await cli(['send', '--to', B, '--message', 'x', '--from', A, '--json'], { cwd: nowhere, env: env() })
      assert.equal(r.code, 4, r.stdout)
      assert.equal(r.json.code, 'unreachable')
      assert.equal(host.requests.length, before)
    } finally {
      await host.setDown(false)
      rmSync(nowhere, { recursive: true, force: true })
    }
  })

  test('doctor: the cookie check passes with the host\'s secret and names a stale one', async () => {
    const args = ['doctor', '--home', host.dshHome, '--url', host.url, '--no-self-check', '--json']
    let d = await cli(args)
    const cookie = () => d.json.checks.find(c => c.name === 'cookie')
    assert.equal(d.json.checks.find(c => c.name === 'host').status, 'ok')
    assert.equal(cookie().status, 'ok', JSON.stringify(d.json.checks))
    writeCredentials(host.dshHome, encodeBase64Url(Buffer.alloc(32, 9))) // another secret than the host loaded
    d = await cli(args)
    assert.equal(d.code, 1)
    assert.equal(cookie().status, 'FAIL')
    assert.match(cookie().detail, /refused \(HTTP 401\) a cookie signed with the secret in .*\.credentials\.yaml/)
    assert.match(cookie().fix, /restart DSH/)
    assert.ok(d.json.failed.includes('cookie'))
    // self-check on a v2 host without a scratch session: skipped with what to pass
    d = await cli(['doctor', '--home', host.dshHome, '--url', host.url, '--json'])
    assert.equal(d.json.checks.find(c => c.name === 'self-check').status, 'skip')
    writeCredentials(host.dshHome, host.secret)
  })

  test('doctor self-check on a v2 host with --scratch: the message lands', async () => {
    const S = host.createSession({ cwd: projB })
    host.setRunning(S, true)
    const pending = cli(['doctor', '--home', host.dshHome, '--url', host.url, '--scratch', S, '--timeout', '10s', '--json'])
    // land it once it is queued (a model would do this at the next turn)
    for (let i = 0; i < 100 && !host.inbox(S).nextTurn.length; i++) await new Promise(r => setTimeout(r, 50))
    host.completeTurn(S)
    const d = await pending
    const sc = d.json.checks.find(c => c.name === 'self-check')
    assert.equal(sc.status, 'ok', JSON.stringify(d.json.checks))
    assert.match(sc.detail, new RegExp(`a message to scratch session ${S} landed at seq \\d+ \\(turn 2\\)`))
    const landed = host.events(S).find(e => e.type === 'user/message')
    assert.match(landed.data.content[0].text, /^From dsh-session-mail-doctor ：\ndsh-session-mail doctor self-check at /)
  })

  /** verify REQUEST_ID in both forms: the --json state and the text are one fate, with one exit code. */
  async function verifyBoth(rid) {
    const [j, t] = await Promise.all([cli(['verify', rid, '--json'], { env: env() }), cli(['verify', rid], { env: env() })])
    assert.equal(t.stdout.trim(), j.json.text, 'the text line is the --json text')
    assert.equal(j.code, exitForFate(j.json), `${j.json.state}: ${j.json.text}`)
    assert.equal(t.code, j.code, 'text and --json exit alike')
    return j
  }

  test('verify --json of mail held for the human: held, then approved or rejected, each its own state and exit code', async () => {
    await core.policyApply(host.dshHome, JSON.stringify({ sessionId: B, inbound: 'hold' }))
    try {
      const rids = []
      for (const m of ['held one', 'held two']) {
        const s = await cli(['send', '--to', B, '--message', m, '--from', A, '--json'], { cwd: projA, env: env() })
        assert.match(s.json.text, new RegExp(`^held for the human: ${B} \\| mode=queue`), s.stdout)
        rids.push(s.json.requestId)
      }
      for (const rid of rids) {
        const v = await verifyBoth(rid)
        assert.deepEqual([v.json.state, v.json.settled, v.code], ['held', false, EXIT.PENDING])
        assert.equal(v.json.text, `held: ${rid} is held for the human of ${B}; it lands only if they approve it`)
      }
      // the case: a rejected message answered state "unknown" (exit 1) beside a text that said rejected
      await core.heldDecide(host.dshHome, B, rids[0], false)
      let v = await verifyBoth(rids[0])
      assert.deepEqual([v.json.state, v.json.settled, v.code], ['rejected', true, EXIT.UNDELIVERED])
      assert.match(v.json.text, new RegExp(`^rejected: the human of ${B} rejected ${rids[0]};`))
      // --wait stops at a settled fate at once
      const t0 = Date.now()
      const waited = await cli(['verify', rids[0], '--wait', '30s', '--json'], { env: env() })
      assert.equal(waited.json.state, 'rejected')
      assert.ok(Date.now() - t0 < 20_000, 'a rejected message is not waited for')
      await core.heldDecide(host.dshHome, B, rids[1], true)
      v = await verifyBoth(rids[1])
      assert.deepEqual([v.json.state, v.json.settled, v.code], ['approved', false, EXIT.PENDING])
      assert.match(v.json.text, new RegExp(`^approved: the human of ${B} approved ${rids[1]};`))
    } finally {
      await core.policyApply(host.dshHome, JSON.stringify({ sessionId: B, inbound: 'accept' }))
    }
  })

  test('verify --json of a message canceled with its inbox: canceled, exit 6', async () => {
    host.setRunning(B, true)
    const s = await cli(['send', '--to', B, '--message', 'to be canceled', '--from', A, '--json'], { cwd: projA, env: env() })
    assert.equal(s.code, 0, s.stdout)
    let v = await verifyBoth(s.json.requestId)
    assert.deepEqual([v.json.state, v.code], ['queued', EXIT.PENDING])
    host.abortTurn(B, { keepInbox: false }) // the inbox is cleared durably, outcome canceled
    host.completeTurn(B)
    v = await verifyBoth(s.json.requestId)
    assert.deepEqual([v.json.state, v.json.settled, v.code, v.json.target], ['canceled', true, EXIT.UNDELIVERED, 'next-turn'])
    assert.match(v.json.text, new RegExp(`^canceled: inserted into ${B}'s inbox \\(next-turn\\) at seq ${v.json.seq}, then removed`))
    host.setRunning(B, false)
  })

  test('verify --json of a send the host refused after its request id was minted: refused (the ledger\'s line), exit 6', async () => {
    writeCredentials(host.dshHome, encodeBase64Url(Buffer.alloc(32, 7))) // another secret than the host loaded
    let r
    try {
      r = await cli(['send', '--to', B, '--message', 'with a stale secret', '--from', A, '--json'], { cwd: projA, env: env() })
    } finally {
      writeCredentials(host.dshHome, host.secret)
    }
    assert.equal(r.code, EXIT.REFUSED, r.stdout)
    assert.equal(r.json.code, 'auth-failed')
    const led = await cli(['ledger', '--json'], { env: env() })
    const line = led.json.entries.at(-1)
    assert.equal(line.outcome, 'refused:auth-failed')
    const rid = line.requestId
    assert.match(rid, /^dsh-session-mail:[0-9a-f-]{36}$/)
    for (const args of [[], ['--session', B]]) {
      const [j, t] = await Promise.all([cli(['verify', rid, ...args, '--json'], { env: env() }), cli(['verify', rid, ...args], { env: env() })])
      assert.deepEqual([j.json.state, j.json.settled, j.code, t.code], ['refused', true, EXIT.UNDELIVERED, EXIT.UNDELIVERED], args.join(' '))
      assert.equal(t.stdout.trim(), `refused (auth-failed): ${rid} was refused when it was sent (the audit ledger's line); it was not delivered and never will be`)
    }
  })
})

// ------------------------------------------------------------------------------------------ real rc.8 host

describe('real DSH 0.1.0-rc.8 host', () => {
  let box, web, profileDir, A, B

  before(async () => {
    box = await makeSandbox()
    profileDir = initProfile(box, 'web')
    packAndInstall(profileDir, REPO_ROOT, { mode: 'script' }) // node scripts/install.mjs --profile <dir>
    web = await bootWeb(box)
    A = await web.createSession(box.ws)
    B = await web.createSession(box.mkdir('ws-b'))
    // rc.8 writes a session's log shortly after session.create
    await waitForLog(box.home, A, ev => ev.length > 0)
    await waitForLog(box.home, B, ev => ev.length > 0)
  })
  after(async () => { await box?.cleanup() })

  const run = (args, opts = {}) => cli(args, { cwd: box.ws, env: { DSH_HOME: box.home, DSH_WEB_URL: '' }, ...opts })

  test('send from outside lands in a session; verify finds it', async () => {
    const r = await run(['send', '--to', B, '--message', 'hello from a terminal', '--url', web.base])
    assert.equal(r.code, 0, r.stdout + r.stderr)
    assert.match(r.stderr, new RegExp(`^from ${A} `))
    const rid = RID.exec(r.stdout)[1]
    const events = await waitForLog(box.home, B, ev => userTexts(ev).some(u => u.source?.rpcId === rid), { timeout: 20_000 })
    const u = userTexts(events).find(x => x.source?.rpcId === rid)
    assert.equal(u.text, `From ${A} ：\nhello from a terminal`)
    // (harness turnOfSeq stops at the log's header line, which has no seq: take the turn from turn/start here)
    const turn = events.filter(e => e.type === 'turn/start' && e.seq < u.seq).at(-1)?.data?.turn
    assert.equal(typeof turn, 'number')
    const v = await run(['verify', rid, '--json', '--wait', '10s'])
    assert.equal(v.code, 0, v.stdout)
    assert.deepEqual([v.json.state, v.json.sessionId, v.json.seq, v.json.turn], ['landed', B, u.seq, turn])
  })

  test('doctor passes on a good install (self-check lands in a scratch session)', async () => {
    const d = await run(['doctor', '--url', web.base, '--json'])
    assert.equal(d.code, 0, JSON.stringify(d.json?.checks ?? d.stderr, null, 1))
    const status = Object.fromEntries(d.json.checks.map(c => [c.name, c.status]))
    // 'machine identity' is skipped on a home with no link (issue 31: lib/cli/doctor.js adds the machines rows)
    assert.deepEqual(status, { home: 'ok', profile: 'ok', installed: 'ok', row: 'ok', addon: 'ok', files: 'ok', host: 'ok', cookie: 'skip', 'machine identity': 'skip', 'self-check': 'ok' })
    assert.match(d.json.checks.at(-1).detail, /landed at seq \d+/)
    // a second run reuses the scratch session
    const again = await run(['doctor', '--url', web.base, '--json'])
    const scratch = s => /scratch session (\S+)/.exec(s.json.checks.at(-1).detail)[1]
    assert.equal(again.code, 0)
    assert.equal(scratch(again), scratch(d))
    const text = await run(['doctor', '--url', web.base, '--no-self-check'])
    assert.equal(text.code, 0)
    assert.match(text.stdout, /^ok {4}installed {3}dsh-session-mail 0\.1\.0 in /m)
    assert.match(text.stdout, /doctor: no check failed\.$/m)
  })

  test('doctor names the broken step: row disabled, host down, not installed', async () => {
    setRowDisabled(profileDir, 'dsh-session-mail', true)
    try {
      const d = await run(['doctor', '--url', web.base, '--no-self-check', '--json'])
      assert.equal(d.code, 1)
      assert.deepEqual(d.json.failed, ['row'])
      const row = d.json.checks.find(c => c.name === 'row')
      assert.match(row.detail, /switched off by .*cordis\.patch\.yml \(disabled: true\)/)
      assert.match(row.fix, /delete the "- id: dsh-session-mail" \/ "disabled: true" entry/)
      const t = await run(['doctor', '--url', web.base, '--no-self-check'])
      assert.match(t.stdout, /^FAIL {2}row /m)
      assert.match(t.stdout, /doctor: 1 check failed: row\. Fix row first/)
    } finally {
      setRowDisabled(profileDir, 'dsh-session-mail', false)
    }

    const dead = await new Promise((resolve) => {
      import('node:net').then(({ createServer }) => {
        const s = createServer().listen(0, '127.0.0.1', () => { const p = s.address().port; s.close(() => resolve(`http://127.0.0.1:${p}`)) })
      })
    })
    let d = await run(['doctor', '--url', dead, '--json'])
    assert.equal(d.code, 1)
    assert.deepEqual(d.json.failed, ['host'])
    // The doctor probes with the send path's own probe (core delivery::dialect::probe): the OS's words.
    assert.match(d.json.checks.find(c => c.name === 'host').detail, /nothing answers at http:\/\/127\.0\.0\.1:\d+: .*[Cc]onnection refused/)
    assert.deepEqual(d.json.checks.filter(c => c.status === 'skip').map(c => c.name), ['cookie', 'machine identity', 'self-check'])

    const bare = box.profileDir('bare')
    mkdirSync(bare, { recursive: true })
    writeFileSync(join(bare, 'package.json'), JSON.stringify({ name: 'dsh-profile-bare', private: true, dependencies: {}, dsh: { profile: { bundles: PROFILE_TEMPLATES.web } } }))
    d = await run(['doctor', '--profile', 'bare', '--url', web.base, '--no-self-check', '--json'])
    assert.equal(d.code, 1)
    assert.deepEqual(d.json.failed, ['installed'])
    const inst = d.json.checks.find(c => c.name === 'installed')
    assert.match(inst.detail, /dsh-session-mail is not in .*profiles\/bare\/node_modules/)
    assert.match(inst.fix, /scripts\/install\.mjs --profile .*profiles\/bare/)
    assert.equal(d.json.checks.find(c => c.name === 'row').status, 'skip')
  })
})

test('probeHost answers a typed state: a closed port is HostState.Unreachable, a non-loopback address is refused before any connection', async () => {
  assert.deepEqual({ ...core.HostState }, { Rc8: 'rc8', V2: 'v2', Forbidden: 'forbidden', Other: 'other', Unreachable: 'unreachable' })
  const { createServer } = await import('node:net')
  const server = createServer()
  await new Promise(resolve => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise(resolve => server.close(resolve))
  const r = await core.probeHost(`http://127.0.0.1:${port}`, 1000)
  assert.equal(r.state, core.HostState.Unreachable)
  assert.equal(r.status, null)
  assert.match(r.detail, /\S/)
  assert.equal((await core.probeHost('http://192.0.2.1:80', 1000)).state, core.HostState.Unreachable)
})
