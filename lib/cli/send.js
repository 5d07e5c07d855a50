// `send`: deliver one message from outside any session, through the same core path as the
// send_session_message tool (the core writes the `From <sender> ：` header, mints the
// `dsh-session-mail:<uuid>` request id, picks the host generation and signs the v2 cookie).
import { readFileSync } from 'node:fs'
import { exitFor, parse, UsageError } from './args.js'
import { core, toolRequest } from './core.js'
import { hostUrl } from './host.js'
import { resolveDshHome } from '../home.js'

const SEND_HELP = `usage: dsh-session-mail send --to ID --message TEXT [--urgent] [--from ID]
                           [--url URL] [--home DIR] [--json]

Deliver TEXT into session ID as "From <sender> ：" + newline + TEXT, like send_session_message.

  --to ID          the target session (dsh-session-mail list shows ids)
  --message TEXT   what to say; "-" reads it from stdin
  --urgent         steer: land at the next step of the target's running turn (default: queue,
                   land when its current turn ends)
  --from ID        the sender written in the header (default: the most recently modified session
                   of the current directory's project, $DSH_HOME/sessions/<projectKey(cwd)>/)
  --url URL        the host's web server (default: $DSH_WEB_URL without its ?token=, else
                   ${'http://127.0.0.1:3080'})
  --home DIR       DSH_HOME (default: $DSH_HOME, else ~/.dsh); DSH 0.1.2+ signs with its
                   .credentials.yaml
  --json           {accepted, code, mayHaveLanded, requestId, from, to, url, text}

Check a delivery with: dsh-session-mail verify <request id>
Exit: 0 accepted, 2 bad usage, 3 refused (not-found, self-send, forged-header, auth-failed, …),
      4 host unreachable or the message MAY have landed (verify before sending again).
`

export async function send(argv, out) {
  const { help, values } = parse('send', argv, {
    to: { type: 'string' }, message: { type: 'string' }, urgent: { type: 'boolean' }, from: { type: 'string' },
    url: { type: 'string' }, home: { type: 'string' }, json: { type: 'boolean' },
  })
  if (help) return out.help(SEND_HELP)
  if (values.to === undefined) throw new UsageError('--to ID is required (the target session; dsh-session-mail list shows ids)', 'send')
  if (values.message === undefined) throw new UsageError('--message TEXT is required ("-" reads it from stdin)', 'send')
  const message = values.message === '-' ? readFileSync(0, 'utf8') : values.message
  const { url, source } = hostUrl(values.url, process.env, 'send')
  const c = core()
  const home = resolveDshHome(values.home)

  const report = (v, code) => {
    if (values.json) out.stdout(JSON.stringify(v, null, 2))
    else out.stdout(v.text)
    return code
  }

  let from = values.from
  let fromNote
  if (from === undefined) {
    const s = c.defaultSender(home, process.cwd())
    if (!s.ok) {
      const text = `refused (no-sender): there is no session to sign this message as: ${s.error}. `
        + 'Pass --from <your session id> (dsh-session-mail list shows ids). Nothing was sent.'
      const v = { accepted: false, code: 'no-sender', mayHaveLanded: false, requestId: null, from: null, to: values.to, url, text }
      return report(v, exitFor(v))
    }
    from = s.id
    fromNote = `from ${from} (the newest session of this directory's project ${s.project}; --from picks another)`
  } else {
    // The header is the reply address: a sender the store does not know could never be answered.
    const r = await c.readSession(toolRequest('sessions_read', { session_id: from, max_messages: 1 }, { home }))
    if (!r.ok) {
      const text = `refused (not-found): --from ${JSON.stringify(from)} is not a session in ${home}/sessions, so a reply to the From header `
        + 'could not be delivered. Pass your own session id (dsh-session-mail list shows ids). Nothing was sent.'
      const v = { accepted: false, code: 'not-found', mayHaveLanded: false, requestId: null, from, to: values.to, url, text }
      return report(v, exitFor(v))
    }
  }
  if (fromNote && !values.json) out.stderr(fromNote)
  if (source !== '--url' && !values.json) out.stderr(`host ${url} (${source === 'default' ? 'default; --url or DSH_WEB_URL to change' : source})`)

  const args = { toSessionId: values.to, message, ...(values.urgent ? { urgent: true } : {}) }
  const v = await c.run(toolRequest('send_session_message', args, { home, caller: from, baseUrl: url }))
  const result = { ...v, from, to: values.to, url }
  return report(result, exitFor(v))
}
