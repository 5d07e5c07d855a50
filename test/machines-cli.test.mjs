// Across machines (issue 31): the human's commands — link (invite, then its use on the other home),
// links, machines rename, unlink, doctor's machine rows — run as child processes the way a person runs
// them, on two temporary homes of this machine, bound on loopback (DSH_SESSION_MAIL_LINK_BIND), relays
// off: no packet leaves the machine.
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test test/machines-cli.test.mjs
//
// Needs the built addon (npm run build:test).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { EXIT } from '../lib/cli/args.js'
import { startCli as start, until } from './helpers/cli.mjs'

const cli = args => start(args).done

test('link, links, rename, unlink and doctor across two homes on loopback', async () => {
  const a = mkdtempSync(join(tmpdir(), 'dshm-a-'))
  const b = mkdtempSync(join(tmpdir(), 'dshm-b-'))
  try {
    // A invites: no DSH holds A's endpoint, so the command holds it and waits for the invite's use
    const inviting = start(['link', '--home', a, '--ttl-minutes', '5', '--json'])
    const made = JSON.parse(await until(() => { try { return JSON.stringify(JSON.parse(inviting.out())) } catch { return null } }))
    assert.equal(made.ok, true)
    assert.match(made.invite, /^dshm1[A-Za-z0-9_-]+$/)
    assert.ok(made.expiresAt > Date.now() + 4 * 60_000)
    // the machine key: owner-only, in the 0700 machine folder
    assert.equal(statSync(join(a, 'dsh-session-mail', 'machine', 'key')).mode & 0o777, 0o600)
    assert.equal(statSync(join(a, 'dsh-session-mail', 'machine')).mode & 0o777, 0o700)

    // bad usage and bad names are refused before anything is dialed
    assert.equal((await cli(['link', made.invite, '--home', b])).code, EXIT.USAGE)
    const badName = await cli(['link', made.invite, '--name', 'Not A Name', '--home', b, '--json'])
    assert.equal(badName.code, EXIT.REFUSED)
    // the error is the link crate's type as data: its kind, its field, its words
    assert.equal(badName.json.error.kind, 'bad-name')
    assert.equal(badName.json.error.name, 'Not A Name')
    assert.equal(badName.json.error.refused, true)
    assert.match(badName.json.error.message, /not a machine name/)

    // B uses it
    const joined = await cli(['link', made.invite, '--name', 'alpha', '--home', b, '--json'])
    assert.equal(joined.code, EXIT.OK, joined.stderr + joined.stdout)
    assert.equal(joined.json.link.name, 'alpha')
    const waited = await inviting.done
    assert.equal(waited.code, EXIT.OK, waited.stderr)

    // both ends list each other, under the ids their handshakes proved
    const lb = await cli(['links', '--home', b, '--json', '--no-probe'])
    const la = await cli(['links', '--home', a, '--json', '--no-probe'])
    assert.equal(lb.json.links.length, 1)
    assert.equal(la.json.links.length, 1)
    assert.equal(lb.json.links[0].id, la.json.id)
    assert.equal(la.json.links[0].id, lb.json.id)
    assert.equal(lb.json.links[0].relay, 'none')

    // the invite again, from a third home: A's command has exited once its invite was used, so nobody
    // answers for A — a failure to reach it (exit 1, kind 'call'), not a refusal; A's own refusal of a used
    // invite (kind 'invite-unknown') is crates/link/tests/two_machines.rs's
    const c = mkdtempSync(join(tmpdir(), 'dshm-c-'))
    const again = await cli(['link', made.invite, '--name', 'alpha2', '--home', c, '--json'])
    rmSync(c, { recursive: true, force: true })
    assert.equal(again.code, EXIT.FAILED, again.stdout)
    assert.equal(again.json.error.kind, 'call')
    assert.equal(again.json.error.refused, false)

    // rename (B's name for A), then the doctor names the identity and the link
    const ren = await cli(['machines', 'rename', 'alpha', 'laptop', '--home', b, '--json'])
    assert.equal(ren.code, EXIT.OK, ren.stdout)
    assert.equal(ren.json.link.name, 'laptop')
    const doc = await cli(['doctor', '--home', b, '--json', '--no-self-check'])
    const rows = Object.fromEntries(doc.json.checks.map(c => [c.name, c]))
    assert.equal(rows['machine identity'].status, 'ok')
    assert.match(rows['machine identity'].detail, new RegExp(lb.json.id))
    // A has no running holder: the link does not answer, and the doctor says so
    assert.equal(rows['link laptop'].status, 'FAIL')

    // unlink while A is offline: refused at B at once, A not told
    const un = await cli(['unlink', 'laptop', '--home', b, '--json'])
    assert.equal(un.code, EXIT.OK, un.stdout)
    assert.equal(un.json.told, false)
    assert.equal((await cli(['links', '--home', b, '--json', '--no-probe'])).json.links.length, 0)
    const gone = await cli(['unlink', 'laptop', '--home', b, '--json'])
    assert.equal(gone.code, EXIT.REFUSED)
    assert.deepEqual([gone.json.error.kind, gone.json.error.name], ['no-such-link', 'laptop'])
  } finally {
    rmSync(a, { recursive: true, force: true })
    rmSync(b, { recursive: true, force: true })
  }
})

test('Iroh\'s public relays are the human\'s explicit choice, refused under DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1 before anything is made or bound', async () => {
  const a = mkdtempSync(join(tmpdir(), 'dshm-pub-'))
  try {
    assert.match((await cli(['link', '--help'])).stdout, /--relay R +none .*public/s)
    // making an invite with it: refused (exit 3), typed, and this home has no machine folder: no key, no lease, no socket
    const made = await cli(['link', '--relay', 'public', '--home', a, '--json'])
    assert.equal(made.code, EXIT.REFUSED, made.stdout + made.stderr)
    assert.equal(made.json.error.kind, 'public-network-refused')
    assert.equal(made.json.error.var, 'DSH_SESSION_MAIL_NO_PUBLIC_NETWORK')
    assert.equal(made.json.error.refused, true)
    assert.match(made.json.error.message, /Iroh's public relays are refused here/)
    assert.equal(existsSync(join(a, 'dsh-session-mail', 'machine')), false)
    // the words without --json
    const text = await cli(['link', '--relay', 'public', '--home', a])
    assert.equal(text.code, EXIT.REFUSED)
    assert.match(text.stderr, /DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1 forbids the public network/)
    // using an invite that carries it (made elsewhere, by a machine without the guard): refused before it is dialed
    const inv = { id: 'ab'.repeat(32), addrs: ['127.0.0.1:9'], relay: 'public', secret: '07'.repeat(32), exp: Date.now() + 600_000 }
    const invite = 'dshm1' + Buffer.from(JSON.stringify(inv)).toString('base64url')
    const used = await cli(['link', invite, '--name', 'alpha', '--home', a, '--json'])
    assert.equal(used.code, EXIT.REFUSED, used.stdout + used.stderr)
    assert.equal(used.json.error.kind, 'public-network-refused')
    assert.equal(existsSync(join(a, 'dsh-session-mail', 'machine')), false)
    // not a relay choice at all: bad-relay, a refusal too
    const bogus = await cli(['link', '--relay', 'publik', '--home', a, '--json'])
    assert.equal(bogus.code, EXIT.REFUSED)
    assert.equal(bogus.json.error.kind, 'bad-relay')
  } finally {
    rmSync(a, { recursive: true, force: true })
  }
})
