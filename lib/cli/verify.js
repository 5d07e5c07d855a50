// `verify` (where did a request id go?) and `ledger` (the audit ledger of every send attempt).
import { EXIT, UsageError, durationOption, exitForFate, parse } from './args.js'
import { core } from './core.js'
import { resolveDshHome } from '../home.js'

const VERIFY_HELP = `usage: dsh-session-mail verify REQUEST_ID [--session ID] [--wait DURATION] [--json] [--home DIR]

Where a message went, from the session logs, the mailbox, the held store and the audit ledger.
REQUEST_ID is the "request: dsh-session-mail:…" line of a send receipt. The text line and --json's
state say the same fate:

  landed     in the target's log as a user message (seq, turn)                           exit 0
  queued     in the target's inbox (its log, or the memory of the process holding it)    exit 5
  waiting    in the mailbox of a session live in a process without a web server, or in   exit 5
             this home's outbox for a linked machine that has not answered yet
  held       kept for the human's decision (the target's inbound policy is hold)         exit 5
  approved   approved by the human, handed to the target's mailbox, not landed yet       exit 5
  lost       its holder stopped before it landed; re-delivered once the session is live  exit 5
  rejected   rejected by the human: never delivered                                      exit 6
  expired    held (or kept in the outbox) past its time: never delivered                 exit 6
  refused    refused when sent, or by the target's mailbox drain: never delivered        exit 6
  canceled   removed with its whole inbox before it landed: not delivered again          exit 6
  removed    removed from the queue by the human: not delivered again                    exit 6
  unknown    in no log, mailbox, held store or ledger line of this home                  exit 1

  --session ID       look only in this session's log (default: every session's log)
  --wait DURATION    poll until it has settled (landed or never delivered) or DURATION passed (e.g. 30s, 2m)
  --json             {requestId, state, settled, sessionId, seq, turn, target, searched, sessionMissing,
                     machine, text} (machine: {id, name} of a linked machine, else null)
  --home DIR         DSH_HOME (default: $DSH_HOME, else ~/.dsh)

The logs lag a live session by ~200 ms.
Exit: 0 landed, 5 not landed yet (may still land), 6 never delivered, 1 unknown, 2 bad usage.
`

const LEDGER_HELP = `usage: dsh-session-mail ledger [--since DURATION] [--session ID] [--limit N] [--json] [--home DIR]

The audit ledger: one line per send attempt through this plugin (accepted or refused), with time, sender,
target, tool, mode, request id, outcome, body length and SHA-256 — never the body. It lives in
$DSH_HOME/dsh-session-mail/ledger.jsonl (owner-only, rotated by size).

  --since DURATION   only attempts newer than DURATION (e.g. 30m, 2h)
  --session ID       only attempts sent by or to this session
  --limit N          only the newest N
  --json             {path, entries: [...], files, unreadable, tornTail}
Exit: 0 ok (also when empty), 1 the ledger could not be read, 2 bad usage.
`

const sleep = ms => new Promise(r => setTimeout(r, ms))

export async function verify(argv, out) {
  const { help, values, positionals } = parse('verify', argv, {
    session: { type: 'string' }, wait: { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  }, { positionals: ['REQUEST_ID'] })
  if (help) return out.help(VERIFY_HELP)
  const waitMs = durationOption('verify', values, 'wait') ?? 0
  const requestId = positionals[0].trim()
  const c = core()
  const home = resolveDshHome(values.home)
  if (!requestId.startsWith('dsh-session-mail:') && !values.json) {
    out.stderr(`note: ${JSON.stringify(requestId)} does not start with dsh-session-mail:; looking it up anyway`)
  }
  const deadline = Date.now() + waitMs
  let v
  for (;;) {
    v = await c.verifyRequest(home, requestId, values.session ?? null)
    if (v.settled || Date.now() >= deadline) break
    await sleep(250)
  }
  if (values.json) out.stdout(JSON.stringify(v, null, 2))
  else out.stdout(v.text)
  return exitForFate(v)
}

export async function ledger(argv, out) {
  const { help, values } = parse('ledger', argv, {
    since: { type: 'string' }, session: { type: 'string' }, limit: { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  })
  if (help) return out.help(LEDGER_HELP)
  const sinceMs = durationOption('ledger', values, 'since')
  let limit = null
  if (values.limit !== undefined) {
    limit = Number(values.limit)
    if (!Number.isInteger(limit) || limit < 1) throw new UsageError(`--limit must be a whole number >= 1; got ${JSON.stringify(values.limit)}`, 'ledger')
  }
  const c = core()
  const home = resolveDshHome(values.home)
  const r = await c.readLedger(home, values.session ?? null, sinceMs === undefined ? null : Date.now() - sinceMs, limit)
  if (!r.ok) {
    out.stderr(`ledger: ${r.error}`)
    return EXIT.FAILED
  }
  if (values.json) {
    const { text: _text, ...data } = r
    out.stdout(JSON.stringify(data, null, 2))
  } else if (r.entries.length === 0) {
    out.stdout(`no send attempts recorded${values.session ? ` for ${values.session}` : ''} (${r.path})`)
  } else {
    out.stdout(r.text.trimEnd())
    if (r.tornTail) out.stderr('note: the last line is being written (or was torn by a crash) and is not shown')
    if (r.unreadable > 0) out.stderr(`note: ${r.unreadable} unreadable line(s) skipped`)
  }
  return EXIT.OK
}
