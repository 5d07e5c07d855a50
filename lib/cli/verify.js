// `verify` (where did a request id go?) and `ledger` (the audit ledger of every send attempt).
import { EXIT, UsageError, durationOption, parse } from './args.js'
import { core } from './core.js'
import { resolveDshHome } from '../home.js'

const VERIFY_HELP = `usage: dsh-session-mail verify REQUEST_ID [--session ID] [--wait DURATION] [--json] [--home DIR]

Where a message went, from the session logs and the mailbox: landed (seq, turn), queued in the
inbox (held in that process's memory), lost with its process (re-delivered once the session is live
again), removed from the queue by the human, canceled, or unknown. REQUEST_ID is the
"request: dsh-session-mail:…" line of a send receipt.

  --session ID       look only in this session's log (default: every session's log)
  --wait DURATION    poll until it has landed or DURATION passed (e.g. 30s, 2m)
  --json             {requestId, state: landed|queued|canceled|lost|removed|unknown, sessionId, seq, turn,
                     target, searched, sessionMissing, text}
  --home DIR         DSH_HOME (default: $DSH_HOME, else ~/.dsh)

The logs lag a live session by ~200 ms.
Exit: 0 landed, 5 queued, lost, removed or canceled (not landed), 1 unknown, 2 bad usage.
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
    if (v.state === 'landed' || v.state === 'canceled' || v.state === 'removed' || Date.now() >= deadline) break
    await sleep(250)
  }
  if (values.json) out.stdout(JSON.stringify(v, null, 2))
  else out.stdout(v.text)
  if (v.state === 'landed') return EXIT.OK
  if (v.state === 'queued' || v.state === 'canceled' || v.state === 'lost' || v.state === 'removed') return EXIT.PENDING
  return EXIT.FAILED
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
