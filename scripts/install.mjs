#!/usr/bin/env node
// Install (or uninstall) this plugin into a DeepSeek Harness (DSH) profile directory.
//
//   node scripts/install.mjs --profile DIR [--uninstall] [--dry-run] [--package PATH_OR_TGZ] [--via auto|dsh|copy]
//
// What a profile is (DSH 0.1.0-rc.8, packages/boot/app-boot/src/profile.ts): `<DSH_HOME>/profiles/<name>/`
// holding package.json `{ name: "dsh-profile-<name>", private, dependencies, dsh: { profile: { bundles } } }`,
// cordis.patch.yml and pnpm-workspace.yaml (`initProfile`). Profile names exclude "", "/", "\\", ".", ".." and
// "node_modules" (`resolveProfileDir`). At start the host resolves every `dsh.profile.bundles` name from the
// installation first, then from the profile directory (`resolveBundleDir`), and reads its `dsh.bundle.patch`.
//
// The package is what `npm pack` makes of it (npm's own file list); the tarball is kept in
// `<profile>/.<name>/` and named by a `file:` dependency, so a later `pnpm install` or `dsh plugin … install`
// in the profile resolves the same package. Two ways to put it in place:
//   - dsh (when the host's `dsh` and pnpm are usable here): `dsh plugin --profile <name> add <kept tarball>`,
//     the host's own command (pnpm install + bundle reconcile; 0.1.7 also checks the plugin's peers and rolls a
//     rejected install back). shared/host/plugin-contract.md §2.3.
//   - copy (otherwise, e.g. the desktop app without a CLI): the tarball's files, read with `tar`, become a real
//     directory in node_modules (a `link:` install makes Node follow the symlink out of $DSH_HOME, so the plugin
//     cannot resolve its peers: shared/host/real-host.md step 4), the dependency and the bundle entry are
//     written by this script; staged, renamed into place, package.json last, rolled back on any failure.
//
// Exit codes: 0 success, 2 bad usage / not a profile, 1 any other failure (message on stderr).

import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmdirSync } from 'node:fs'
import { basename, dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parse, UsageError } from '../lib/cli/args.js'
import { resolveDshHome } from '../lib/home.js'
import { packageDir, profileDir } from './lib/layout.mjs'
import { loadCore } from '../lib/native.js'
import { dshPlugin, findDsh } from './lib/dsh.mjs'
import { InstallError, usageError } from './lib/errors.mjs'
import { atomicWriteFile, kindFollowing, kindOf, readTree, renameSync, rmSync, takeLock, writeTree } from './lib/fsutil.mjs'
import { appendBundle, checkOwnedPlaces, ManifestShapeError, parseManifest, removeBundle, removeDependency, setDependency, textOf } from './lib/manifest.mjs'
import { loadPackage as packPackage, packageNameFromTarball, validPackageName } from './lib/package.mjs'

const SELF_DIR = fileURLToPath(new URL('..', import.meta.url))
const BUILD_HINT = 'build it first: npm run build'
const RECORD = 'install.json'
const SELF_NAME = JSON.parse(readFileSync(join(SELF_DIR, 'package.json'), 'utf8')).name
// A clone builds its web client from client/ (scripts/build-client.mjs, esbuild from `npm ci`); a package
// from npm ships lib/client.js and neither the source nor the build script.
let ensureClientBuilt = () => 'no-source'
if (existsSync(join(SELF_DIR, 'client', 'index.tsx'))) ({ ensureClientBuilt } = await import('./build-client.mjs'))

const USAGE = `usage: node scripts/install.mjs --profile DIR [--uninstall] [--dry-run] [--package PATH_OR_TGZ]
                                 [--via auto|dsh|copy]

  --profile DIR      a DSH profile directory, <DSH_HOME>/profiles/<name>/ (DSH_HOME defaults to ~/.dsh)
  --uninstall        remove what an install wrote (dependency, bundle entry, node_modules copy, kept tarball)
  --dry-run          print what would change; change nothing
  --package P        install this package directory or npm-pack tarball instead of the package this
                     script belongs to (a directory is packed with npm pack)
  --via V            auto (default): the host's \`dsh plugin\` when dsh and pnpm are usable here, else copy;
                     dsh: only the host's command; copy: this script writes node_modules and package.json
  -h, --help         this text
`

// ---------------------------------------------------------------------------------------------------------
// arguments

function parseArgs(argv) {
  let parsed
  try {
    parsed = parse('install.mjs', argv, {
      profile: { type: 'string' }, package: { type: 'string' }, via: { type: 'string' },
      uninstall: { type: 'boolean' }, 'dry-run': { type: 'boolean' },
    })
  } catch (error) {
    if (error instanceof UsageError) throw Object.assign(usageError(error.message), { showUsage: true })
    throw error
  }
  const { help, values } = parsed
  const options = { help, uninstall: values.uninstall === true, dryRun: values['dry-run'] === true, profile: values.profile, package: values.package, via: values.via ?? 'auto' }
  if (!help && options.profile === undefined) throw Object.assign(usageError('--profile DIR is required'), { showUsage: true })
  if (!['auto', 'dsh', 'copy'].includes(options.via)) {
    throw Object.assign(usageError(`--via must be auto, dsh or copy; got ${JSON.stringify(options.via)}`), { showUsage: true })
  }
  return options
}

// ---------------------------------------------------------------------------------------------------------
// the profile

function whatAProfileIs(extra = '') {
  const home = resolveDshHome()
  return `${extra}A DSH profile directory is <DSH_HOME>/profiles/<name>/ (here: ${profileDir(home, '<name>')}); `
    + 'its package.json has "dsh": { "profile": { "bundles": [ ...bundle package names... ] } }. '
    + 'Create one by running `dsh web` once (profile "web"; `dsh --profile headless --dump-config` creates "headless" '
    + 'without starting anything), or `dsh plugin --profile NAME add <package>` for any name; then pass that directory to --profile.'
}

/** rc.8 `resolveProfileDir` name rule (packages/boot/app-boot/src/profile.ts). */
function forbiddenProfileName(name) {
  return name === '' || name.includes('/') || name.includes('\\') || name === '.' || name === '..' || name === 'node_modules'
}

const isInside = (root, path) => path === root || path.startsWith(root.endsWith(sep) ? root : root + sep)

/**
 * Refuse a write that would go through a symlink out of the profile: `path` itself (when `self`) and every
 * directory between the profile and it that exists must resolve inside the profile's real path.
 */
function refuseWriteOutside(profile, path, { self = false } = {}) {
  const steps = relative(profile.dir, path).split(sep)
  const upTo = self ? steps.length : steps.length - 1
  for (let i = 1; i <= upTo; i++) {
    const step = join(profile.dir, ...steps.slice(0, i))
    if (kindOf(step) !== 'symlink') continue
    let target
    try {
      target = realpathSync(step)
    } catch {
      target = '(a dangling link)'
    }
    if (!isInside(profile.real, target)) {
      throw usageError(`${step} is a symlink that leaves the profile (→ ${target}); this script writes only inside `
        + `${profile.dir}. Replace the link by a directory (or remove it) and run again. Nothing was changed.`)
    }
  }
}

function readProfile(profileArg) {
  const dir = resolve(profileArg)
  const kind = kindFollowing(dir)
  if (kind === 'missing') {
    const bare = !/[\\/]/.test(profileArg) && profileArg !== '.' && profileArg !== '..'
    const hint = bare ? ` Did you mean the profile named "${profileArg}": --profile ${profileDir(resolveDshHome(), profileArg)} ?` : ''
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
  let parsed
  try {
    parsed = parseManifest(text)
  } catch (error) {
    throw usageError(`${manifestPath} is not valid JSON (${error.message}); fix it by hand — this script does not overwrite it. Nothing was changed.`)
  }
  const manifest = parsed.value
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
  try {
    checkOwnedPlaces(parsed)
  } catch (error) {
    if (!(error instanceof ManifestShapeError)) throw error
    throw usageError(`${manifestPath}: ${error.message}, a place this script edits; which copy counts differs between readers, `
      + 'so it does not guess. Remove one by hand and run again. Nothing was changed.')
  }
  const read = { dir, real: realpathSync(dir), name, manifestPath, text, manifest, parsed }
  refuseWriteOutside(read, manifestPath, { self: true })
  return read
}

/** Refuse every move of a plan whose target is reached through a symlink out of the profile. */
function refusePlanOutside(profile, plan) {
  for (const move of plan.moves) refuseWriteOutside(profile, move.target)
}

// ---------------------------------------------------------------------------------------------------------
// the package

function loadPackage(packageArg) {
  if (packageArg === undefined) {
    // a clone: its web client is built from client/ when the source is newer (npm pack runs here with
    // --ignore-scripts, so `prepack` does not); a package from npm ships lib/client.js and no client/
    ensureClientBuilt()
    return packPackage(SELF_DIR, { kind: 'dir', buildHint: BUILD_HINT, exitCodeForBadPackage: 1 })
  }
  const path = resolve(packageArg)
  const kind = kindFollowing(path)
  if (kind === 'dir') return packPackage(path, { kind, buildHint: BUILD_HINT, exitCodeForBadPackage: 2 })
  if (kind === 'file') return packPackage(path, { kind, buildHint: BUILD_HINT, exitCodeForBadPackage: 2 })
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

const list = items => `[${items.join(', ')}]`

function planInstall(profile, pkg) {
  const { dir, manifest } = profile
  const { name } = pkg
  const store = storeDirName(name)
  const storeDir = join(dir, store)
  const nmDir = packageDir(dir, name)
  const spec = `file:./${store}/${pkg.tgzName}`
  const oldRecord = readRecord(storeDir)
  const created = {
    dependencies: oldRecord.created?.dependencies === true,
    bundles: oldRecord.created?.bundles === true,
    nodeModules: oldRecord.created?.nodeModules === true,
    scopeDir: oldRecord.created?.scopeDir === true,
  }
  const changes = []
  let edited = profile.parsed
  if (manifest.dependencies === undefined) created.dependencies = true
  const previousSpec = manifest.dependencies?.[name]
  if (previousSpec !== spec) {
    edited = setDependency(edited, name, spec)
    changes.push(`package.json: dependencies[${JSON.stringify(name)}] = ${JSON.stringify(spec)}`
      + (previousSpec === undefined ? '' : ` (was ${JSON.stringify(previousSpec)})`))
  }
  if (manifest.dsh.profile.bundles === undefined) created.bundles = true
  const bundles = [...(manifest.dsh.profile.bundles ?? [])]
  const bundlesChanged = !bundles.includes(name)
  if (bundlesChanged) {
    edited = appendBundle(edited, name)
    bundles.push(name)
    changes.push(`package.json: dsh.profile.bundles += ${JSON.stringify(name)} → ${list(bundles)}`)
  }
  const manifestText = edited === profile.parsed ? undefined : textOf(edited)

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
  const nmDir = packageDir(dir, name)
  const record = readRecord(storeDir)
  const changes = []
  let edited = profile.parsed
  const spec = manifest.dependencies?.[name]
  if (spec !== undefined) {
    edited = removeDependency(edited, name, record.created?.dependencies === true)
    const ours = typeof spec === 'string' && spec.startsWith(`file:./${store}/`)
    changes.push(`package.json: removed dependencies[${JSON.stringify(name)}] (${JSON.stringify(spec)}${ours ? '' : ', not written by this script'})`)
  }
  const bundles = manifest.dsh.profile.bundles
  const bundlesChanged = Array.isArray(bundles) && bundles.includes(name)
  if (bundlesChanged) {
    edited = removeBundle(edited, name, record.created?.bundles === true)
    changes.push(`package.json: dsh.profile.bundles -= ${JSON.stringify(name)} → ${list(bundles.filter(item => item !== name))}`)
  }
  const manifestText = edited === profile.parsed ? undefined : textOf(edited)
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
// the route: the host's own `dsh plugin` when it is usable here, else this script copies

function chooseRoute(via, profile) {
  if (via === 'copy') return { via: 'copy', why: '--via copy' }
  const dsh = findDsh(profile.dir)
  if (dsh.ok) return { via: 'dsh', dsh, why: `the host's own command (DSH ${dsh.version}, ${dsh.bin}; pnpm on PATH)` }
  if (via === 'dsh') throw new InstallError(`--via dsh: ${dsh.reason}. Nothing was changed; --via copy installs without it.`)
  return { via: 'copy', why: `${dsh.reason}, so this script copies` }
}

/** Does a `file:` dependency spec name this tarball (pnpm writes it absolute; a hand edit may be relative)? */
function specNames(spec, dir, tarball) {
  return typeof spec === 'string' && spec.startsWith('file:') && resolve(dir, spec.slice('file:'.length)) === tarball
}

function planInstallDsh(profile, pkg, dsh) {
  const { dir, manifest } = profile
  const { name } = pkg
  const store = storeDirName(name)
  const storeDir = join(dir, store)
  const tarball = join(storeDir, pkg.tgzName)
  const record = { name, version: pkg.version, tarball: pkg.tgzName, dependency: `file:${tarball}`, via: 'dsh', created: {} }
  const expectedStore = new Map([[pkg.tgzName, pkg.tgz], [RECORD, Buffer.from(JSON.stringify(record, undefined, 2) + '\n')]])
  const storeChanged = !sameTree(readTree(storeDir), expectedStore)
  const nmKind = kindOf(packageDir(dir, name))
  const sameCode = sameTree(readTree(packageDir(dir, name)), new Map(pkg.entries.map(entry => [entry.path, entry.data])))
  const upToDate = !storeChanged && sameCode && specNames(manifest.dependencies?.[name], dir, tarball)
    && (manifest.dsh.profile.bundles ?? []).includes(name)
  const changes = []
  if (!upToDate) {
    if (storeChanged) changes.push(`${store}/${pkg.tgzName}: written (the file: dependency points here)`)
    changes.push(`dsh plugin --profile ${dsh.name} add ${tarball}`)
  }
  return {
    changes,
    route: 'dsh',
    args: ['add', tarball],
    bundlesChanged: !(manifest.dsh.profile.bundles ?? []).includes(name),
    codeChanged: !sameCode && nmKind !== 'missing',
    moves: storeChanged ? [{ target: storeDir, staged: 'store', entries: [...expectedStore].map(([path, data]) => ({ path, data, mode: 0o644 })) }] : [],
    cleanups: [],
    store,
  }
}

function planUninstallDsh(profile, name, dsh) {
  const store = storeDirName(name)
  const storeDir = join(profile.dir, store)
  const changes = [`dsh plugin --profile ${dsh.name} remove ${name}`]
  const moves = []
  if (kindOf(storeDir) !== 'missing') {
    moves.push({ target: storeDir })
    changes.push(`${store}/: removed (kept tarball)`)
  }
  return { changes, route: 'dsh', args: ['remove', name], bundlesChanged: true, codeChanged: false, moves, cleanups: [], store }
}

/** What the host's command changed in package.json, as change lines. */
function manifestDiff(before, after, name) {
  const out = []
  const [was, now] = [before.dependencies?.[name], after.dependencies?.[name]]
  if (was !== now) {
    out.push(now === undefined ? `package.json: removed dependencies[${JSON.stringify(name)}] (${JSON.stringify(was)})`
      : `package.json: dependencies[${JSON.stringify(name)}] = ${JSON.stringify(now)}${was === undefined ? '' : ` (was ${JSON.stringify(was)})`}`)
  }
  const [had, has] = [before.dsh?.profile?.bundles ?? [], after.dsh?.profile?.bundles ?? []]
  if (had.includes(name) !== has.includes(name)) {
    out.push(`package.json: dsh.profile.bundles ${has.includes(name) ? '+=' : '-='} ${JSON.stringify(name)} → ${list(has)}`)
  }
  return out
}

// ---------------------------------------------------------------------------------------------------------
// apply: stage inside the profile, rename into place, write package.json last; roll back on any failure

function apply(profile, plan, dsh) {
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
    if (plan.route === 'dsh') {
      // The host's command writes package.json (and node_modules, pnpm-lock.yaml) itself.
      const r = dshPlugin(dsh, plan.args)
      if (!r.ok) {
        const changed = readFileSync(manifestPath, 'utf8') !== profile.text
        const tail = r.output.trim().split('\n').slice(-12).map(line => `  | ${line}`).join('\n')
        throw new InstallError(`\`dsh plugin --profile ${dsh.name} ${plan.args.join(' ')}\` failed (exit ${r.status}):\n${tail}`
          + (changed ? `\n${manifestPath} was changed by that command; check it.` : ''))
      }
    } else if (plan.manifestText !== undefined) {
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

/**
 * The bundle row as the host will compose it, read by the core's patch evaluation (the same reader as
 * `dsh-session-mail doctor`; layers in the host's order: bundle patches, profile, DSH_HOME). The row id is
 * the package name (this package's cordis.patch.yml inserts `id: dsh-session-mail`).
 * @returns {{ state?: object, unavailable?: string }}
 */
function rowState(profile, pkg) {
  const { core, error } = loadCore()
  if (core === undefined) return { unavailable: `this script's native addon does not load: ${String(error?.message ?? error).split('\n')[0]}` }
  const textOf = file => { try { return readFileSync(file, 'utf8') } catch { return null } }
  const layers = [
    ...pkg.patchFiles.map(patch => {
      const path = patch.replace(/^\.\//, '')
      return { label: `${pkg.name}/${path} (bundle)`, text: pkg.entries.find(entry => entry.path === path)?.data.toString('utf8') ?? null }
    }),
    { label: join(profile.dir, 'cordis.patch.yml'), text: textOf(join(profile.dir, 'cordis.patch.yml')) },
  ]
  if (basename(dirname(profile.dir)) === 'profiles') {
    const home = join(dirname(dirname(profile.dir)), 'cordis.patch.yml')
    layers.push({ label: home, text: textOf(home) })
  }
  return { state: core.patchRowState(layers, pkg.name, pkg.name) }
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
  const { state, unavailable } = rowState(profile, pkg)
  const out = []
  if (state !== undefined && !state.inserted) {
    out.push(`note: ${pkg.name}'s bundle patch inserts no row with id ${JSON.stringify(pkg.name)}; to switch it off, name the id its `
      + `${pkg.patchFiles.join(', ')} inserts in a "- id: <row id>" / "disabled: true" override in ${join(profile.dir, 'cordis.patch.yml')}.`)
  } else {
    out.push(`To switch it off without uninstalling, add this override to ${join(profile.dir, 'cordis.patch.yml')} `
      + '(a YAML list: replace a bare `[]` with it):\n'
      + `  - id: ${pkg.name}\n    disabled: true\n`
      + 'That file is hot-reloaded (rc.8 and 0.1.7), so no restart is needed; remove the override to switch it back on.')
  }
  if (unavailable !== undefined) out.push(`note: the patch layers were not checked (${unavailable}).`)
  if (state?.disabled) out.push(`note: the row ${pkg.name} is switched off now by ${state.disabledBy} (disabled: true); remove that override to use the plugin.`)
  if (state?.configEnabled === false) out.push(`note: the row's config sets enabled: false (${state.configBy}): the plugin registers no tools.`)
  for (const error of state?.errors ?? []) out.push(`note: ${error} (the host refuses to boot the profile until it is fixed).`)
  return out.join('\n')
}

function notes(profile, via) {
  const out = []
  if (basename(dirname(profile.dir)) !== 'profiles') {
    out.push(`note: ${profile.dir} is not inside a "profiles" directory; DSH only loads <DSH_HOME>/profiles/<name>/.`)
  }
  if (profile.name === 'desktop') {
    out.push('note: the desktop profile belongs to the DSH Desktop app (0.1.6+); quit the app before changing it.')
  }
  if (via === 'copy' && existsSync(join(profile.dir, 'pnpm-lock.yaml'))) {
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
  let route
  if (options.uninstall) {
    const name = packageNameForUninstall(options.package)
    // The host's `remove` only knows dependencies; anything else an install left is removed by this script.
    route = profile.manifest.dependencies?.[name] === undefined ? { via: 'copy', why: `${name} is not a dependency of the profile` } : chooseRoute(options.via, profile)
    plan = route.via === 'dsh' ? planUninstallDsh(profile, name, route.dsh) : planUninstall(profile, name)
    refusePlanOutside(profile, plan)
    out.push(`${options.dryRun ? 'Dry run: uninstalling' : 'Uninstalling'} ${name} from profile "${profile.name}" (${profile.dir})`)
  } else {
    pkg = loadPackage(options.package)
    route = chooseRoute(options.via, profile)
    plan = route.via === 'dsh' ? planInstallDsh(profile, pkg, route.dsh) : planInstall(profile, pkg)
    refusePlanOutside(profile, plan)
    out.push(`${options.dryRun ? 'Dry run: installing' : 'Installing'} ${pkg.name} ${pkg.version} into profile "${profile.name}" (${profile.dir})`)
  }
  if (plan.changes.length === 0) {
    out.push(options.uninstall ? '  not installed, nothing to change' : '  already installed, nothing to change')
  } else {
    out.push(`  via ${route.via}: ${route.why}`)
    for (const change of plan.changes) out.push(prefix + change)
    if (!options.dryRun) {
      apply(profile, plan, route.dsh)
      if (route.via === 'dsh') {
        const after = parseManifest(readFileSync(profile.manifestPath, 'utf8')).value
        for (const change of manifestDiff(profile.manifest, after, pkg?.name ?? plan.args[1])) out.push(`  ${change}`)
      }
    }
    out.push(options.dryRun ? 'Dry run: nothing was changed.' : 'Done.')
  }
  out.push('', (options.dryRun && plan.changes.length > 0 ? 'After a real run: ' : '') + restartAdvice(plan, options.uninstall, profile.name))
  if (!options.uninstall) out.push('', switchOffAdvice(profile, pkg))
  const extra = notes(profile, route.via)
  if (!options.uninstall && route.via === 'copy' && pkg.dependencies.length > 0 && plan.changes.length > 0) {
    extra.push(`note: the copy route does not fetch ${pkg.name}'s dependencies (${pkg.dependencies.join(', ')}); `
      + `\`dsh plugin --profile ${profile.name} install\` or \`pnpm install\` in the profile does`
      + (pkg.name === SELF_NAME ? ` (${pkg.name} itself needs them only for this installer, not at run time).` : '.'))
  }
  if (extra.length) out.push('', ...extra)
  process.stdout.write(out.join('\n') + '\n')
  return 0
}

try {
  process.exitCode = main(process.argv.slice(2))
} catch (error) {
  if (error instanceof InstallError) {
    const state = error.rolledBack === true ? '\nThe profile was rolled back to its state before this run.' : ''
    process.stderr.write(`install.mjs: ${error.message}${state}\n`)
    if (error.showUsage === true) process.stderr.write(USAGE)
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
