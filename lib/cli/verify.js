// `verify` (where did a request id go?) and `ledger` (the audit ledger; not in this build yet).
import { EXIT, durationOption, parse } from './args.js'
import { core, json } from './core.js'

export const VERIFY_HELP = `usage: dsh-session-mail verify REQUEST_ID [--session ID] [--wait DURATION] [--json] [--home DIR]

Where a message went, from the session logs: landed (seq, turn), queued in the inbox, canceled,
or unknown. REQUEST_ID is the "request: dsh-session-mail:…" line of a send receipt.

  --session ID       look only in this session's log (default: every session's log)
  --wait DURATION    poll until it has landed or DURATION passed (e.g. 30s, 2m)
  --json             {requestId, state: landed|queued|canceled|unknown, sessionId, seq, turn,
                     target, searched}
  --home DIR         DSH_HOME (default: $DSH_HOME, else ~/.dsh)

The logs lag a live session by ~200 ms.
Exit: 0 landed, 5 queued or canceled (not landed), 1 unknown, 2 bad usage.
`

export const LEDGER_HELP = `usage: dsh-session-mail ledger [--since DURATION] [--session ID] [--json] [--home DIR]

The audit ledger of messages this plugin sent. Not available in this build.
Exit: 1 (not available), 2 bad usage.
`

const sleep = ms => new Promise(r => setTimeout(r, ms))

function describe(v, home) {
  const where = v.sessionId ? `session ${v.sessionId}` : 'no session'
  switch (v.state) {
    case 'landed':
      return `landed in ${v.sessionId} at seq ${v.seq}${v.turn === null || v.turn === undefined ? '' : ` (turn ${v.turn})`}`
    case 'queued':
      return `queued in ${v.sessionId} at seq ${v.seq} (inbox ${v.target}); not landed yet: it lands when that session's ${v.target === 'next-step' ? 'next step starts' : 'current turn ends'}`
    case 'canceled':
      return `canceled: inserted into ${v.sessionId}'s inbox (${v.target}) at seq ${v.seq}, then removed before it landed`
    default:
      if (v.sessionMissing) return `unknown: ${where} is not in ${home}/sessions (or its log cannot be read)`
      if (v.sessionId) return `unknown: ${v.requestId} is not in the log of ${v.sessionId}`
      return `unknown: ${v.requestId} is in none of the ${v.searched} session logs under ${home}/sessions`
  }
}

export async function verify(argv, out) {
  const { help, values, positionals } = parse('verify', argv, {
    session: { type: 'string' }, wait: { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  }, { positionals: ['REQUEST_ID'] })
  if (help) return out.help(VERIFY_HELP)
  const waitMs = durationOption('verify', values, 'wait') ?? 0
  const requestId = positionals[0].trim()
  const c = core()
  const home = c.resolveDshHome(values.home ?? null)
  if (!requestId.startsWith('dsh-session-mail:') && !values.json) {
    out.stderr(`note: ${JSON.stringify(requestId)} does not start with dsh-session-mail:; looking it up anyway`)
  }
  const deadline = Date.now() + waitMs
  let v
  for (;;) {
    v = json(await c.verifyRequestJson(JSON.stringify({ dshHome: home, requestId, sessionId: values.session ?? null })))
    if (v.state === 'landed' || v.state === 'canceled' || Date.now() >= deadline) break
    await sleep(250)
  }
  if (values.json) out.stdout(JSON.stringify(v, null, 2))
  else out.stdout(describe(v, home))
  if (v.state === 'landed') return EXIT.OK
  if (v.state === 'queued' || v.state === 'canceled') return EXIT.PENDING
  return EXIT.FAILED
}

export async function ledger(argv, out) {
  const { help, values } = parse('ledger', argv, {
    since: { type: 'string' }, session: { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  })
  if (help) return out.help(LEDGER_HELP)
  durationOption('ledger', values, 'since')
  const text = 'ledger: not available in this build (the audit ledger ships with a later version). '
    + 'To check one message, use: dsh-session-mail verify <request id>'
  if (values.json) out.stdout(JSON.stringify({ available: false, text }, null, 2))
  else out.stderr(text)
  return EXIT.FAILED
}
