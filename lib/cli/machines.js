// Across machines (issue 31): the human links this DSH home with another one, lists, renames and unlinks
// them. Only these commands (and the web half's machines.* routes) link: no tool a model can call does.
// The core does the work (crates/link through the addon); this file parses, prints and maps exit codes.
import { EXIT, UsageError, intOption, parse } from './args.js'
import { core } from './core.js'
import { resolveDshHome } from '../home.js'

const LINK_HELP = `usage: dsh-session-mail link [--relay none|public|URL] [--ttl-minutes N] [--no-wait] [--json] [--home DIR]
       dsh-session-mail link INVITE --name NAME [--json] [--home DIR]

Link this DSH home with another machine's, once; from then on the tools reach its sessions.

Without INVITE: print a one-time invite for the other machine (its endpoint id, addresses, relay, a
secret, an expiry), then wait until it is used or expires (unless a running DSH on this home holds
the endpoint, or --no-wait). On the other machine run: dsh-session-mail link INVITE --name NAME.

  --relay R          none (default: direct addresses only: LAN, VPN, Tailscale, loopback), public
                     (Iroh's public relays, run by n0: they see both machines' IP addresses and
                     endpoint ids, and carry the encrypted traffic when no direct path works), or the
                     URL of your own iroh-relay. Refused where DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1.
  --ttl-minutes N    the invite's life, 1-1440 (default 10)
  --no-wait          print the invite and exit (a DSH process of this home must hold the endpoint)
  --name NAME        what this home calls the other machine: [a-z0-9][a-z0-9-]{0,31}
  --json             {ok, invite, expiresAt} / {ok, link:{id, name, relay, addrs, linkedAt}}
  --home DIR         DSH_HOME (default: $DSH_HOME, else ~/.dsh)

Exit: 0 linked / invite used, 1 failed or expired unused, 2 bad usage, 3 refused.
`

const LINKS_HELP = `usage: dsh-session-mail links [--no-probe] [--json] [--home DIR]

The machines this home is linked with: name, endpoint id, online now (and round trip), last seen.

  --no-probe   do not ask each machine for a round trip (offline rows then say "?")
  --json       {ok, id, holderPid, links:[{id, name, relay, addrs, linkedAt, online, lastSeen, rttMs, error}]}
Exit: 0 listed, 2 bad usage.
`

const UNLINK_HELP = `usage: dsh-session-mail unlink NAME [--json] [--home DIR]

Unlink a machine: refused here at once; the other machine is told and forgets this one (if it is
offline, it is refused at its next contact and forgets this one then).
Exit: 0 unlinked, 1 failed, 2 bad usage, 3 refused (no such link).
`

const MACHINES_HELP = `usage: dsh-session-mail machines rename NAME NEW [--json] [--home DIR]

Rename a linked machine (this home's name for it; its id stays).
Exit: 0 renamed, 1 failed, 2 bad usage, 3 refused.
`

async function done(c, home, code) {
  await c.machinesStop(home) // this process may have held the endpoint for the command: close it
  return code
}

// r.error is crates/link's LinkError as data: {kind, ...fields, message (its Display), refused}
function refusal(out, command, r) {
  out.stderr(`dsh-session-mail ${command}: ${r.error?.message ?? 'no answer'}`)
}

/** A link's relay as the human reads it: `none`, the public choice spelled out, or the relay's URL. */
const relayText = r => (r === 'public' ? "public (Iroh's public relays, run by n0)" : String(r ?? 'none'))

/** The exit code of a failed command: a refusal (bad input, a rule, the other side's no) or a failure. */
const failedCode = r => (r.error?.refused === true ? EXIT.REFUSED : EXIT.FAILED)

export async function link(argv, out) {
  // INVITE is optional: with it, this machine joins; without, it invites
  const joining = argv.some(a => a.startsWith('dshm1'))
  const { help, values, positionals } = parse('link', argv, {
    relay: { type: 'string' }, 'ttl-minutes': { type: 'string' }, name: { type: 'string' },
    'no-wait': { type: 'boolean' }, json: { type: 'boolean' }, home: { type: 'string' },
  }, { positionals: joining ? ['INVITE'] : [] })
  if (help) return out.help(LINK_HELP)
  const home = resolveDshHome(values.home)
  const c = core()
  if (positionals.length === 1) {
    if (values.name === undefined) throw new UsageError('--name NAME is needed with an invite', 'link')
    if (values.relay !== undefined || values['ttl-minutes'] !== undefined) throw new UsageError('--relay and --ttl-minutes belong to making an invite', 'link')
    const r = JSON.parse(await c.machinesLink(home, positionals[0], values.name))
    if (values.json) out.stdout(JSON.stringify(r, null, 2))
    else if (r.ok) out.stdout(`linked: ${r.link.name} (${r.link.id}), relay ${relayText(r.link.relay)}`)
    else refusal(out, 'link', r)
    return done(c, home, r.ok ? EXIT.OK : failedCode(r))
  }
  if (values.name !== undefined) throw new UsageError('--name goes with an invite: dsh-session-mail link INVITE --name NAME', 'link')
  const ttl = intOption('link', values, 'ttl-minutes', 1, 1440) ?? 10
  const r = JSON.parse(await c.machinesInvite(home, values.relay ?? 'none', ttl))
  if (!r.ok) {
    if (values.json) out.stdout(JSON.stringify(r, null, 2))
    else refusal(out, 'link', r)
    return done(c, home, failedCode(r))
  }
  if (values.json) out.stdout(JSON.stringify(r, null, 2))
  else {
    out.stdout(r.invite)
    out.stderr(`On the other machine: dsh-session-mail link ${r.invite.slice(0, 12)}… --name <name for this machine>`)
    out.stderr(`This invite works once, until ${new Date(r.expiresAt).toISOString()}.`)
  }
  const list = JSON.parse(await c.machinesList(home, false))
  if (values['no-wait'] || !list.thisProcessHolds) return done(c, home, EXIT.OK)
  // this process holds the endpoint: it answers the other machine until the invite is used or expires
  if (!values.json) out.stderr('Waiting for the other machine (Ctrl-C to stop; the invite then needs a running DSH here) …')
  const used = await c.machinesWaitInvite(home, r.invite, Math.max(0, r.expiresAt - Date.now()) + 1000)
  if (!values.json) out.stderr(used ? 'The other machine linked.' : 'The invite expired unused.')
  return done(c, home, used ? EXIT.OK : EXIT.FAILED)
}

function ago(ms) {
  if (ms == null) return 'never'
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000))
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.round(s / 60)}m ago` : `${Math.round(s / 3600)}h ago`
}

export async function links(argv, out) {
  const { help, values } = parse('links', argv, { 'no-probe': { type: 'boolean' }, json: { type: 'boolean' }, home: { type: 'string' } })
  if (help) return out.help(LINKS_HELP)
  const home = resolveDshHome(values.home)
  const c = core()
  const r = JSON.parse(await c.machinesList(home, !values['no-probe']))
  if (values.json) out.stdout(JSON.stringify(r, null, 2))
  else {
    out.stdout(`this machine: ${r.id ?? '(no identity yet)'}${r.holderPid ? `; endpoint held by pid ${r.holderPid}` : ''}`)
    if (r.unverified) out.stdout(`links.json is not believed: ${r.unverified}`)
    if (r.links.length === 0) out.stdout('no linked machines (dsh-session-mail link)')
    for (const l of r.links) {
      const state = l.online === true ? `online, ${l.rttMs.toFixed(1)} ms` : l.online === false ? `offline (${l.error})` : '?'
      out.stdout(`${l.name.padEnd(16)} ${l.id}  ${state}; last seen ${ago(l.lastSeen)}; relay ${relayText(l.relay)}`)
    }
  }
  return done(c, home, EXIT.OK)
}

export async function unlink(argv, out) {
  const { help, values, positionals } = parse('unlink', argv, { json: { type: 'boolean' }, home: { type: 'string' } }, { positionals: ['NAME'] })
  if (help) return out.help(UNLINK_HELP)
  const home = resolveDshHome(values.home)
  const c = core()
  const r = JSON.parse(await c.machinesUnlink(home, positionals[0]))
  if (values.json) out.stdout(JSON.stringify(r, null, 2))
  else if (r.ok) out.stdout(`unlinked ${r.link.name} (${r.link.id}); ${r.told ? 'it confirmed' : 'it was not reached: it is refused here and forgets this machine at its next contact'}`)
  else refusal(out, 'unlink', r)
  return done(c, home, r.ok ? EXIT.OK : failedCode(r))
}

export async function machines(argv, out) {
  const [sub, ...rest] = argv
  if (sub === undefined || sub === '--help' || sub === '-h') return out.help(MACHINES_HELP)
  if (sub !== 'rename') throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}; machines rename NAME NEW`, 'machines')
  const { help, values, positionals } = parse('machines', rest, { json: { type: 'boolean' }, home: { type: 'string' } }, { positionals: ['NAME', 'NEW'] })
  if (help) return out.help(MACHINES_HELP)
  const home = resolveDshHome(values.home)
  const c = core()
  const r = JSON.parse(await c.machinesRename(home, positionals[0], positionals[1]))
  if (values.json) out.stdout(JSON.stringify(r, null, 2))
  else if (r.ok) out.stdout(`renamed: ${positionals[0]} is now ${r.link.name} (${r.link.id})`)
  else refusal(out, 'machines', r)
  return done(c, home, r.ok ? EXIT.OK : failedCode(r))
}
