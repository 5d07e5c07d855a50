#!/usr/bin/env node
// Install (or uninstall) this plugin into a DeepSeek Harness (DSH) profile directory.
//
//   node scripts/install.mjs --profile DIR [--uninstall] [--dry-run] [--package PATH_OR_TGZ]
//
// What a profile is (DSH 0.1.0-rc.8, packages/boot/app-boot/src/profile.ts): `<DSH_HOME>/profiles/<name>/`
// holding package.json `{ name: "dsh-profile-<name>", private, dependencies, dsh: { profile: { bundles } } }`,
// cordis.patch.yml and pnpm-workspace.yaml (`initProfile`). Profile names exclude "", "/", "\\", ".", ".." and
// "node_modules" (`resolveProfileDir`). At start the host resolves every `dsh.profile.bundles` name from the
// installation first, then from the profile directory (`resolveBundleDir`), and reads its `dsh.bundle.patch`.
//
// Why a copied directory and not a link: a `link:` install makes Node follow the symlink out of $DSH_HOME, so
// the plugin cannot resolve its peers (@deepseek-ai/dsh-tools, …) and the boot fails; a real directory inside
// the profile's node_modules works (verified against the real rc.8 host, shared/host/real-host.md step 4).
// The tarball is kept inside the profile and named by a `file:` dependency, so a later `pnpm install` or
// `dsh plugin --profile <name> …` in the profile (apps/cli/src/plugin.ts `runPlugin`: pnpm + reconcile) still
// resolves the same package and keeps it in `dsh.profile.bundles`.
//
// Exit codes: 0 success, 2 bad usage / not a profile, 1 any other failure (message on stderr).

import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmdirSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { InstallError, usageError } from './lib/errors.mjs'
import { atomicWriteFile, kindFollowing, kindOf, readTree, renameSync, rmSync, takeLock, writeTree } from './lib/fsutil.mjs'
import { packageFromDir, packageFromTarball, packageNameFromTarball, validPackageName } from './lib/package-content.mjs'

const SELF_DIR = fileURLToPath(new URL('..', import.meta.url))
const BUILD_HINT = 'build it first: npm run build'
const RECORD = 'install.json'

const USAGE = `usage: node scripts/install.mjs --profile DIR [--uninstall] [--dry-run] [--package PATH_OR_TGZ]

  --profile DIR      a DSH profile directory, <DSH_HOME>/profiles/<name>/ (DSH_HOME defaults to ~/.dsh)
  --uninstall        remove what an install wrote (dependency, bundle entry, node_modules copy, kept tarball)
  --dry-run          print what would change; change nothing
  --package P        install this package directory or npm-pack tarball instead of the package this
                     script belongs to
  -h, --help         this text
`

// ---------------------------------------------------------------------------------------------------------
// arguments

function parseArgs(argv) {
  const options = { uninstall: false, dryRun: false, help: false }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const eq = arg.indexOf('=')
    const key = arg.startsWith('--') && eq !== -1 ? arg.slice(0, eq) : arg
    const inline = arg.startsWith('--') && eq !== -1 ? arg.slice(eq + 1) : undefined
    const value = () => {
      if (inline === '') throw usageError(`${key} needs a value`)
      if (inline !== undefined) return inline
      const next = argv[++i]
      if (next === undefined || next === '') throw usageError(`${key} needs a value`)
      return next
    }
    switch (key) {
      case '--profile': options.profile = value(); break
      case '--package': options.package = value(); break
      case '--uninstall': options.uninstall = true; break
      case '--dry-run': options.dryRun = true; break
      case '-h': case '--help': options.help = true; break
      default: throw usageError(`unknown argument ${JSON.stringify(arg)}`)
    }
    if (inline !== undefined && (key === '--uninstall' || key === '--dry-run')) {
      throw usageError(`${key} takes no value`)
    }
  }
  if (!options.help && options.profile === undefined) throw usageError('--profile DIR is required')
  return options
}

// ---------------------------------------------------------------------------------------------------------
// the profile

/** $DSH_HOME as rc.8 resolves it (packages/util/home-paths/src/index.ts `resolveDshHome`), for messages only. */
function dshHome() {
  const raw = process.env.DSH_HOME?.trim()
  if (!raw) return join(homedir(), '.dsh')
  if (raw === '~') return homedir()
  if (raw.startsWith('~/') || raw.startsWith('~\\')) return join(homedir(), raw.slice(2))
  return resolve(raw)
}

function whatAProfileIs(extra = '') {
  const home = dshHome()
  return `${extra}A DSH profile directory is <DSH_HOME>/profiles/<name>/ (here: ${join(home, 'profiles', '<name>')}); `
    + 'its package.json has "dsh": { "profile": { "bundles": [ ...bundle package names... ] } }. '
    + 'Create one by running `dsh web` once (profile "web"; `dsh --profile headless --dump-config` creates "headless" '
    + 'without starting anything), or `dsh plugin --profile NAME add <package>` for any name; then pass that directory to --profile.'
}

/** rc.8 `resolveProfileDir` name rule (packages/boot/app-boot/src/profile.ts). */
function forbiddenProfileName(name) {
  return name === '' || name.includes('/') || name.includes('\\') || name === '.' || name === '..' || name === 'node_modules'
}

/** Detect how package.json is formatted so a rewrite changes only what we change. */
function jsonStyle(text) {
  const eol = text.includes('\r\n') ? '\r\n' : '\n'
  const indentMatch = /^[{[][ \t]*\r?\n([ \t]+)\S/.exec(text)
  const indent = indentMatch ? indentMatch[1] : 2
  const trailing = /\r?\n$/.test(text)
  return value => JSON.stringify(value, undefined, indent).replace(/\n/g, eol) + (trailing ? eol : '')
}

function readProfile(profileArg) {
  const dir = resolve(profileArg)
  const kind = kindFollowing(dir)
  if (kind === 'missing') {
    const bare = !/[\\/]/.test(profileArg) && profileArg !== '.' && profileArg !== '..'
    const hint = bare ? ` Did you mean the profile named "${profileArg}": --profile ${join(dshHome(), 'profiles', profileArg)} ?` : ''
    throw usageError(`${dir} does not exist.${hint} ${whatAProfileIs()}`)
  }
  if (kind !== 'dir') throw usageError(`${dir} is a file, not a profile directory. ${whatAProfileIs()}`)
  const name = basename(dir)
  if (forbiddenProfileName(name)) {
    throw usageError(
      `${dir}: ${JSON.stringify(name)} is not a profile name DSH accepts (a name must not be empty, ".", "..", `
      + `"node_modules" or contain "/" or "\\"; <DSH_HOME>/profiles/node_modules is the host's module fallback). ${whatAProfileIs()}`,
    )
  }
  const manifestPath = join(dir, 'package.json')
  let text
  try {
    text = readFileSync(manifestPath, 'utf8')
  } catch (error) {
    if (error.code === 'ENOENT') throw usageError(`${dir} is not a DSH profile: it has no package.json. ${whatAProfileIs()}`)
    throw usageError(`${manifestPath} cannot be read (${error.code ?? error.message}); nothing was changed.`)
  }
  let manifest
  try {
    manifest = JSON.parse(text)
  } catch (error) {
    throw usageError(`${manifestPath} is not valid JSON (${error.message}); fix it by hand — this script does not overwrite it. Nothing was changed.`)
  }
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    throw usageError(`${manifestPath} must hold a JSON object; nothing was changed. ${whatAProfileIs()}`)
  }
  const profile = manifest.dsh?.profile
  if (profile === null || typeof profile !== 'object' || Array.isArray(profile)) {
    throw usageError(`${dir} is not a DSH profile: its package.json has no "dsh.profile" section. ${whatAProfileIs()}`)
  }
  const bundles = profile.bundles
  if (bundles !== undefined && !(Array.isArray(bundles) && bundles.every(item => typeof item === 'string'))) {
    throw usageError(`${manifestPath}: dsh.profile.bundles must be a list of package names; nothing was changed.`)
  }
  const deps = manifest.dependencies
  if (deps !== undefined && (deps === null || typeof deps !== 'object' || Array.isArray(deps))) {
    throw usageError(`${manifestPath}: "dependencies" must be an object; nothing was changed.`)
  }
  return { dir, name, manifestPath, text, manifest, format: jsonStyle(text) }
}

// ---------------------------------------------------------------------------------------------------------
// the package

function loadPackage(packageArg) {
  if (packageArg === undefined) {
    return packageFromDir(SELF_DIR, { buildHint: BUILD_HINT, exitCodeForBadPackage: 1 })
  }
  const path = resolve(packageArg)
  const kind = kindFollowing(path)
  if (kind === 'dir') return packageFromDir(path, { buildHint: BUILD_HINT, exitCodeForBadPackage: 2 })
  if (kind === 'file') {
    return packageFromTarball(path, {
      buildHint: `${BUILD_HINT}, then pack again with the .node file listed in "files", or pass the package directory instead`,
    })
  }
  throw usageError(`--package ${packageArg}: no such file or directory`)
}

/** The name `--uninstall` removes: from --package, else from this script's package, else the plugin's own name. */
function packageNameForUninstall(packageArg) {
  const fromManifest = file => {
    try {
      return JSON.parse(readFileSync(file, 'utf8')).name
    } catch {
      return undefined
    }
  }
  if (packageArg !== undefined) {
    const path = resolve(packageArg)
    const kind = kindFollowing(path)
    if (kind === 'missing') throw usageError(`--package ${packageArg}: no such file or directory`)
    const name = kind === 'dir' ? fromManifest(join(path, 'package.json')) : packageNameFromTarball(path)
    if (!validPackageName(name)) throw usageError(`--package ${packageArg}: cannot read a valid package name from it`)
    return name
  }
  const name = fromManifest(join(SELF_DIR, 'package.json'))
  return validPackageName(name) ? name : 'dsh-session-mail'
}

// ---------------------------------------------------------------------------------------------------------
// plan

function storeDirName(name) {
  return `.${name.replace(/^@/, '').replace('/', '-')}`
}

function nodeModulesPath(dir, name) {
  return join(dir, 'node_modules', ...name.split('/'))
}

function readRecord(storeDir) {
  try {
    const record = JSON.parse(readFileSync(join(storeDir, RECORD), 'utf8'))
    return record !== null && typeof record === 'object' ? record : {}
  } catch {
    return {}
  }
}

function sameTree(actual, expected) {
  if (actual === undefined || actual.size !== expected.size) return false
  for (const [path, data] of expected) {
    const other = actual.get(path)
    if (other === undefined || !other.equals(data)) return false
  }
  return true
}

const clone = value => JSON.parse(JSON.stringify(value))
const list = items => `[${items.join(', ')}]`

function planInstall(profile, pkg) {
  const { dir, manifest } = profile
  const { name } = pkg
  const store = storeDirName(name)
  const storeDir = join(dir, store)
  const nmDir = nodeModulesPath(dir, name)
  const spec = `file:./${store}/${pkg.tgzName}`
  const oldRecord = readRecord(storeDir)
  const created = {
    dependencies: oldRecord.created?.dependencies === true,
    bundles: oldRecord.created?.bundles === true,
    nodeModules: oldRecord.created?.nodeModules === true,
    scopeDir: oldRecord.created?.scopeDir === true,
  }
  const changes = []
  const next = clone(manifest)
  if (next.dependencies === undefined) {
    next.dependencies = {}
    created.dependencies = true
  }
  const previousSpec = next.dependencies[name]
  if (previousSpec !== spec) {
    next.dependencies[name] = spec
    changes.push(`package.json: dependencies[${JSON.stringify(name)}] = ${JSON.stringify(spec)}`
      + (previousSpec === undefined ? '' : ` (was ${JSON.stringify(previousSpec)})`))
  }
  if (next.dsh.profile.bundles === undefined) {
    next.dsh.profile.bundles = []
    created.bundles = true
  }
  const bundles = next.dsh.profile.bundles
  const bundlesChanged = !bundles.includes(name)
  if (bundlesChanged) {
    bundles.push(name)
    changes.push(`package.json: dsh.profile.bundles += ${JSON.stringify(name)} → ${list(bundles)}`)
  }
  const manifestText = JSON.stringify(next) === JSON.stringify(manifest) ? undefined : profile.format(next)

  // node_modules/<name>: a real directory with exactly the package content
  const nmKind = kindOf(nmDir)
  const expectedPkg = new Map(pkg.entries.map(entry => [entry.path, entry.data]))
  const pkgChanged = !(nmKind === 'dir' && sameTree(readTree(nmDir), expectedPkg))
  if (pkgChanged) {
    const what = { missing: 'new real directory', dir: 'replaced (content differed)', symlink: 'replaced a symlink by a real directory' }[nmKind] ?? `replaced a ${nmKind}`
    changes.push(`node_modules/${name}: ${what} (${pkg.entries.length} files, addon ${pkg.nativeFiles.join(', ')})`)
    if (kindOf(join(dir, 'node_modules')) === 'missing') created.nodeModules = true
    if (name.startsWith('@') && kindOf(dirname(nmDir)) === 'missing') created.scopeDir = true
  }

  // .<name>/: the kept tarball + our record of what we created
  const record = { name, version: pkg.version, tarball: pkg.tgzName, dependency: spec, created }
  const recordText = JSON.stringify(record, undefined, 2) + '\n'
  const expectedStore = new Map([[pkg.tgzName, pkg.tgz], [RECORD, Buffer.from(recordText)]])
  const storeChanged = !sameTree(readTree(storeDir), expectedStore)
  if (storeChanged) {
    const oldTarballs = kindOf(storeDir) === 'dir' ? readdirSync(storeDir).filter(file => file.endsWith('.tgz') && file !== pkg.tgzName) : []
    changes.push(`${store}/${pkg.tgzName}: written (the file: dependency points here)`
      + (oldTarballs.length ? `; removed ${oldTarballs.join(', ')}` : ''))
  }
  return {
    changes,
    manifestText,
    bundlesChanged,
    codeChanged: pkgChanged && nmKind !== 'missing',
    moves: [
      pkgChanged && { target: nmDir, staged: 'pkg', entries: pkg.entries },
      storeChanged && { target: storeDir, staged: 'store', entries: [...expectedStore].map(([path, data]) => ({ path, data, mode: 0o644 })) },
    ].filter(Boolean),
    cleanups: [],
    store,
  }
}

function planUninstall(profile, name) {
  const { dir, manifest } = profile
  const store = storeDirName(name)
  const storeDir = join(dir, store)
  const nmDir = nodeModulesPath(dir, name)
  const record = readRecord(storeDir)
  const changes = []
  const next = clone(manifest)
  const spec = next.dependencies?.[name]
  if (spec !== undefined) {
    delete next.dependencies[name]
    const ours = typeof spec === 'string' && spec.startsWith(`file:./${store}/`)
    changes.push(`package.json: removed dependencies[${JSON.stringify(name)}] (${JSON.stringify(spec)}${ours ? '' : ', not written by this script'})`)
    if (record.created?.dependencies === true && Object.keys(next.dependencies).length === 0) delete next.dependencies
  }
  const bundles = next.dsh.profile.bundles
  const bundlesChanged = Array.isArray(bundles) && bundles.includes(name)
  if (bundlesChanged) {
    next.dsh.profile.bundles = bundles.filter(item => item !== name)
    changes.push(`package.json: dsh.profile.bundles -= ${JSON.stringify(name)} → ${list(next.dsh.profile.bundles)}`)
    if (record.created?.bundles === true && next.dsh.profile.bundles.length === 0) delete next.dsh.profile.bundles
  }
  const manifestText = JSON.stringify(next) === JSON.stringify(manifest) ? undefined : profile.format(next)
  const moves = []
  const nmKind = kindOf(nmDir)
  if (nmKind !== 'missing') {
    moves.push({ target: nmDir })
    changes.push(`node_modules/${name}: removed (${nmKind === 'dir' ? 'directory' : nmKind})`)
  }
  if (kindOf(storeDir) !== 'missing') {
    moves.push({ target: storeDir })
    changes.push(`${store}/: removed (kept tarball)`)
  }
  // Directories the install created, removed only if empty afterwards.
  const cleanups = []
  if (record.created?.scopeDir === true && name.startsWith('@')) cleanups.push(dirname(nmDir))
  if (record.created?.nodeModules === true) cleanups.push(join(dir, 'node_modules'))
  return { changes, manifestText, bundlesChanged, codeChanged: false, moves, cleanups, store }
}

// ---------------------------------------------------------------------------------------------------------
// apply: stage inside the profile, rename into place, write package.json last; roll back on any failure

function apply(profile, plan) {
  const { dir, manifestPath } = profile
  const release = takeLock(join(dir, `${plan.store}.lock`))
  const stagingPrefix = `${plan.store}.staging-`
  // A staging dir left by a killed run (or a failed rollback) may hold the previous copy: never delete it blindly.
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith(stagingPrefix)) {
      process.stderr.write(`warning: ${join(dir, entry)} was left by an interrupted run; look inside (old-* is the previous copy) and remove it\n`)
    }
  }
  const staging = mkdtempSync(join(dir, stagingPrefix))
  let keepStaging = false
  const undo = []
  try {
    for (const move of plan.moves) {
      if (move.entries !== undefined) writeTree(join(staging, move.staged), move.entries)
    }
    plan.moves.forEach((move, index) => {
      const aside = join(staging, `old-${index}`)
      if (kindOf(move.target) !== 'missing') {
        renameSync(move.target, aside)
        undo.push(() => renameSync(aside, move.target))
      }
      if (move.entries !== undefined) {
        const parents = []
        for (let parent = dirname(move.target); kindOf(parent) === 'missing'; parent = dirname(parent)) parents.unshift(parent)
        for (const parent of parents) {
          mkdirSync(parent)
          undo.push(() => rmdirSync(parent))
        }
        renameSync(join(staging, move.staged), move.target)
        undo.push(() => renameSync(move.target, join(staging, move.staged)))
      }
    })
    // Test hook: simulate a failure after the directories moved, before package.json is written.
    if (process.env.DSH_INSTALL_TEST_FAIL === 'before-manifest') throw new Error('simulated failure (DSH_INSTALL_TEST_FAIL)')
    if (plan.manifestText !== undefined) {
      // Refuse to clobber a concurrent edit (dsh plugin, an editor) made since we read the file.
      if (readFileSync(manifestPath, 'utf8') !== profile.text) {
        throw new InstallError(`${manifestPath} changed while this script ran; nothing was changed — run it again`)
      }
      atomicWriteFile(manifestPath, plan.manifestText)
    }
    for (const path of plan.cleanups) {
      try {
        rmdirSync(path) // only succeeds when empty
      } catch {
        // not empty (something else lives there) or already gone: leave it
      }
    }
  } catch (error) {
    const failures = []
    for (const step of undo.reverse()) {
      try {
        step()
      } catch (undoError) {
        failures.push(undoError.message)
      }
    }
    if (failures.length > 0) {
      keepStaging = true
      error.message += `\nrolling back also failed (${failures.join('; ')}); the staged and the previous files are kept in ${staging}`
    } else {
      error.rolledBack = true
    }
    throw error
  } finally {
    if (!keepStaging) rmSync(staging, { recursive: true, force: true })
    release()
  }
}

// ---------------------------------------------------------------------------------------------------------
// report

function rowIds(pkg) {
  const ids = []
  for (const patch of pkg.patchFiles) {
    const entry = pkg.entries.find(item => item.path === patch.replace(/^\.\//, ''))
    const text = entry?.data.toString('utf8') ?? ''
    for (const match of text.matchAll(/(?:^|[\s{,-])id:\s*['"]?([^'",\s}#]+)/gm)) ids.push(match[1])
  }
  return [...new Set(ids)]
}

function restartAdvice(plan, uninstall, profileName) {
  if (plan.changes.length === 0) return 'No restart needed.'
  const lines = []
  if (plan.bundlesChanged || uninstall) {
    lines.push(
      `Restart needed on DSH 0.1.0-rc.8: it reads dsh.profile.bundles only at start ("Restart that Profile after adding, `
      + `removing, or updating a Bundle", apps/cli/reference/README.md). Stop the running \`dsh --profile ${profileName}\` `
      + '(or the app using this profile) and start it again.',
      'DSH 0.1.7 and later with HMR on (the web and desktop profiles) apply a changed bundle list live, no restart; '
      + 'without HMR (headless, ACP, SDK) restart as above.',
    )
  }
  if (plan.codeChanged) {
    lines.push('The package content changed: restart in every DSH version — an already loaded module is not re-imported.')
  }
  if (lines.length === 0) lines.push('Restart needed on DSH 0.1.0-rc.8 for the change to take effect (the bundle list did not change).')
  return lines.join('\n')
}

function switchOffAdvice(profile, pkg) {
  const ids = rowIds(pkg)
  const rows = (ids.length ? ids : [pkg.name]).map(id => `  - id: ${id}\n    disabled: true`).join('\n')
  return `To switch it off without uninstalling, add this override to ${join(profile.dir, 'cordis.patch.yml')} `
    + '(a YAML list: replace a bare `[]` with it):\n'
    + `${rows}\n`
    + 'That file is hot-reloaded (rc.8 and 0.1.7), so no restart is needed; remove the override to switch it back on.'
}

function notes(profile) {
  const out = []
  if (basename(dirname(profile.dir)) !== 'profiles') {
    out.push(`note: ${profile.dir} is not inside a "profiles" directory; DSH only loads <DSH_HOME>/profiles/<name>/.`)
  }
  if (profile.name === 'desktop') {
    out.push('note: the desktop profile belongs to the DSH Desktop app (0.1.6+); quit the app before changing it.')
  }
  if (existsSync(join(profile.dir, 'pnpm-lock.yaml'))) {
    out.push('note: the profile\'s pnpm-lock.yaml does not know about this change; the next `pnpm install` (or '
      + `\`dsh plugin --profile ${profile.name} install\`) in the profile updates it, a --frozen-lockfile install fails until then.`)
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------

function main(argv) {
  const options = parseArgs(argv)
  if (options.help) {
    process.stdout.write(USAGE)
    return 0
  }
  const profile = readProfile(options.profile)
  const out = []
  const prefix = options.dryRun ? '  would: ' : '  '
  let plan
  let pkg
  if (options.uninstall) {
    const name = packageNameForUninstall(options.package)
    plan = planUninstall(profile, name)
    out.push(`${options.dryRun ? 'Dry run: uninstalling' : 'Uninstalling'} ${name} from profile "${profile.name}" (${profile.dir})`)
  } else {
    pkg = loadPackage(options.package)
    for (const warning of pkg.warnings) process.stderr.write(`warning: ${warning}\n`)
    plan = planInstall(profile, pkg)
    out.push(`${options.dryRun ? 'Dry run: installing' : 'Installing'} ${pkg.name} ${pkg.version} into profile "${profile.name}" (${profile.dir})`)
  }
  if (plan.changes.length === 0) {
    out.push(options.uninstall ? '  not installed, nothing to change' : '  already installed, nothing to change')
  } else {
    for (const change of plan.changes) out.push(prefix + change)
    if (!options.dryRun) apply(profile, plan)
    out.push(options.dryRun ? 'Dry run: nothing was changed.' : 'Done.')
  }
  out.push('', (options.dryRun && plan.changes.length > 0 ? 'After a real run: ' : '') + restartAdvice(plan, options.uninstall, profile.name))
  if (!options.uninstall) out.push('', switchOffAdvice(profile, pkg))
  const extra = notes(profile)
  if (extra.length) out.push('', ...extra)
  process.stdout.write(out.join('\n') + '\n')
  return 0
}

try {
  process.exitCode = main(process.argv.slice(2))
} catch (error) {
  if (error instanceof InstallError) {
    process.stderr.write(`install.mjs: ${error.message}\n`)
    if (error.exitCode === 2 && /required|unknown argument|needs a value|takes no value/.test(error.message)) {
      process.stderr.write(USAGE)
    }
    process.exitCode = error.exitCode
  } else if (error?.code === 'LOCKED') {
    process.stderr.write(`install.mjs: ${error.message}\n`)
    process.exitCode = 1
  } else {
    const state = error?.rolledBack === true ? '\nThe profile was rolled back to its state before this run.' : ''
    process.stderr.write(`install.mjs: failed: ${error?.message ?? error}${state}\n`)
    if (process.env.DSH_INSTALL_DEBUG) process.stderr.write(`${error?.stack}\n`)
    process.exitCode = 1
  }
}
