// Minimal, dependency-free .tgz reader and writer for npm-style package tarballs.
//
// Writer: POSIX ustar, regular files only (no directory entries, like `npm pack`), every path under
// `package/`, uid/gid 0, a fixed mtime (the one npm uses, 1985-10-26T08:15:00Z) and modes 0644/0755,
// so the same content always gives the same bytes.
// Reader: ustar + pax (`path`, `size`) + GNU long names; the first path component is stripped (as npm
// and pnpm do); symlinks, hard links and devices are refused; `..` and absolute paths are refused.

import { gunzipSync, gzipSync } from 'node:zlib'

const BLOCK = 512
const NPM_MTIME = 499162500 // seconds; npm pack's fixed timestamp

/**
 * @typedef {{ path: string, data: Buffer, mode: number }} TarEntry
 * `path` is posix and relative to the package root, `mode` is 0o644 or 0o755.
 */

function octal(value, width) {
  // width includes the trailing NUL
  const text = value.toString(8)
  if (text.length > width - 1) throw new Error(`tar: value ${value} does not fit in ${width - 1} octal digits`)
  return text.padStart(width - 1, '0') + '\0'
}

function splitUstarName(full) {
  const bytes = Buffer.byteLength(full)
  if (bytes <= 100) return { name: full, prefix: '' }
  // Split at a '/' so that the name part is ≤100 bytes and the prefix ≤155 bytes.
  for (let i = full.indexOf('/'); i !== -1; i = full.indexOf('/', i + 1)) {
    const prefix = full.slice(0, i)
    const name = full.slice(i + 1)
    if (Buffer.byteLength(prefix) <= 155 && Buffer.byteLength(name) <= 100 && name !== '') return { name, prefix }
  }
  throw new Error(`tar: path too long for a ustar header: ${full}`)
}

function header(fullPath, size, mode) {
  const { name, prefix } = splitUstarName(fullPath)
  const h = Buffer.alloc(BLOCK)
  h.write(name, 0, 100, 'utf8')
  h.write(octal(mode, 8), 100, 8, 'ascii')
  h.write(octal(0, 8), 108, 8, 'ascii') // uid
  h.write(octal(0, 8), 116, 8, 'ascii') // gid
  h.write(octal(size, 12), 124, 12, 'ascii')
  h.write(octal(NPM_MTIME, 12), 136, 12, 'ascii')
  h.write('        ', 148, 8, 'ascii') // checksum placeholder (spaces)
  h.write('0', 156, 1, 'ascii') // regular file
  h.write('ustar\0', 257, 6, 'ascii')
  h.write('00', 263, 2, 'ascii')
  h.write(prefix, 345, 155, 'utf8')
  let sum = 0
  for (const byte of h) sum += byte
  h.write(octal(sum, 7) + ' ', 148, 8, 'ascii')
  return h
}

/**
 * Build a gzipped npm-style tarball.
 * @param {TarEntry[]} entries
 * @returns {Buffer}
 */
export function createTgz(entries) {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
  const parts = []
  for (const entry of sorted) {
    parts.push(header(`package/${entry.path}`, entry.data.length, entry.mode))
    parts.push(entry.data)
    const pad = (BLOCK - (entry.data.length % BLOCK)) % BLOCK
    if (pad) parts.push(Buffer.alloc(pad))
  }
  parts.push(Buffer.alloc(BLOCK * 2))
  return gzipSync(Buffer.concat(parts))
}

function readString(buf, start, length) {
  const slice = buf.subarray(start, start + length)
  const nul = slice.indexOf(0)
  return (nul === -1 ? slice : slice.subarray(0, nul)).toString('utf8')
}

function readNumber(buf, start, length) {
  if (buf[start] & 0x80) {
    // base-256 (GNU) encoding for large values
    let value = 0
    for (let i = start + 1; i < start + length; i++) value = value * 256 + buf[i]
    return value
  }
  const text = readString(buf, start, length).trim()
  return text === '' ? 0 : parseInt(text, 8)
}

function parsePax(data) {
  const out = {}
  let offset = 0
  while (offset < data.length) {
    const space = data.indexOf(0x20, offset)
    if (space === -1) break
    const length = parseInt(data.subarray(offset, space).toString('ascii'), 10)
    if (!Number.isFinite(length) || length <= 0) break
    const record = data.subarray(space + 1, offset + length - 1).toString('utf8') // drop trailing \n
    const eq = record.indexOf('=')
    if (eq !== -1) out[record.slice(0, eq)] = record.slice(eq + 1)
    offset += length
  }
  return out
}

function safeRelative(raw) {
  const parts = raw.replace(/\\/g, '/').split('/').filter(part => part !== '' && part !== '.')
  if (raw.startsWith('/') || /^[A-Za-z]:/.test(raw)) throw new Error(`tar: absolute path in archive: ${raw}`)
  if (parts.includes('..')) throw new Error(`tar: path escapes the package: ${raw}`)
  return parts
}

/**
 * Read a gzipped (or plain) tarball into entries relative to its package root.
 * @param {Buffer} tgz
 * @returns {TarEntry[]}
 */
export function readTgz(tgz) {
  const tar = tgz[0] === 0x1f && tgz[1] === 0x8b ? gunzipSync(tgz) : tgz
  const entries = []
  let offset = 0
  let pax = {}
  let longName
  while (offset + BLOCK <= tar.length) {
    const h = tar.subarray(offset, offset + BLOCK)
    if (h.every(byte => byte === 0)) break
    let sum = 0
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : h[i]
    if (sum !== readNumber(h, 148, 8)) throw new Error(`tar: bad header checksum at byte ${offset}`)
    const type = String.fromCharCode(h[156] || 0x30)
    let size = readNumber(h, 124, 12)
    if (pax.size !== undefined && type !== 'x' && type !== 'g') size = Number(pax.size)
    const dataStart = offset + BLOCK
    const data = tar.subarray(dataStart, dataStart + size)
    if (data.length !== size) throw new Error('tar: truncated archive')
    offset = dataStart + Math.ceil(size / BLOCK) * BLOCK
    if (type === 'x') { pax = parsePax(data); continue }
    if (type === 'g') continue
    if (type === 'L') { longName = readString(data, 0, data.length); continue }
    const magic = readString(h, 257, 6)
    const prefix = magic.startsWith('ustar') ? readString(h, 345, 155) : ''
    const rawName = pax.path ?? longName ?? (prefix ? `${prefix}/${readString(h, 0, 100)}` : readString(h, 0, 100))
    pax = {}
    longName = undefined
    if (type === '5') continue // directories are implied by file paths
    if (type !== '0' && type !== '7') {
      throw new Error(`tar: unsupported entry type '${type}' for ${rawName} (links and devices are not allowed)`)
    }
    const parts = safeRelative(rawName)
    if (parts.length < 2) continue // a file at the archive root, outside the package folder
    const mode = readNumber(h, 100, 8) & 0o111 ? 0o755 : 0o644
    entries.push({ path: parts.slice(1).join('/'), data: Buffer.from(data), mode })
  }
  return entries
}
