// File-system helpers for the installer: atomic writes, reading/writing a file tree, a profile lock.

import {
  chmodSync, closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, readFileSync,
  realpathSync, renameSync, rmSync, statSync, writeFileSync, writeSync,
} from 'node:fs'
import { randomBytes } from 'node:crypto'
import { basename, dirname, join } from 'node:path'

/** A unique hidden sibling name for a temporary file or directory next to `path`. */
function tempSibling(path, tag = 'tmp') {
  return join(dirname(path), `.${basename(path)}.${tag}-${process.pid}-${randomBytes(4).toString('hex')}`)
}

/**
 * Replace `path` atomically: write a temp file in the same directory, fsync, rename over the target.
 * The target's mode is kept (a new file gets `defaultMode`). A symlinked target is written through,
 * so the link itself stays a link.
 */
export function atomicWriteFile(path, data, defaultMode = 0o644) {
  let target = path
  let mode = defaultMode
  try {
    target = realpathSync(path)
    mode = statSync(target).mode & 0o7777
  } catch (error) {
    if (error.code !== 'ENOENT') throw error
  }
  const temp = tempSibling(target)
  try {
    const fd = openSync(temp, 'wx', mode)
    try {
      writeSync(fd, data)
      fsyncSync(fd)
    } finally {
      closeSync(fd)
    }
    chmodSync(temp, mode) // openSync's mode passes through the umask; keep the exact mode
    renameSync(temp, target)
  } catch (error) {
    rmSync(temp, { force: true })
    throw error
  }
}

/**
 * Write entries (`{ path, data, mode }`, posix paths) under `root`, creating directories.
 * @returns {void}
 */
export function writeTree(root, entries) {
  mkdirSync(root, { recursive: true })
  for (const entry of entries) {
    const file = join(root, ...entry.path.split('/'))
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, entry.data, { mode: entry.mode })
    chmodSync(file, entry.mode)
  }
}

/**
 * Read every regular file under `root` into a Map path → Buffer (posix paths).
 * Returns undefined when `root` is not a real directory (missing, a file, or a symlink),
 * or when the tree holds anything but directories and regular files.
 */
export function readTree(root) {
  let stat
  try {
    stat = lstatSync(root)
  } catch (error) {
    if (error.code === 'ENOENT') return undefined
    throw error
  }
  if (!stat.isDirectory()) return undefined
  const files = new Map()
  const walk = (dir, rel) => {
    for (const dirent of readdirSync(dir, { withFileTypes: true })) {
      const path = rel ? `${rel}/${dirent.name}` : dirent.name
      const full = join(dir, dirent.name)
      if (dirent.isDirectory()) {
        if (walk(full, path) === false) return false
      } else if (dirent.isFile()) {
        files.set(path, readFileSync(full))
      } else {
        return false
      }
    }
    return true
  }
  return walk(root, '') ? files : undefined
}

/** What is at `path` without following a symlink: 'missing' | 'dir' | 'file' | 'symlink' | 'other'. */
export function kindOf(path) {
  let stat
  try {
    stat = lstatSync(path)
  } catch (error) {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return 'missing'
    throw error
  }
  if (stat.isSymbolicLink()) return 'symlink'
  if (stat.isDirectory()) return 'dir'
  if (stat.isFile()) return 'file'
  return 'other'
}

/** What `path` is after following symlinks: 'missing' (also a dangling link) | 'dir' | 'file' | 'other'. */
export function kindFollowing(path) {
  const kind = kindOf(path)
  if (kind !== 'symlink') return kind
  try {
    const stat = statSync(path)
    return stat.isDirectory() ? 'dir' : stat.isFile() ? 'file' : 'other'
  } catch {
    return 'missing'
  }
}

function pidAlive(pid) {
  try {
    process.kill(pid, 0)
    return true
  } catch (error) {
    return error.code === 'EPERM'
  }
}

/**
 * Take an exclusive lock file holding our pid. A lock left by a dead process is taken over.
 * @returns {() => void} release
 */
export function takeLock(path) {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o644)
      writeSync(fd, `${process.pid}\n`)
      closeSync(fd)
      return () => rmSync(path, { force: true })
    } catch (error) {
      if (error.code !== 'EEXIST') throw error
      const holder = Number.parseInt(readFileSync(path, 'utf8'), 10)
      if (Number.isInteger(holder) && holder > 0 && pidAlive(holder)) {
        const busy = new Error(`another install/uninstall (pid ${holder}) is working on this profile; lock file ${path}`)
        busy.code = 'LOCKED'
        throw busy
      }
      rmSync(path, { force: true }) // stale: its process is gone
    }
  }
  throw new Error(`could not take the lock ${path}`)
}

export { renameSync, rmSync }
