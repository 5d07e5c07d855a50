// No dead exports in the JS we ship and run: every `export`ed function/const/class of lib/, scripts/ and
// index.js is imported by name by another module of lib/, scripts/, bin/ or index.js (tests do not count),
// except the plugin contract cordis reads from index.js and the command line's documented output seam.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { productModules } from './helpers/js-modules.mjs'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const KEPT = new Map([
  ['index.js name', 'cordis plugin contract'],
  ['index.js inject', 'cordis plugin contract'],
  ['index.js Config', 'cordis plugin contract'],
  ['index.js apply', 'cordis plugin contract'],
  ['lib/cli/main.js stdio', 'output sinks for embedders (main(argv, out))'],
  ['scripts/build-client.mjs buildClient', 'the bundle test/client.test.mjs loads: what client/ builds to now, not a file on disk'],
])

function modules() {
  return productModules(ROOT).map(file => ({ file: relative(ROOT, file), text: readFileSync(file, 'utf8') }))
}

test('every export of lib/, scripts/ and index.js has a production importer', () => {
  const all = modules()
  const dead = []
  for (const { file, text } of all) {
    for (const m of text.matchAll(/^export\s+(?:async\s+)?(?:function\*?|const|let|class)\s+([A-Za-z_$][\w$]*)/gm)) {
      const name = m[1]
      if (KEPT.has(`${file} ${name}`)) continue
      // `import { name } from …` or `const { name } = await import(…)`
      const importer = new RegExp(`import\\s*\\{[^}]*\\b${name}\\b[^}]*\\}\\s*from|\\{[^}]*\\b${name}\\b[^}]*\\}\\s*=\\s*await\\s+import\\(`, 's')
      const importers = all.filter(other => other.file !== file && importer.test(other.text))
      if (importers.length === 0) dead.push(`${file}: ${name}`)
    }
  }
  assert.deepEqual(dead, [], 'exported but imported by no other shipped module (un-export or remove it)')
})

test('index.d.ts declares exactly what index.js exports', async () => {
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const declared = [...dts.matchAll(/^export\s+declare\s+(?:async\s+)?(?:function|const|let|class)\s+([A-Za-z_$][\w$]*)/gm)]
    .map(m => m[1])
  const real = Object.keys(await import('../index.js')).filter(k => k !== 'default')
  assert.deepEqual([...new Set(declared)].sort(), real.sort(), 'index.d.ts and index.js disagree on the exports')
})

test('every export of binding.cjs is defined (the string enums under their Rust names: RowLiveness, RowScope)', async () => {
  const { createRequire } = await import('node:module')
  const binding = createRequire(import.meta.url)('../binding.cjs')
  const undefinedExports = Object.entries(binding).filter(([, v]) => v === undefined).map(([k]) => k)
  assert.deepEqual(undefinedExports, [], 'binding.cjs names an export the addon does not have')
  assert.deepEqual({ ...binding.RowLiveness }, { Cold: 'cold', Live: 'live' })
  assert.deepEqual({ ...binding.RowScope }, { TopLevel: 'top-level', Subagent: 'subagent' })
  // the d.ts declares the same names
  const dts = readFileSync(new URL('../binding.d.ts', import.meta.url), 'utf8')
  for (const name of ['RowLiveness', 'RowScope']) assert.match(dts, new RegExp(`export declare const enum ${name} \\{`))
})
