#!/usr/bin/env node
// dsh-session-mail: list, read, send, verify and doctor from a terminal or a script.
// `dsh-session-mail --help`; the commands live in lib/cli/.
const [major] = process.versions.node.split('.').map(Number)
if (major < 20) {
  process.stderr.write(`dsh-session-mail: needs Node 20 or newer; this is ${process.version}\n`)
  process.exit(1)
}
const { main } = await import('../lib/cli/main.js')
process.exitCode = await main(process.argv.slice(2))
