// The Node gate of a suite that needs a Node inside package.json's `engines` range: call it before any
// import that a too-old Node cannot link (e.g. `zstdCompressSync` from node:zlib, Node >= 22.15), so
// the run ends with one line naming the Node it needs instead of a SyntaxError from the module linker.
// Only node: built-ins are imported here, so this module itself loads on any Node.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import * as zlib from 'node:zlib' // a namespace import links on any Node; a named one would not

const ROOT = new URL('../../', import.meta.url)

/** The engines range, and whether this Node satisfies it (semver from the checkout's node_modules). */
export function nodeSupport(version = process.versions.node) {
  const range = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8')).engines.node
  let semver
  try {
    semver = createRequire(new URL('package.json', ROOT))('semver')
  } catch {
    semver = undefined // no `npm ci` yet: judge by the feature the suites need first
  }
  const ok = semver ? semver.satisfies(version, range) : typeof zlib.zstdCompressSync === 'function'
  return { ok, range }
}

/** Exit with one line on stderr when this Node is outside the engines range. */
export function requireSupportedNode(suite) {
  const { ok, range } = nodeSupport()
  if (ok) return
  process.stderr.write(`${suite} needs Node ${range} (package.json "engines"); this is Node ${process.version}.\n`)
  process.exit(1)
}
