// Seed 003's own command, `node --test test/mail.test.js`, under a Node below package.json's engines range
// must end with one line naming the Node it needs and a non-zero exit — not with the module linker's
// `SyntaxError: … does not provide an export named 'zstdCompressSync'`. Runs the suite under the machine's
// old Node (/usr/bin/node is v20 here; OLD_NODE overrides) and skips only when no such Node exists.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { nodeSupport } from './helpers/node-gate.mjs'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const OLD_NODE = process.env.OLD_NODE ?? '/usr/bin/node'
const oldVersion = existsSync(OLD_NODE) ? spawnSync(OLD_NODE, ['-p', 'process.versions.node'], { encoding: 'utf8' }).stdout.trim() : ''
const skip = !oldVersion ? `no Node at ${OLD_NODE} (set OLD_NODE)`
  : nodeSupport(oldVersion).ok ? `${OLD_NODE} is Node ${oldVersion}, inside the engines range: nothing to prove` : false
const { range } = nodeSupport()
// A child of a test runner must not think it is one of its test files (NODE_TEST_CONTEXT).
const { NODE_TEST_CONTEXT: _, ...env } = { ...process.env, NODE_OPTIONS: '' }
const needs = new RegExp(`^test/mail\\.test\\.js needs Node ${range.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} \\(package\\.json "engines"\\); this is Node v${oldVersion.replace(/\./g, '\\.')}\\.$`)

test('node --test test/mail.test.js under an old Node: one line naming the Node it needs, exit non-zero', { skip }, () => {
  const r = spawnSync(OLD_NODE, ['--test', 'test/mail.test.js'], { cwd: ROOT, encoding: 'utf8', env })
  const out = r.stdout + r.stderr
  assert.notEqual(r.status, 0, out)
  assert.doesNotMatch(out, /SyntaxError|does not provide an export/)
  // The runner relays the file's own output as `# ` lines before its `# Subtest:` line: exactly one.
  const own = out.split('\n').slice(0, out.split('\n').findIndex(l => l.startsWith('# Subtest:')))
    .filter(l => l.startsWith('# ')).map(l => l.slice(2))
  assert.equal(own.length, 1, out)
  assert.match(own[0], needs)
})

test('node test/mail.test.js under an old Node: stderr is that one line, stdout empty, exit 1', { skip }, () => {
  const r = spawnSync(OLD_NODE, ['test/mail.test.js'], { cwd: ROOT, encoding: 'utf8', env })
  assert.equal(r.status, 1, r.stderr)
  assert.equal(r.stdout, '')
  assert.match(r.stderr.replace(/\n$/, ''), needs)
  assert.equal(r.stderr.split('\n').filter(Boolean).length, 1)
})

test('the gate passes on this Node (the suites run here)', () => {
  assert.equal(nodeSupport().ok, true, `this Node ${process.version} is outside ${range}`)
})
