#!/usr/bin/env node
// Build the web client half: client/*.ts(x) → lib/client.js, the classic script rc.8 loads for a `dsh.client`
// package (package.json `exports["./client"]`). esbuild bundles the typed source as CommonJS with `react`
// external, and the banner/footer wrap it into the only shape the shell's module system takes: a script whose
// one effect is `window.__ModuleLoader__.load({id, factory})` (rc.8 packages/client/modules/src/index.ts
// `injectBootManifest`), the factory's `require` answering the shell's platform modules (packages/client/web/
// src/platform.ts PLATFORM_MODULES). A page without that loader (an older host, the headless profile, another
// shell) runs nothing at all.
//
//   node scripts/build-client.mjs            write lib/client.js
//   node scripts/build-client.mjs --check    exit 1 when lib/client.js is not what the source builds to
//
// Also imported: buildClient() returns the bundle's text (test/client.test.mjs loads the source's build).
import { existsSync, readFileSync, readdirSync, renameSync, statSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..')
const SOURCE_DIR = join(ROOT, 'client')
const ENTRY = join(SOURCE_DIR, 'index.tsx')
const OUTFILE = join(ROOT, 'lib', 'client.js')
const ID = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).name

const BANNER = `// ${ID}: the web client half, built from client/ by scripts/build-client.mjs (esbuild) — do not edit.
(function () {
  'use strict'
  var loader = typeof window !== 'undefined' ? window.__ModuleLoader__ : undefined
  if (loader === undefined || loader === null || typeof loader.load !== 'function') return
  loader.load({
    id: ${JSON.stringify(ID)},
    factory: function (require) {
      var module = { exports: {} }
      var exports = module.exports`
const FOOTER = `      if (!(Symbol.toStringTag in module.exports)) Object.defineProperty(module.exports, Symbol.toStringTag, { value: 'Module' })
      return module.exports
    },
  })
})()
`

const OPTIONS = {
  entryPoints: [ENTRY],
  bundle: true,
  write: false,
  format: 'cjs',
  platform: 'browser',
  target: ['es2020', 'chrome100', 'firefox100', 'safari15'],
  external: ['react'],
  jsx: 'transform',
  jsxFactory: 'React.createElement',
  jsxFragment: 'React.Fragment',
  charset: 'utf8',
  legalComments: 'none',
  logLevel: 'silent',
  banner: { js: BANNER },
  footer: { js: FOOTER },
}

/** The bundle's text, built from client/ (esbuild, a devDependency). */
export async function buildClient() {
  const esbuild = await import('esbuild')
  return (await esbuild.build(OPTIONS)).outputFiles[0].text
}

/**
 * For scripts/install.mjs (synchronous): build lib/client.js when client/ is newer, with the esbuild `npm ci`
 * installed. Returns what happened: 'fresh' | 'built' | 'no-source' (a package from npm ships the bundle and
 * no client/) | 'no-esbuild' (the bundle is left as it is; a missing one is refused by the package check).
 */
export function ensureClientBuilt() {
  if (!existsSync(SOURCE_DIR)) return 'no-source'
  if (!clientStale()) return 'fresh'
  let esbuild
  try { esbuild = createRequire(import.meta.url)('esbuild') } catch { return 'no-esbuild' }
  const text = esbuild.buildSync(OPTIONS).outputFiles[0].text
  const tmp = OUTFILE + '.tmp-' + process.pid
  writeFileSync(tmp, text)
  renameSync(tmp, OUTFILE)
  return 'built'
}

/** Is lib/client.js older than any file of client/ (or missing)? */
function clientStale() {
  if (!existsSync(OUTFILE)) return true
  const built = statSync(OUTFILE).mtimeMs
  return readdirSync(SOURCE_DIR, { recursive: true }).some(f => statSync(join(SOURCE_DIR, String(f))).mtimeMs > built)
}

async function writeClient() {
  const text = await buildClient()
  const tmp = OUTFILE + '.tmp-' + process.pid
  writeFileSync(tmp, text)
  renameSync(tmp, OUTFILE)
  return text
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--check')) {
    const text = await buildClient()
    const now = existsSync(OUTFILE) ? readFileSync(OUTFILE, 'utf8') : null
    if (now !== text) { console.error(`${OUTFILE} is not built from client/: npm run build:client`); process.exit(1) }
  } else {
    const text = await writeClient()
    console.log(`lib/client.js: ${text.length} bytes`)
  }
}
