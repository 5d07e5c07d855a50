// The package to install, as npm packs it: a package directory goes through `npm pack` (npm's own packlist:
// `files`, .npmignore, the always-included and always-excluded names), a tarball is taken byte for byte.
// The tarball is read with `tar` (node-tar, the package npm itself packs and unpacks with).

import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { spawnSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { list as tarList } from 'tar'
import { InstallError, usageError } from './errors.mjs'

/** The name becomes a path under node_modules: accept npm package names only (no `..`, no separators). */
export function validPackageName(name) {
  return typeof name === 'string' && name.length <= 214 && /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/.test(name)
}

/**
 * The regular files of a package tarball, relative to its package folder (npm and pnpm strip the first
 * path component). Links, devices and paths leaving the package are refused.
 * @returns {{ path: string, data: Buffer, mode: number }[]} sorted by path; a repeated path: the last copy
 */
function readTarball(file) {
  const byPath = new Map()
  let refused
  tarList({
    file,
    sync: true,
    strict: true,
    onReadEntry(entry) {
      const parts = entry.path.replace(/\\/g, '/').split('/').filter(part => part !== '' && part !== '.')
      if (entry.type === 'Directory') { entry.resume(); return }
      if (entry.type !== 'File' && entry.type !== 'OldFile' && entry.type !== 'ContiguousFile') {
        refused ??= `${entry.path}: a ${entry.type} entry (links and devices are not installed)`
      } else if (entry.path.startsWith('/') || /^[A-Za-z]:/.test(entry.path) || parts.includes('..')) {
        refused ??= `${entry.path}: the path leaves the package`
      }
      const chunks = []
      entry.on('data', chunk => chunks.push(chunk))
      entry.on('end', () => {
        if (parts.length < 2) return // at the archive root, outside the package folder
        byPath.set(parts.slice(1).join('/'), { path: parts.slice(1).join('/'), data: Buffer.concat(chunks), mode: entry.mode & 0o111 ? 0o755 : 0o644 })
      })
    },
  })
  if (refused !== undefined) throw new Error(refused)
  return [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

/** Only the package name inside a tarball (for --uninstall, which needs nothing else). */
export function packageNameFromTarball(file) {
  try {
    const entry = readTarball(file).find(item => item.path === 'package.json')
    return entry === undefined ? undefined : JSON.parse(entry.data.toString('utf8')).name
  } catch {
    return undefined
  }
}

/** The bundle patch files a manifest declares (rc.8: a string; 0.1.7 also accepts a list). */
function bundlePatchFiles(manifest) {
  const patch = manifest.dsh?.bundle?.patch
  if (typeof patch === 'string') return [patch]
  if (Array.isArray(patch) && patch.length > 0 && patch.every(item => typeof item === 'string')) return patch
  return undefined
}

const stripDotSlash = path => String(path).replace(/^\.\//, '').replace(/^\/+/, '')

/**
 * Check a package's manifest + content and finish the description the installer uses.
 * @returns {{ name: string, version: string, manifest: object, entries: {path:string,data:Buffer,mode:number}[],
 *   tgz: Buffer, tgzName: string, nativeFiles: string[], patchFiles: string[], dependencies: string[] }}
 */
function describe({ entries, tgz, origin, buildHint, exitCode }) {
  const manifestEntry = entries.find(entry => entry.path === 'package.json')
  if (manifestEntry === undefined) throw new InstallError(`${origin} holds no package/package.json; is it an npm pack tarball?`, exitCode)
  let manifest
  try {
    manifest = JSON.parse(manifestEntry.data.toString('utf8'))
  } catch (error) {
    throw new InstallError(`package.json in ${origin} is not valid JSON: ${error.message}`, exitCode)
  }
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    throw new InstallError(`package.json in ${origin} must hold a JSON object`, exitCode)
  }
  const { name, version } = manifest
  if (!validPackageName(name)) {
    throw new InstallError(`${origin}: package.json "name" is missing or not a valid npm package name (${JSON.stringify(name)})`)
  }
  if (typeof version !== 'string' || !/^[0-9A-Za-z][0-9A-Za-z.+-]*$/.test(version)) {
    throw new InstallError(`${origin}: package.json "version" is missing or invalid (${JSON.stringify(version)})`)
  }
  const present = new Set(entries.map(entry => entry.path))
  const patchFiles = bundlePatchFiles(manifest)
  if (patchFiles === undefined) {
    throw new InstallError(
      `${origin}: ${name} declares no dsh.bundle.patch in its package.json, so it is not a DSH bundle; `
      + 'rc.8 refuses to boot a profile that lists it in dsh.profile.bundles',
    )
  }
  for (const patch of patchFiles) {
    if (!present.has(stripDotSlash(patch))) {
      throw new InstallError(`${origin}: the bundle patch ${patch} (dsh.bundle.patch) is not in the package content; add it to "files"`)
    }
  }
  if (typeof manifest.main === 'string' && !present.has(stripDotSlash(manifest.main))) {
    throw new InstallError(`${origin}: the main file ${manifest.main} is not in the package content; add it to "files"`)
  }
  // a declared, missing web client fails the host's graph (rc.8 packages/client/modules): refuse it here
  const client = manifest.dsh?.client ? manifest.exports?.['./client'] : undefined
  if (typeof client === 'string' && !present.has(stripDotSlash(client))) {
    throw new InstallError(`${origin}: the web client ${client} (dsh.client) is not in the package content — build it: npm run build:client`)
  }
  const nativeFiles = entries.filter(entry => entry.path.endsWith('.node')).map(entry => entry.path).sort()
  if (nativeFiles.length === 0) {
    throw new InstallError(`${origin}: no built native addon (*.node) in the package — ${buildHint}`)
  }
  const tgzName = `${name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`
  return { name, version, manifest, entries, tgz, tgzName, nativeFiles, patchFiles, dependencies: Object.keys(manifest.dependencies ?? {}) }
}

/** `npm pack` a package directory into a temporary directory; returns the tarball's path and a cleanup. */
function npmPack(dir, exitCode) {
  const dest = mkdtempSync(join(tmpdir(), 'dsh-install-pack-'))
  const cleanup = () => rmSync(dest, { recursive: true, force: true })
  const r = spawnSync('npm', ['pack', '--json', '--ignore-scripts', '--loglevel=error', '--pack-destination', dest], {
    cwd: dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, shell: process.platform === 'win32',
  })
  if (r.error?.code === 'ENOENT') {
    cleanup()
    throw new InstallError(`npm is not on PATH; it packs ${dir} (npm's own file list). Install npm, or pass a packed tarball with --package`)
  }
  let report
  try {
    [report] = JSON.parse(r.stdout)
  } catch {
    report = undefined
  }
  if (r.status !== 0 || typeof report?.filename !== 'string') {
    cleanup()
    const why = (r.stderr || r.stdout || String(r.error ?? '')).trim().split('\n').slice(-3).join(' ')
    throw new InstallError(`${dir} is not a package npm can pack (npm pack exited ${r.status ?? r.signal}): ${why}`, exitCode)
  }
  // npm names a scoped tarball scope-name-version.tgz
  return { file: join(dest, report.filename.replace(/^@/, '').replace('/', '-')), cleanup }
}

/**
 * Load the package from a directory (`npm pack`) or from a tarball.
 * @param {string} path
 * @param {{ kind: 'dir' | 'file', buildHint: string, exitCodeForBadPackage: 1 | 2 }} options
 */
export function loadPackage(path, { kind, buildHint, exitCodeForBadPackage }) {
  if (kind === 'dir') {
    const packed = npmPack(path, exitCodeForBadPackage)
    try {
      const tgz = readFileSync(packed.file)
      const entries = readTarball(packed.file)
      return describe({ entries, tgz, origin: path, buildHint: `${buildHint} (and keep *.node in "files")`, exitCode: exitCodeForBadPackage })
    } finally {
      packed.cleanup()
    }
  }
  let tgz
  try {
    tgz = readFileSync(path)
  } catch (error) {
    throw usageError(`cannot read the tarball ${path} (${error.code ?? error.message})`)
  }
  let entries
  try {
    entries = readTarball(path)
  } catch (error) {
    throw usageError(`${path} is not a readable package tarball: ${error.message}`)
  }
  return describe({
    entries, tgz, origin: path, exitCode: 2,
    buildHint: `${buildHint}, then pack again with the .node file listed in "files", or pass the package directory instead`,
  })
}
