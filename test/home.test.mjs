// One DSH_HOME rule: the core's (`resolveDshHome`), which lib/home.js asks for the whole JS side.
// Host rule: rc.8 `@deepseek-ai/dsh-home-paths` lib/index.js `resolveDshHome` (packages/util/home-paths/src/index.ts).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { resolveDshHome } from '../lib/home.js'
import { productModules } from './helpers/js-modules.mjs'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** Run `fn` with DSH_HOME set (undefined: unset); the core reads the same process environment. */
function withEnv(value, fn) {
  const saved = process.env.DSH_HOME
  if (value === undefined) delete process.env.DSH_HOME
  else process.env.DSH_HOME = value
  try { return fn() } finally {
    if (saved === undefined) delete process.env.DSH_HOME
    else process.env.DSH_HOME = saved
  }
}

const CASES = [
  // [explicit, $DSH_HOME, expected]
  [undefined, undefined, join(homedir(), '.dsh')],
  [undefined, '', join(homedir(), '.dsh')],
  [undefined, '   ', join(homedir(), '.dsh')],
  [undefined, '/srv/dsh', '/srv/dsh'],
  [undefined, '  /srv/dsh \t', '/srv/dsh'],
  [undefined, '~', homedir()],
  [undefined, '~/elsewhere', join(homedir(), 'elsewhere')],
  ['/explicit/home', '/srv/dsh', '/explicit/home'],
  ['  ~/x  ', '/srv/dsh', join(homedir(), 'x')],
  ['', '/srv/dsh', '/srv/dsh'],
  ['   ', undefined, join(homedir(), '.dsh')],
  [undefined, 'relative/home', resolve('relative/home')],
]

for (const [explicit, env, expected] of CASES) {
  test(`explicit ${JSON.stringify(explicit)}, DSH_HOME ${JSON.stringify(env)} → ${expected}`, () => {
    withEnv(env, () => assert.equal(resolveDshHome(explicit), expected))
  })
}

test('no other JS module resolves DSH_HOME by itself (homedir() or $DSH_HOME reads outside lib/home.js)', () => {
  const files = productModules(ROOT)
  const offenders = files.filter(f => !f.endsWith(join('lib', 'home.js')))
    .filter(f => /\bhomedir\s*\(|env\.DSH_HOME\b|env\[['"]DSH_HOME['"]\]/.test(readFileSync(f, 'utf8')))
    .map(f => relative(ROOT, f))
  assert.deepEqual(offenders, [])
})

test('the answer without an explicit path is kept only while what it depends on is unchanged: DSH_HOME, HOME and the cwd', (t) => {
  const cwd = process.cwd()
  const savedHome = process.env.HOME
  const restoreHome = () => { if (savedHome === undefined) delete process.env.HOME; else process.env.HOME = savedHome }
  // (the real path: macOS's /tmp is a link, and process.cwd() answers the target)
  const elsewhere = realpathSync(mkdtempSync(join(tmpdir(), 'home-cwd-')))
  t.after(() => { process.chdir(cwd); restoreHome(); rmSync(elsewhere, { recursive: true, force: true }) })
  withEnv('rel/home', () => {
    assert.equal(resolveDshHome(), resolve(cwd, 'rel/home'))
    process.chdir(elsewhere)
    assert.equal(resolveDshHome(), join(elsewhere, 'rel/home'), 'a relative DSH_HOME follows the cwd')
    process.env.DSH_HOME = '/srv/a'
    assert.equal(resolveDshHome(), '/srv/a')
    process.env.DSH_HOME = '/srv/b'
    assert.equal(resolveDshHome(), '/srv/b')
  })
  withEnv(undefined, () => {
    process.env.HOME = '/home/someone-else'
    assert.equal(resolveDshHome(), '/home/someone-else/.dsh', 'the OS home is read again')
    restoreHome()
    assert.equal(resolveDshHome(), join(homedir(), '.dsh'))
  })
})
