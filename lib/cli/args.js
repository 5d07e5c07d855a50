// Argument parsing for the dsh-session-mail command line and scripts/install.mjs: node:util parseArgs with our
// own messages (worded from its tokens, never from the text of its errors), plus the checks parseArgs does not
// do (integers, required options, positionals).
import { parseArgs } from 'node:util'

/** Exit codes (also in `dsh-session-mail --help`). */
export const EXIT = Object.freeze({
  OK: 0,
  FAILED: 1, // a check failed, a request id is unknown, an internal error
  USAGE: 2, // bad usage: unknown option, missing or malformed value
  REFUSED: 3, // the core refused (send: not-found, self-send, forged-header, auth-failed, …; read: not-found)
  UNREACHABLE: 4, // the host is down, or the message MAY have landed
  PENDING: 5, // verify: not landed yet, and it may still land (queued, waiting, held, approved, lost)
  UNDELIVERED: 6, // verify: not delivered, and it never will be (rejected, expired, refused, canceled, removed)
})

/**
 * verify: the exit code of each fate (binding.d.ts `FateState`, crates/core/src/fate.rs — the one enum of
 * docs/architecture.md "Fates"). Every state the binding exports has one (test/cli.test.mjs checks each).
 */
const FATE_EXIT = Object.freeze({
  landed: EXIT.OK,
  queued: EXIT.PENDING,
  waiting: EXIT.PENDING,
  held: EXIT.PENDING,
  approved: EXIT.PENDING,
  lost: EXIT.PENDING,
  rejected: EXIT.UNDELIVERED,
  expired: EXIT.UNDELIVERED,
  refused: EXIT.UNDELIVERED,
  canceled: EXIT.UNDELIVERED,
  removed: EXIT.UNDELIVERED,
  unknown: EXIT.FAILED,
})

/**
 * The exit code of a request's fate, keyed on its typed `state` (a state this version does not know is
 * FAILED, as unknown is).
 * @param {{ state: string }} fate
 */
export function exitForFate(fate) {
  return Object.hasOwn(FATE_EXIT, fate.state) ? FATE_EXIT[fate.state] : EXIT.FAILED
}

/**
 * The one exit code of a tool outcome, keyed on its typed refusal code (binding.d.ts `RefusalCode`; the
 * CLI's own `no-sender` and `not-found` refusals use the same codes): no code → OK, `bad-argument` → USAGE,
 * `unreachable` (the host is down, or the message MAY have landed) → UNREACHABLE, any other → REFUSED.
 * list, read and send (text and --json) all map through here.
 * @param {{ code?: string | null }} outcome
 */
export function exitFor(outcome) {
  const code = outcome.code ?? null
  if (code === null) return EXIT.OK
  if (code === 'bad-argument') return EXIT.USAGE
  if (code === 'unreachable') return EXIT.UNREACHABLE
  return EXIT.REFUSED
}

/** A usage error: printed with the command's usage line, exit 2. */
export class UsageError extends Error {
  constructor(message, command) {
    super(message)
    this.command = command
  }
}

/**
 * Parse `argv` for one command.
 * @param {string} command - for messages
 * @param {string[]} argv
 * @param {Record<string, {type: 'string'|'boolean', short?: string}>} options
 * @param {{ positionals?: string[] }} [spec] - names of the positionals the command takes (all required)
 */
export function parse(command, argv, options, { positionals = [] } = {}) {
  const all = { help: { type: 'boolean', short: 'h' }, ...options }
  // Non-strict with tokens: parseArgs splits the command line, and the checks below word the refusals from
  // its tokens (never from the text of its own errors).
  const parsed = parseArgs({ args: argv, options: all, strict: false, allowPositionals: true, tokens: true })
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue
    const spec = all[token.name]
    const short = !token.rawName.startsWith('--')
    if (spec === undefined || (short && spec.short !== token.rawName.slice(1))) throw new UsageError(`unknown option ${token.rawName}`, command)
    if (spec.type === 'boolean' && token.inlineValue) throw new UsageError(`--${token.name} takes no value`, command)
    if (spec.type === 'string' && token.value === undefined) throw new UsageError(`--${token.name} needs a value`, command)
    // `--to --json`: the next word is an option, not the value (strict parseArgs calls it ambiguous)
    if (spec.type === 'string' && !token.inlineValue && token.value.length > 1 && token.value.startsWith('-')) { // `-` alone is stdin
      throw new UsageError(`--${token.name} needs a value (one that starts with "-" is written --${token.name}=${token.value})`, command)
    }
  }
  const { values } = parsed
  if (values.help) return { help: true, values, positionals: parsed.positionals }
  if (parsed.positionals.length > positionals.length) {
    const extra = parsed.positionals.slice(positionals.length).map(p => JSON.stringify(p)).join(' ')
    throw new UsageError(`unexpected argument${parsed.positionals.length - positionals.length > 1 ? 's' : ''} ${extra}`, command)
  }
  if (parsed.positionals.length < positionals.length) {
    throw new UsageError(`missing ${positionals[parsed.positionals.length]}`, command)
  }
  for (const [name, value] of Object.entries(values)) {
    if (typeof value === 'string' && value.trim() === '' && name !== 'message') {
      throw new UsageError(`--${name} needs a value`, command)
    }
  }
  return { help: false, values, positionals: parsed.positionals }
}

/** An integer option in [lo, hi], or `undefined` when absent. */
export function intOption(command, values, name, lo, hi) {
  const raw = values[name]
  if (raw === undefined) return undefined
  if (!/^\d+$/.test(raw.trim())) throw new UsageError(`--${name} must be an integer from ${lo} to ${hi}; got ${JSON.stringify(raw)}`, command)
  const n = Number(raw.trim())
  if (n < lo || n > hi) throw new UsageError(`--${name} must be an integer from ${lo} to ${hi}; got ${n}`, command)
  return n
}

/** A duration like `90s`, `15m`, `2h`, `1d` or plain seconds → milliseconds. */
export function durationOption(command, values, name) {
  const raw = values[name]
  if (raw === undefined) return undefined
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?$/.exec(raw.trim())
  if (!m) throw new UsageError(`--${name} must be a duration such as 30s, 15m, 2h or 1d; got ${JSON.stringify(raw)}`, command)
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] ?? 's']
  return Math.round(Number(m[1]) * unit)
}
