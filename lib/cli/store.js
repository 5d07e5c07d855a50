// `list` and `read`: the session store through the core, with the tools' own text on a terminal
// and structured JSON for scripts. The CLI runs outside the host, so it has no live registry: every
// row is `cold` (a session that is running right now shows as cold too) and reads come from the log
// file, which lags a live session by ~200 ms.
import { exitFor, intOption, parse } from './args.js'
import { core, toolRequest } from './core.js'
import { resolveDshHome } from '../home.js'

const LIST_HELP = `usage: dsh-session-mail list [--query Q] [--scope top-level|subagents|all] [--live-only]
                           [--limit N] [--json] [--home DIR]

The sessions of this host, newest first, as the sessions_list tool shows them.

  --query Q        case-insensitive text in the id, title, cwd or preset
  --scope S        top-level (default), subagents or all
  --live-only      only live sessions (the CLI sees none: it has no live registry)
  --limit N        at most N rows, 1-200 (default 50)
  --json           {ok, shown, considered, rows:[{id, liveness, scope, forkOf, parentSession, cwd,
                   preset, title, createdAt, messageable, hint}], notes}
  --home DIR       DSH_HOME (default: $DSH_HOME, else ~/.dsh)

Rows say "cold" because the command line reads the store, not the running host.
Exit: 0 listed, 2 bad usage.
`

const READ_HELP = `usage: dsh-session-mail read ID [--max N] [--since SEQ] [--include-injected] [--include-system]
                           [--max-chars N] [--json] [--home DIR]

A window of one session's messages, newest first, as the sessions_read tool shows it.

  --max N              at most N messages, 1-100 (default 50)
  --since SEQ          only what came after SEQ (an earlier read's "captured through seq")
  --include-injected   also harness-injected context (reminders, memory snapshots)
  --include-system     also system/developer messages and plugin notices
  --max-chars N        cut each message at N characters (default 4000, at least 16)
  --json               {ok, session:{id, cwd, title, readable, capturedThroughSeq, logPath},
                       messages:[{seq, role, label, request, injected, replaced, error, body,
                       truncatedChars}], omitted, hidden, notes}
  --home DIR           DSH_HOME (default: $DSH_HOME, else ~/.dsh)

A message this plugin delivered shows request=dsh-session-mail:… in its header.
Exit: 0 read, 2 bad usage, 3 no such session.
`

/** Run a store call; on a TTY, say so on stderr when a cold scan takes more than a second. */
async function withProgress(what, home, promise, { stderr = process.stderr } = {}) {
  if (!stderr.isTTY) return promise
  const t0 = Date.now()
  let shown = false
  const tick = () => {
    shown = true
    stderr.write(`\r\x1b[K${what} under ${home}/sessions … ${Math.round((Date.now() - t0) / 1000)} s (reading every log once)`)
  }
  const timer = setInterval(tick, 1000)
  try {
    return await promise
  } finally {
    clearInterval(timer)
    if (shown) stderr.write('\r\x1b[K')
  }
}

/**
 * Run `req` and print it: with `asData` (`--json`) the core's data call as JSON, else the tool's text;
 * the exit code comes from the typed outcome either way.
 */
async function printOutcome(out, asData, c, json, what, home) {
  if (asData !== null) {
    const v = await withProgress(what, home, asData.call(c, json))
    out.stdout(JSON.stringify(v, null, 2))
    return exitFor(v)
  }
  const r = await withProgress(what, home, c.run(json))
  out.stdout(r.text)
  return exitFor(r)
}

export async function list(argv, out) {
  const { help, values } = parse('list', argv, {
    query: { type: 'string' }, scope: { type: 'string' }, 'live-only': { type: 'boolean' },
    limit: { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  })
  if (help) return out.help(LIST_HELP)
  const limit = intOption('list', values, 'limit', 1, 200)
  const c = core()
  const home = resolveDshHome(values.home)
  const args = {}
  if (values.query !== undefined) args.query = values.query
  if (values.scope !== undefined) args.scope = values.scope
  if (values['live-only']) args.live_only = true
  if (limit !== undefined) args.limit = limit
  const req = toolRequest('sessions_list', args, { home, config: { maxListResults: Math.max(50, limit ?? 0) } })
  return printOutcome(out, values.json ? c.listSessions : null, c, req, 'scanning session logs', home)
}

export async function read(argv, out) {
  const { help, values, positionals } = parse('read', argv, {
    max: { type: 'string' }, since: { type: 'string' }, 'include-injected': { type: 'boolean' }, 'include-system': { type: 'boolean' },
    'max-chars': { type: 'string' }, json: { type: 'boolean' }, home: { type: 'string' },
  }, { positionals: ['ID'] })
  if (help) return out.help(READ_HELP)
  const max = intOption('read', values, 'max', 1, 100)
  const maxChars = intOption('read', values, 'max-chars', 16, 100_000_000)
  const since = intOption('read', values, 'since', 0, 1_000_000_000_000)
  const c = core()
  const home = resolveDshHome(values.home)
  const args = { session_id: positionals[0] }
  if (max !== undefined) args.max_messages = max
  if (since !== undefined) args.since_seq = since
  if (values['include-injected']) args.include_injected = true
  if (values['include-system']) args.include_system = true
  const config = { maxReadMessages: Math.max(50, max ?? 0) }
  if (maxChars !== undefined) config.maxMessageChars = maxChars
  const req = toolRequest('sessions_read', args, { home, config })
  return printOutcome(out, values.json ? c.readSession : null, c, req, 'looking the session up', home)
}
