// Across machines (issue 31): the host's facts are asked of this process's JS thread when a linked machine's
// request arrives (src/lib.rs `here_of`, a napi threadsafe call whose answer comes back through a callback).
// Whatever that `here` does — throws, returns a rejected Promise, answers something that is not a request —
// the request is refused as the core refuses it (`unavailable`) and the process goes on: a JS exception on
// that call must never reach napi's fatal-exception path (which ends the host). The same two homes then
// answer with a `here` that works, so the refusals above are `here`'s and not a broken link.
//
// Two temporary homes of this machine, linked through the CLI as a person links them, bound on loopback
// (DSH_SESSION_MAIL_LINK_BIND), relays off: no packet leaves the machine. B's endpoint is held by this test
// process (machinesServeWith + machinesStart), A's by the same process for its calls.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test test/machines-here.test.mjs
//
// Needs the built addon (npm run build:test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadCore } from '../lib/native.js'
import { CLI_ENV, startCli as start, until } from './helpers/cli.mjs'

process.env.DSH_SESSION_MAIL_LINK_BIND = CLI_ENV.DSH_SESSION_MAIL_LINK_BIND
process.env.DSH_SESSION_MAIL_NO_PUBLIC_NETWORK = CLI_ENV.DSH_SESSION_MAIL_NO_PUBLIC_NETWORK

test('a here that throws, rejects or answers garbage refuses the request (unavailable) and the process goes on', async (t) => {
  const { core, error } = loadCore()
  assert.equal(error, undefined, String(error))
  const a = mkdtempSync(join(tmpdir(), 'dshm-here-a-'))
  const b = mkdtempSync(join(tmpdir(), 'dshm-here-b-'))
  t.after(async () => {
    await core.machinesStop(a).catch(() => {})
    await core.machinesStop(b).catch(() => {})
    rmSync(a, { recursive: true, force: true })
    rmSync(b, { recursive: true, force: true })
  })
  // A invites (the command holds A's endpoint meanwhile), B uses the invite under the name "beta" for A…
  const inviting = start(['link', '--home', b, '--ttl-minutes', '5', '--json'])
  const invite = await until(() => { try { return JSON.parse(inviting.out()).invite } catch { return null } })
  const joined = await start(['link', invite, '--name', 'beta', '--home', a, '--json']).done
  assert.equal(joined.code, 0, joined.stdout + joined.stderr)
  assert.equal((await inviting.done).code, 0)

  // B's facts come from `here`, swapped per case; A lists B's sessions over the link
  let here = () => { throw new Error('here broke') }
  let asked = 0
  core.machinesServeWith(b, (ask) => { asked += 1; return here(ask) })
  assert.equal(await core.machinesStart(b), true)
  assert.equal(await core.machinesStart(a), true)
  const listing = async () => {
    const r = JSON.parse(await core.machinesSessions(a, null, 5))
    return r.machines?.find(m => m.name === 'beta') ?? r
  }
  const facts = JSON.stringify({
    tool: 'sessions_list',
    args: {},
    caller: null,
    config: {},
    host: { dshHome: b, baseUrl: null, version: null, secret: null, profile: null },
    live: [],
  })
  const cases = [
    ['throws', () => { throw new Error('here broke') }],
    ['returns a rejected Promise', () => Promise.reject(new Error('here rejected'))],
    ['throws a non-Error', () => { throw Symbol('odd') }],
    ['answers what is not a request', () => 'not json at all'],
    ['answers a Promise of what is not a request', async () => '{"tool": 7}'],
  ]
  for (const [what, fn] of cases) {
    here = fn
    const before = asked
    // the endpoint may still be settling its first connection: wait for B to have been asked
    const m = await until(async () => { const m = await listing(); return asked > before ? m : null })
    assert.match(String(m.error), /unavailable/, `${what}: ${JSON.stringify(m)}`)
    assert.deepEqual(m.rows ?? [], [], what)
  }
  // a here that works: the same link answers, B's (empty) store listed without an error
  here = () => facts
  const ok = await until(async () => { const m = await listing(); return m.error == null ? m : null })
  assert.deepEqual(ok.rows, [])
  assert.equal(ok.error ?? null, null)
  // and once more a throw: still refused, still alive
  here = () => { throw new Error('again') }
  const again = await listing()
  assert.match(String(again.error), /unavailable/, JSON.stringify(again))
})
