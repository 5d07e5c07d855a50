// Produce the content of the package to install: from a package directory (the files npm would pack,
// plus the locally built `.node` addon) or from an existing tarball (`npm pack` output).

import { readdirSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { InstallError, usageError } from './errors.mjs'
import { createTgz, readTgz } from './tar.mjs'

// Never walked, never packed. `target` is the Rust build directory (gigabytes, never shipped).
const SKIP_DIRS = new Set(['.git', 'node_modules', 'target'])
// Never packed (npm's own always-ignored names, plus tarballs which are build output).
const ALWAYS_EXCLUDED = [/^\.npmrc$/, /(^|\/)\.DS_Store$/, /(^|\/)npm-debug\.log$/, /^package-lock\.json$/, /(^|\/)\.[^/]*\.swp$/, /\.orig$/, /\.tgz$/]
// Always packed when present at the package root (npm does the same for the first three).
const ALWAYS_INCLUDED_ROOT = [/^package\.json$/, /^readme(\.[^/]*)?$/i, /^licen[cs]e(\.[^/]*)?$/i]

/** Translate one npm `files` glob into a RegExp over a full posix path. */
function globToRegExp(glob) {
  let out = ''
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]
    if (c === '*') {
      if (glob[i + 1] === '*') {
        const slashAfter = glob[i + 2] === '/'
        out += slashAfter ? '(?:.*/)?' : '.*'
        i += slashAfter ? 2 : 1
      } else {
        out += '[^/]*'
      }
    } else if (c === '?') {
      out += '[^/]'
    } else if (c === '[') {
      const end = glob.indexOf(']', i + 1)
      if (end === -1) {
        out += '\\['
      } else {
        out += `[${glob.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\')}]`
        i = end
      }
    } else {
      out += c.replace(/[.+^${}()|\\]/g, '\\$&')
    }
  }
  return new RegExp(`^${out}$`)
}

/**
 * Compile the `files` list with npm-packlist semantics: every entry is anchored at the package root
 * (`*.node` means root-level .node files, as `npm pack` shows); an entry names a file or a directory
 * (then everything below it); `!entry` excludes; later entries win.
 * @returns {{ includes: (path: string) => boolean, mayDescend: (dirPath: string) => boolean }}
 */
function compileFiles(files) {
  const rules = files.map(raw => {
    let pattern = String(raw).trim()
    const negate = pattern.startsWith('!')
    if (negate) pattern = pattern.slice(1)
    pattern = pattern.replace(/^\.\//, '').replace(/^\/+/, '').replace(/\/+$/, '')
    const segments = pattern.split('/')
    return { negate, re: globToRegExp(pattern), segments: segments.map(seg => (seg === '**' ? seg : globToRegExp(seg))), empty: pattern === '' }
  }).filter(rule => !rule.empty)
  const matches = (rule, parts) => {
    for (let end = 1; end <= parts.length; end++) {
      if (rule.re.test(parts.slice(0, end).join('/'))) return true // the path itself, or a directory above it
    }
    return false
  }
  const includes = path => {
    const parts = path.split('/')
    let included = false
    for (const rule of rules) if (matches(rule, parts)) included = !rule.negate
    return included
  }
  // Whether a directory can hold an included file: some rule's leading segments fit its path.
  const mayDescend = dirPath => {
    const parts = dirPath.split('/')
    return rules.some(rule => {
      if (rule.negate) return false
      for (let i = 0; i < parts.length; i++) {
        const seg = rule.segments[i]
        if (seg === undefined) return matches(rule, parts) // the rule names a directory above this one
        if (seg === '**') return true
        if (!seg.test(parts[i])) return false
      }
      return true
    })
  }
  return { includes, mayDescend }
}

function walk(root, mayDescend) {
  const out = []
  const visit = (dir, rel) => {
    for (const dirent of readdirSync(dir, { withFileTypes: true })) {
      const path = rel ? `${rel}/${dirent.name}` : dirent.name
      const full = join(dir, dirent.name)
      let stat
      try {
        stat = statSync(full) // follow symlinks, as npm pack does for files
      } catch {
        continue // dangling link
      }
      if (stat.isDirectory()) {
        if (!SKIP_DIRS.has(dirent.name) && mayDescend(path)) visit(full, path)
      } else if (stat.isFile()) {
        out.push({ path, full, mode: stat.mode & 0o111 ? 0o755 : 0o644 })
      }
    }
  }
  visit(root, '')
  return out
}

function stripDotSlash(path) {
  return String(path).replace(/^\.\//, '').replace(/^\/+/, '')
}

function parseManifest(text, where, exitCode) {
  let manifest
  try {
    manifest = JSON.parse(text)
  } catch (error) {
    throw new InstallError(`${where} is not valid JSON: ${error.message}`, exitCode)
  }
  if (manifest === null || typeof manifest !== 'object' || Array.isArray(manifest)) {
    throw new InstallError(`${where} must hold a JSON object`, exitCode)
  }
  return manifest
}

/** The name becomes a path under node_modules: accept npm package names only (no `..`, no separators). */
export function validPackageName(name) {
  return typeof name === 'string' && name.length <= 214 && /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*$/.test(name)
}

/** Only the package name inside a tarball (for --uninstall, which needs nothing else). */
export function packageNameFromTarball(file) {
  try {
    const entry = readTgz(readFileSync(file)).findLast(item => item.path === 'package.json')
    return entry === undefined ? undefined : JSON.parse(entry.data.toString('utf8')).name
  } catch {
    return undefined
  }
}

/** The bundle patch files a manifest declares (rc.8: a string; 0.1.7 also accepts a list). */
export function bundlePatchFiles(manifest) {
  const patch = manifest.dsh?.bundle?.patch
  if (typeof patch === 'string') return [patch]
  if (Array.isArray(patch) && patch.length > 0 && patch.every(item => typeof item === 'string')) return patch
  return undefined
}

/**
 * Check a package's manifest + content and finish the description the installer uses.
 * @returns {{ name: string, version: string, manifest: object, entries: {path:string,data:Buffer,mode:number}[],
 *   tgz: Buffer, tgzName: string, nativeFiles: string[], patchFiles: string[], warnings: string[] }}
 */
function describe({ manifest, entries, tgz, origin, buildHint }) {
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
  const nativeFiles = entries.filter(entry => entry.path.endsWith('.node')).map(entry => entry.path).sort()
  if (nativeFiles.length === 0) {
    throw new InstallError(`${origin}: no built native addon (*.node) in the package — ${buildHint}`)
  }
  const warnings = []
  const deps = Object.keys(manifest.dependencies ?? {})
  if (deps.length > 0) {
    warnings.push(
      `${name} declares dependencies (${deps.join(', ')}); this installer does not fetch them — `
      + 'run `pnpm install` in the profile directory if the plugin needs them',
    )
  }
  const tgzName = `${name.replace(/^@/, '').replace('/', '-')}-${version}.tgz`
  return { name, version, manifest, entries, tgz, tgzName, nativeFiles, patchFiles, warnings }
}

/** Load the package from a directory: `files` + package.json/README/LICENSE/main + root `*.node`. */
export function packageFromDir(dir, { buildHint, exitCodeForBadPackage }) {
  let text
  try {
    text = readFileSync(join(dir, 'package.json'), 'utf8')
  } catch (error) {
    throw new InstallError(`${dir} is not a package: cannot read its package.json (${error.code ?? error.message})`, exitCodeForBadPackage)
  }
  const manifest = parseManifest(text, join(dir, 'package.json'), exitCodeForBadPackage)
  if (!Array.isArray(manifest.files) || manifest.files.length === 0) {
    throw new InstallError(
      `${join(dir, 'package.json')} has no "files" list, so what to install is not defined; `
      + 'add one, or pass a packed tarball (npm pack) with --package',
      exitCodeForBadPackage,
    )
  }
  const selected = compileFiles(manifest.files)
  const main = typeof manifest.main === 'string' ? stripDotSlash(manifest.main) : undefined
  const mayDescend = path => selected.mayDescend(path) || (main !== undefined && main.startsWith(`${path}/`))
  const entries = []
  for (const file of walk(dir, mayDescend)) {
    const { path } = file
    if (ALWAYS_EXCLUDED.some(re => re.test(path))) continue
    const atRoot = !path.includes('/')
    // Root *.node: the locally built napi-rs addon. It is git-ignored and usually not in "files" (a
    // published package gets it from a per-platform optional dependency), but a local install needs it.
    const forced = atRoot && (ALWAYS_INCLUDED_ROOT.some(re => re.test(path)) || path.endsWith('.node'))
    if (forced || path === main || selected.includes(path)) {
      entries.push({ path, data: readFileSync(file.full), mode: file.mode })
    }
  }
  entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  return describe({ manifest, entries, tgz: createTgz(entries), origin: dir, buildHint })
}

/** Load the package from a tarball (kept byte for byte). */
export function packageFromTarball(file, { buildHint }) {
  let tgz
  try {
    tgz = readFileSync(file)
  } catch (error) {
    throw usageError(`cannot read the tarball ${file} (${error.code ?? error.message})`)
  }
  let raw
  try {
    raw = readTgz(tgz)
  } catch (error) {
    throw usageError(`${file} is not a readable package tarball: ${error.message}`)
  }
  const byPath = new Map(raw.map(entry => [entry.path, entry])) // a repeated path: the last copy wins, as in tar
  const entries = [...byPath.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  const manifestEntry = byPath.get('package.json')
  if (manifestEntry === undefined) throw usageError(`${file} holds no package/package.json; is it an npm pack tarball?`)
  const manifest = parseManifest(manifestEntry.data.toString('utf8'), `package.json inside ${file}`, 2)
  return describe({ manifest, entries, tgz, origin: file, buildHint })
}
