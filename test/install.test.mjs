// Tests for scripts/install.mjs. They run the script as a child process against a fixture bundle package
// (never the real build) and template-shaped profile directories, all under os.tmpdir().
//
//   node --test test/install.test.mjs
//   DSH_BIN=<path to an rc.8 dsh> node --test test/install.test.mjs   (adds the real-host test)

import { after, before, describe, test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync,
  statSync, symlinkSync, writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'

const SCRIPT = fileURLToPath(new URL('../scripts/install.mjs', import.meta.url))
const NAME = 'dsh-session-mail'
const ROW_ID = 'session-mail-fixture-row'
const ADDON = `${NAME}.linux-x64-gnu.node`
const SPEC = `file:./.${NAME}/${NAME}-0.1.0.tgz`
const WEB_BUNDLES = ['@deepseek-ai/dsh-base', '@deepseek-ai/dsh-web-app']

let root
before(() => { root = mkdtempSync(join(tmpdir(), 'dsh-install-test-')) })
after(() => { rmSync(root, { recursive: true, force: true }) })

let counter = 0
function fresh(label) {
  const dir = join(root, `${label}-${++counter}`)
  mkdirSync(dir, { recursive: true })
  return dir
}

/** A minimal bundle package: files list, dsh.bundle.patch, a fake .node, plus files that must NOT ship. */
function makeFixturePackage({ addon = true } = {}) {
  const dir = join(fresh('pkg'), NAME)
  mkdirSync(join(dir, 'lib'), { recursive: true })
  mkdirSync(join(dir, 'src'), { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({
    name: NAME,
    version: '0.1.0',
    type: 'module',
    main: 'index.js',
    files: ['index.js', 'cordis.patch.yml', 'lib/'],
    peerDependencies: { '@deepseek-ai/cordis': '*', '@deepseek-ai/dsh-tools': '*' },
    dsh: { bundle: { patch: './cordis.patch.yml' } },
  }, undefined, 2) + '\n')
  writeFileSync(join(dir, 'index.js'), "export const name = 'session-mail-fixture'\nexport function apply() {}\n")
  writeFileSync(join(dir, 'cordis.patch.yml'), `- insert:\n    - id: ${ROW_ID}\n      name: ${NAME}\n`)
  writeFileSync(join(dir, 'lib', 'util.js'), 'export const x = 1\n')
  writeFileSync(join(dir, 'README.md'), '# fixture\n')
  writeFileSync(join(dir, 'src', 'lib.rs'), '// not shipped\n')
  mkdirSync(join(dir, 'examples'))
  writeFileSync(join(dir, 'examples', 'index.js'), '// not shipped: files entries are anchored at the package root\n')
  writeFileSync(join(dir, 'Cargo.toml'), '[package]\n')
  if (addon) writeFileSync(join(dir, ADDON), Buffer.from([0x7f, 0x45, 0x4c, 0x46, 1, 2, 3]))
  return dir
}

/** A profile exactly as rc.8 initProfile writes it (packages/boot/app-boot/src/profile.ts), under <home>/profiles/<name>. */
function makeProfile({ name = 'web', bundles = WEB_BUNDLES, manifest } = {}) {
  const dir = join(fresh('home'), 'profiles', name)
  mkdirSync(dir, { recursive: true })
  const value = manifest ?? { name: `dsh-profile-${name}`, private: true, dependencies: {}, dsh: { profile: { bundles: [...bundles] } } }
  writeFileSync(join(dir, 'package.json'), JSON.stringify(value, undefined, 2) + '\n')
  writeFileSync(join(dir, 'cordis.patch.yml'), '# Your patch layer\n[]\n')
  writeFileSync(join(dir, 'pnpm-workspace.yaml'), 'packages:\n  - .\n\nnodeLinker: hoisted\nautoInstallPeers: false\n')
  return dir
}

function run(...args) {
  return runWith({}, ...args)
}

function runWith(extraEnv, ...args) {
  const env = { ...process.env, DSH_HOME: join(root, 'no-home'), ...extraEnv }
  const result = spawnSync(process.execPath, [SCRIPT, ...args], { encoding: 'utf8', env })
  return { code: result.status, stdout: result.stdout, stderr: result.stderr }
}

/** Every path under dir with its bytes (directories marked), to prove "nothing changed". */
function snapshot(dir) {
  const out = {}
  const walk = (path, rel) => {
    for (const name of readdirSync(path).sort()) {
      const full = join(path, name)
      const key = rel ? `${rel}/${name}` : name
      const stat = lstatSync(full)
      if (stat.isDirectory()) {
        out[`${key}/`] = 'dir'
        walk(full, key)
      } else {
        out[key] = `${(stat.mode & 0o777).toString(8)}:${readFileSync(full).toString('base64')}`
      }
    }
  }
  walk(dir, '')
  return out
}

const readJson = file => JSON.parse(readFileSync(file, 'utf8'))

describe('install', () => {
  test('installs into a template-shaped profile: dependency, bundle appended, real directory with the .node', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    chmodSync(join(profile, 'package.json'), 0o600)
    const original = readJson(join(profile, 'package.json'))
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 0, r.stderr)
    assert.equal(r.stderr, '')

    const manifest = readJson(join(profile, 'package.json'))
    assert.deepEqual(manifest.dependencies, { [NAME]: SPEC })
    assert.deepEqual(manifest.dsh.profile.bundles, [...WEB_BUNDLES, NAME], 'order and the other bundles kept')
    assert.equal(manifest.name, original.name)
    assert.equal(manifest.private, true)
    assert.equal(statSync(join(profile, 'package.json')).mode & 0o777, 0o600, 'package.json mode kept')
    assert.equal(readFileSync(join(profile, 'package.json'), 'utf8').endsWith('}\n'), true)

    const installed = join(profile, 'node_modules', NAME)
    assert.equal(lstatSync(installed).isDirectory(), true, 'a real directory, not a symlink')
    assert.deepEqual(readdirSync(installed).sort(), [ADDON, 'README.md', 'cordis.patch.yml', 'index.js', 'lib', 'package.json'].sort())
    assert.deepEqual(readFileSync(join(installed, ADDON)), readFileSync(join(pkg, ADDON)))
    assert.equal(existsSync(join(installed, 'lib', 'util.js')), true, 'a directory entry in files ships its content')
    assert.equal(existsSync(join(installed, 'src')), false, 'files not listed do not ship')
    assert.equal(existsSync(join(installed, 'examples')), false, '"index.js" in files means the root index.js only')

    const tgz = readFileSync(join(profile, `.${NAME}`, `${NAME}-0.1.0.tgz`))
    const tar = gunzipSync(tgz)
    for (const path of ['package/package.json', `package/${ADDON}`, 'package/cordis.patch.yml']) {
      assert.ok(tar.includes(Buffer.from(path)), `tarball holds ${path}`)
    }
    // nothing staged or locked is left behind
    assert.deepEqual(readdirSync(profile).sort(), [`.${NAME}`, 'cordis.patch.yml', 'node_modules', 'package.json', 'pnpm-workspace.yaml'])

    assert.match(r.stdout, /dependencies\["dsh-session-mail"\] = "file:\.\/\.dsh-session-mail\/dsh-session-mail-0\.1\.0\.tgz"/)
    assert.match(r.stdout, /Restart needed on DSH 0\.1\.0-rc\.8/)
    assert.match(r.stdout, /0\.1\.7 and later with HMR/)
    assert.match(r.stdout, new RegExp(`- id: ${ROW_ID}\\n {4}disabled: true`))
  })

  test('a second run changes nothing and adds no duplicate', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    const before = snapshot(profile)
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /already installed, nothing to change/)
    assert.match(r.stdout, /No restart needed/)
    assert.deepEqual(snapshot(profile), before)
    const bundles = readJson(join(profile, 'package.json')).dsh.profile.bundles
    assert.equal(bundles.filter(item => item === NAME).length, 1)
  })

  test('a rebuilt addon replaces the installed copy and asks for a restart in every version', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    writeFileSync(join(pkg, ADDON), 'rebuilt')
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /replaced \(content differed\)/)
    assert.match(r.stdout, /restart in every DSH version/)
    assert.equal(readFileSync(join(profile, 'node_modules', NAME, ADDON), 'utf8'), 'rebuilt')
  })

  test('uninstall restores the original package.json and removes what install created; idempotent', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    const originalText = readFileSync(join(profile, 'package.json'), 'utf8')
    const before = snapshot(profile)
    assert.equal(run('--profile', profile, '--package', pkg).code, 0)

    const r = run('--profile', profile, '--package', pkg, '--uninstall')
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(readJson(join(profile, 'package.json')), JSON.parse(originalText))
    assert.equal(readFileSync(join(profile, 'package.json'), 'utf8'), originalText)
    assert.equal(existsSync(join(profile, 'node_modules', NAME)), false)
    assert.equal(existsSync(join(profile, `.${NAME}`)), false)
    assert.deepEqual(snapshot(profile), before, 'node_modules created by the install is gone too')
    assert.match(r.stdout, /Restart needed on DSH 0\.1\.0-rc\.8/)

    const again = run('--profile', profile, '--package', pkg, '--uninstall')
    assert.equal(again.code, 0, again.stderr)
    assert.match(again.stdout, /not installed, nothing to change/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('uninstall leaves other dependencies, bundles and node_modules entries alone', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile({
      manifest: {
        name: 'dsh-profile-web', private: true, dependencies: { 'other-plugin': '^1.0.0' },
        dsh: { profile: { bundles: ['@deepseek-ai/dsh-base', 'other-plugin', '@deepseek-ai/dsh-web-app'] } },
      },
    })
    mkdirSync(join(profile, 'node_modules', 'other-plugin'), { recursive: true })
    writeFileSync(join(profile, 'node_modules', 'other-plugin', 'package.json'), '{}')
    const before = snapshot(profile)
    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    assert.deepEqual(readJson(join(profile, 'package.json')).dsh.profile.bundles,
      ['@deepseek-ai/dsh-base', 'other-plugin', '@deepseek-ai/dsh-web-app', NAME])
    assert.equal(run('--profile', profile, '--package', pkg, '--uninstall').code, 0)
    assert.deepEqual(snapshot(profile), before)
  })

  test('a profile without dependencies or bundles keys gets them, and uninstall removes them again', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile({ manifest: { name: 'dsh-profile-web', dsh: { profile: {} } } })
    const original = readJson(join(profile, 'package.json'))
    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    const manifest = readJson(join(profile, 'package.json'))
    assert.deepEqual(manifest.dependencies, { [NAME]: SPEC })
    assert.deepEqual(manifest.dsh.profile.bundles, [NAME])
    assert.equal(run('--profile', profile, '--package', pkg, '--uninstall').code, 0)
    assert.deepEqual(readJson(join(profile, 'package.json')), original)
  })

  test('a link: install (symlink in node_modules) is replaced by a real directory', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    mkdirSync(join(profile, 'node_modules'))
    symlinkSync(pkg, join(profile, 'node_modules', NAME), 'dir')
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /replaced a symlink by a real directory/)
    const stat = lstatSync(join(profile, 'node_modules', NAME))
    assert.equal(stat.isSymbolicLink(), false)
    assert.equal(stat.isDirectory(), true)
    assert.equal(existsSync(join(pkg, 'index.js')), true, 'the link target is untouched')
  })

  test('installs from a packed tarball and keeps it byte for byte', () => {
    const pkg = makeFixturePackage()
    const first = makeProfile()
    assert.equal(run('--profile', first, '--package', pkg).code, 0)
    const tgz = join(fresh('tgz'), `${NAME}-0.1.0.tgz`)
    copyFileSync(join(first, `.${NAME}`, `${NAME}-0.1.0.tgz`), tgz)
    const profile = makeProfile()
    const r = run('--profile', profile, '--package', tgz)
    assert.equal(r.code, 0, r.stderr)
    assert.deepEqual(readFileSync(join(profile, `.${NAME}`, `${NAME}-0.1.0.tgz`)), readFileSync(tgz))
    assert.deepEqual(readFileSync(join(profile, 'node_modules', NAME, ADDON)), readFileSync(join(pkg, ADDON)))
    const u = run('--profile', profile, '--package', tgz, '--uninstall')
    assert.equal(u.code, 0, u.stderr)
    assert.equal(existsSync(join(profile, 'node_modules', NAME)), false)
  })

  test('a failure midway rolls everything back (install over an older install, and uninstall)', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    const fresh = snapshot(profile)
    const failing = { DSH_INSTALL_TEST_FAIL: 'before-manifest' }
    const r = runWith(failing, '--profile', profile, '--package', pkg)
    assert.equal(r.code, 1)
    assert.match(r.stderr, /simulated failure.*\nThe profile was rolled back/s)
    assert.deepEqual(snapshot(profile), fresh, 'no node_modules, no tarball, no staging dir, no lock')

    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    const installed = snapshot(profile)
    writeFileSync(join(pkg, ADDON), 'rebuilt')
    assert.equal(runWith(failing, '--profile', profile, '--package', pkg).code, 1)
    assert.deepEqual(snapshot(profile), installed, 'the previous install is back in place')
    assert.equal(runWith(failing, '--profile', profile, '--package', pkg, '--uninstall').code, 1)
    assert.deepEqual(snapshot(profile), installed)
  })

  test('a node_modules that is a file: refused by the rename, rolled back', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    writeFileSync(join(profile, 'node_modules'), 'not a directory')
    const before = snapshot(profile)
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 1)
    assert.match(r.stderr, /rolled back/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('a live lock refuses; a stale lock is taken over; a leftover staging dir is kept and reported', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    const lock = join(profile, `.${NAME}.lock`)
    writeFileSync(lock, `${process.pid}\n`) // this test process: alive
    const before = snapshot(profile)
    const busy = run('--profile', profile, '--package', pkg)
    assert.equal(busy.code, 1)
    assert.match(busy.stderr, new RegExp(`another install/uninstall \\(pid ${process.pid}\\)`))
    assert.deepEqual(snapshot(profile), before)

    writeFileSync(lock, '2147483646\n') // no such process
    const leftover = join(profile, `.${NAME}.staging-abc123`)
    mkdirSync(join(leftover, 'old-0'), { recursive: true })
    const r = run('--profile', profile, '--package', pkg)
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stderr, /was left by an interrupted run/)
    assert.equal(existsSync(join(leftover, 'old-0')), true)
    assert.equal(existsSync(lock), false)
  })

  test('--dry-run changes nothing', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    const before = snapshot(profile)
    const r = run('--profile', profile, '--package', pkg, '--dry-run')
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /would: package\.json: dsh\.profile\.bundles \+= "dsh-session-mail"/)
    assert.match(r.stdout, /Dry run: nothing was changed/)
    assert.deepEqual(snapshot(profile), before)

    assert.equal(run('--profile', profile, '--package', pkg).code, 0)
    const installed = snapshot(profile)
    const u = run('--profile', profile, '--package', pkg, '--uninstall', '--dry-run')
    assert.equal(u.code, 0, u.stderr)
    assert.match(u.stdout, /would: node_modules\/dsh-session-mail: removed/)
    assert.deepEqual(snapshot(profile), installed)
  })
})

describe('refusals', () => {
  const refuses = (args, code, pattern) => {
    const r = run(...args)
    assert.equal(r.code, code, `exit code; stderr: ${r.stderr}`)
    assert.match(r.stderr, pattern)
    assert.equal(r.stdout, '')
    return r
  }

  test('a missing directory', () => {
    const pkg = makeFixturePackage()
    refuses(['--profile', join(root, 'nope', 'profiles', 'web'), '--package', pkg], 2,
      /does not exist\..*<DSH_HOME>\/profiles\/<name>\/.*"dsh": \{ "profile": \{ "bundles".*dsh web.*dsh plugin --profile NAME add/s)
  })

  test('a file instead of a directory', () => {
    const pkg = makeFixturePackage()
    const file = join(fresh('file'), 'web')
    writeFileSync(file, 'x')
    refuses(['--profile', file, '--package', pkg], 2, /is a file, not a profile directory/)
    assert.equal(readFileSync(file, 'utf8'), 'x')
  })

  test('a directory without package.json', () => {
    const pkg = makeFixturePackage()
    const dir = fresh('empty')
    refuses(['--profile', dir, '--package', pkg], 2, /not a DSH profile: it has no package\.json\. A DSH profile directory is/)
    assert.deepEqual(readdirSync(dir), [])
  })

  test('a package.json without dsh.profile', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile({ manifest: { name: 'some-app', version: '1.0.0', dependencies: {} } })
    const before = snapshot(profile)
    refuses(['--profile', profile, '--package', pkg], 2, /no "dsh\.profile" section/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('an invalid package.json is left byte-identical', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile()
    const broken = '{ "name": "dsh-profile-web", "dsh": { "profile": { "bundles": [ } '
    writeFileSync(join(profile, 'package.json'), broken)
    const before = snapshot(profile)
    refuses(['--profile', profile, '--package', pkg], 2, /is not valid JSON.*does not overwrite it/)
    assert.equal(readFileSync(join(profile, 'package.json'), 'utf8'), broken)
    assert.deepEqual(snapshot(profile), before)
    refuses(['--profile', profile, '--package', pkg, '--uninstall'], 2, /is not valid JSON/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('a profile name rc.8 forbids (node_modules)', () => {
    const pkg = makeFixturePackage()
    const profile = makeProfile({ name: 'node_modules' })
    const before = snapshot(profile)
    refuses(['--profile', profile, '--package', pkg], 2, /"node_modules" is not a profile name DSH accepts/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('a package without a built .node addon: build it first', () => {
    const pkg = makeFixturePackage({ addon: false })
    const profile = makeProfile()
    const before = snapshot(profile)
    refuses(['--profile', profile, '--package', pkg], 1, /no built native addon \(\*\.node\).*build it first: npm run build/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('a package that is not a bundle', () => {
    const pkg = makeFixturePackage()
    const manifest = readJson(join(pkg, 'package.json'))
    delete manifest.dsh
    writeFileSync(join(pkg, 'package.json'), JSON.stringify(manifest))
    const profile = makeProfile()
    const before = snapshot(profile)
    refuses(['--profile', profile, '--package', pkg], 1, /declares no dsh\.bundle\.patch/)
    assert.deepEqual(snapshot(profile), before)
  })

  test('bad usage', () => {
    refuses([], 2, /--profile DIR is required/)
    refuses(['--profile', root, '--bogus'], 2, /unknown argument "--bogus"/)
    refuses(['--profile'], 2, /--profile needs a value/)
    refuses(['--profile='], 2, /--profile needs a value/)
    refuses(['--profile', makeProfile(), '--package', join(root, 'missing-pkg')], 2, /no such file or directory/)
  })
})

// ---------------------------------------------------------------------------------------------------------
// The real rc.8 host. Skipped only when DSH_BIN is unset.

const DSH_BIN = process.env.DSH_BIN
const SKIP_REASON = 'DSH_BIN is unset: set it to an installed rc.8 `dsh` (e.g. <host>/node_modules/.bin/dsh) to run this test'
if (!DSH_BIN) console.log(`# real-host test skipped: ${SKIP_REASON}`)

test('real rc.8 host: --dump-config shows the installed fixture layer', { skip: DSH_BIN ? false : SKIP_REASON, timeout: 120_000 }, () => {
  const home = fresh('dsh-home')
  const env = { ...process.env, DSH_HOME: home, DSH_TELEMETRY_DISABLED: '1' }
  const dsh = (...args) => {
    const r = spawnSync(DSH_BIN, args, { encoding: 'utf8', env, timeout: 60_000 })
    assert.equal(r.status, 0, `dsh ${args.join(' ')} failed (${r.status}): ${r.stderr}${r.error ?? ''}`)
    return r.stdout
  }
  const layer = new RegExp(`^# == ${NAME}\\n- id: ${ROW_ID}\\n  name: ${NAME}\\n`, 'm')

  // The first use of a shipped template initializes the profile (rc.8 loadProfile → initProfile).
  const initial = dsh('--profile', 'web', '--dump-config')
  const profile = join(home, 'profiles', 'web')
  assert.deepEqual(readJson(join(profile, 'package.json')).dsh.profile.bundles, WEB_BUNDLES)
  assert.doesNotMatch(initial, layer)

  const pkg = makeFixturePackage()
  const r = spawnSync(process.execPath, [SCRIPT, '--profile', profile, '--package', pkg], { encoding: 'utf8', env })
  assert.equal(r.status, 0, r.stderr)
  const installed = dsh('--profile', 'web', '--dump-config')
  assert.match(installed, layer)
  assert.ok(installed.indexOf(`# == ${NAME}`) > installed.lastIndexOf('# == @deepseek-ai/dsh-web-app'), 'layer after the template bundles')

  // The switch-off override the script prints is a valid profile patch that disables the row.
  const override = /^ {2}- id: .*\n {4}disabled: true$/m.exec(r.stdout)[0].replace(/^ {2}/gm, '')
  writeFileSync(join(profile, 'cordis.patch.yml'), `${override}\n`)
  assert.match(dsh('--profile', 'web', '--dump-config'), new RegExp(`- id: ${ROW_ID}\\n  name: ${NAME}\\n  disabled: true`))
  writeFileSync(join(profile, 'cordis.patch.yml'), '[]\n')

  const u = spawnSync(process.execPath, [SCRIPT, '--profile', profile, '--package', pkg, '--uninstall'], { encoding: 'utf8', env })
  assert.equal(u.status, 0, u.stderr)
  assert.doesNotMatch(dsh('--profile', 'web', '--dump-config'), layer)
})
