// dsh-session-mail command line: dispatch, help, and the mapping of errors to exit codes.
import { EXIT, UsageError } from './args.js'
import { CoreMissing, PACKAGE } from './core.js'
import { doctor } from './doctor.js'
import { link, links, machines, unlink } from './machines.js'
import { send } from './send.js'
import { list, read } from './store.js'
import { ledger, verify } from './verify.js'

const HELP = `usage: dsh-session-mail <command> [options]   (dsh-session-mail <command> --help for its options)

  list      the sessions of this host (as the sessions_list tool shows them)
  read ID   a window of one session's messages (as sessions_read shows it)
  send      deliver a message into a session, signed "From <sender> ："
  verify    where a sent message is: landed, queued, held, rejected, … (verify --help)
  ledger    the audit ledger of every send attempt (never the bodies)
  doctor    check the install, the host and one real delivery
  link      link this DSH home with another machine's (an invite, then its use there)
  links     the linked machines: name, id, online, round trip, last seen
  unlink    unlink a machine, on both ends at once
  machines  rename a linked machine

Common options: --home DIR (DSH_HOME; default $DSH_HOME, else ~/.dsh), --json (for scripts).
Exit codes: 0 ok, 1 failed / unknown, 2 bad usage, 3 refused, 4 host unreachable or may have
landed, 5 not landed yet (verify), 6 never delivered (verify).
`

const COMMANDS = { list, read, send, verify, ledger, doctor, link, links, unlink, machines }

/** Output sinks; tests and embedders can pass their own. */
export function stdio() {
  const line = stream => text => stream.write(text.endsWith('\n') ? text : `${text}\n`)
  const out = {
    stdout: line(process.stdout),
    stderr: line(process.stderr),
    help: (text) => { out.stdout(text); return EXIT.OK },
    usage: (command, message) => {
      out.stderr(`dsh-session-mail ${command}: ${message}`)
      out.stderr(`Run dsh-session-mail ${command === 'dsh-session-mail' ? '' : `${command} `}--help for usage.`)
    },
  }
  return out
}

/** Run one command line; resolves to the exit code. */
export async function main(argv, out = stdio()) {
  const [command, ...rest] = argv
  if (command === undefined || command === '-h' || command === '--help' || command === 'help') {
    if (command === 'help' && rest[0] && COMMANDS[rest[0]]) return COMMANDS[rest[0]](['--help'], out)
    out.stdout(HELP)
    return command === undefined ? EXIT.USAGE : EXIT.OK
  }
  if (command === '--version' || command === '-v' || command === 'version') {
    out.stdout(`${PACKAGE.name} ${PACKAGE.version}`)
    return EXIT.OK
  }
  const run = COMMANDS[command]
  if (run === undefined) {
    out.usage('dsh-session-mail', `unknown command ${JSON.stringify(command)}; commands: ${Object.keys(COMMANDS).join(', ')}`)
    return EXIT.USAGE
  }
  try {
    return await run(rest, out)
  } catch (e) {
    if (e instanceof UsageError) {
      out.usage(e.command ?? command, e.message)
      return EXIT.USAGE
    }
    if (e instanceof CoreMissing) {
      out.stderr(`dsh-session-mail ${command}: ${e.message}`)
      return EXIT.FAILED
    }
    out.stderr(`dsh-session-mail ${command}: internal error: ${e?.stack ?? e}`)
    return EXIT.FAILED
  }
}
