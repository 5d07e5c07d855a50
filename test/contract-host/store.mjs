// Contract host: V4 session log on disk, multi-frame zstd, and the credentials document.
//
// Reference sources (read, not copied):
//   - packages/session/session-persistence-jsonl/src/format.ts (Z15/Z17) `projectKey`, `encodeSegment`,
//     `projectDir`, `sessionDir`, `generationLogFilename`, `HeaderLine`, `HEADER_REQUIRED_KEYS`,
//     `HEADER_OPTIONAL_KEYS`, `isHeaderLine`
//   - packages/session/session-persistence-jsonl/src/index.ts (R8) `encodeMaterialization` (header in its own
//     frame), `encodeEventBatch` (one frame per append batch), `DEFAULT_COMPRESSION = 'zstd'`
//   - packages/session/session-persistence-jsonl/src/zstd.ts (R8) `compressZstdFrame` (ZSTD_c_checksumFlag = 1)
//   - packages/core/session/src/types.ts (R8/Z17) `SessionEvent` envelope {type, seq, time, data, surfaceOp?}
//   - packages/credentials/credentials-local/src/index.ts (Z17) `CREDENTIALS_FILENAME`, `DOCUMENT_VERSION`,
//     `assertOwnerOnly` (0600), records layout
//   - packages/client/connection/src/browser-auth.ts (Z17) `AUTH_RECORD_KEY`, `initializeSecret`

import { appendFileSync, mkdirSync, writeFileSync, chmodSync } from 'node:fs'
import { join } from 'node:path'
import { constants, zstdCompressSync } from 'node:zlib'

/** Z17 `SESSION_FORMAT_VERSION` (core/session) is 4. */
export const SESSION_FORMAT_VERSION = 4
const CHECKSUM_OPTIONS = { params: { [constants.ZSTD_c_checksumFlag]: 1 } }

// format.ts `encodeSegment`: [A-Za-z0-9._-] literal (never `~`), every other UTF-16 unit `~XXXX`;
// `.` and `..` escaped.
export function encodeSegment(raw) {
  if (raw.length === 0) throw new Error('cannot encode an empty path segment')
  if (raw === '.') return '~002E'
  if (raw === '..') return '~002E~002E'
  let out = ''
  for (let i = 0; i < raw.length; i++) {
    const code = raw.charCodeAt(i)
    const ch = String.fromCharCode(code)
    out += ch !== '~' && /^[A-Za-z0-9._-]$/.test(ch) ? ch : '~' + code.toString(16).toUpperCase().padStart(4, '0')
  }
  return out
}

// format.ts `projectKey`: separator runs `/ \ :` -> one `-`, unsafe units `~XXXX`,
// leading dashes stripped ('root' if empty), wrapped `--<slug max 251>--`.
export function projectKey(cwd) {
  if (cwd.length === 0) throw new Error('cannot encode an empty project path')
  let readable = ''
  let separatorRun = false
  for (let i = 0; i < cwd.length; i++) {
    const code = cwd.charCodeAt(i)
    const ch = String.fromCharCode(code)
    if (ch === '/' || ch === '\\' || ch === ':') {
      if (!separatorRun) readable += '-'
      separatorRun = true
    } else if (ch !== '~' && /^[A-Za-z0-9._-]$/.test(ch)) {
      readable += ch
      separatorRun = false
    } else {
      readable += '~' + code.toString(16).toUpperCase().padStart(4, '0')
      separatorRun = false
    }
  }
  const slug = readable.replace(/^-+/, '') || 'root'
  return `--${slug.slice(0, 251)}--`
}

// format.ts `projectDir` / `sessionDir`: a header without cwd lives under `_no-cwd`.
export function sessionDir(sessionsRoot, cwd, id) {
  return join(sessionsRoot, cwd === undefined ? '_no-cwd' : projectKey(cwd), encodeSegment(id))
}

// format.ts `generationLogFilename` + `logSuffix('zstd')`: session.v4.jsonl.zstd
export function logFilename() {
  return `session.v${SESSION_FORMAT_VERSION}.jsonl.zstd`
}

/**
 * format.ts `HeaderLine`: required type, version, id, createdAt, isSeeded, delegationDepth;
 * optional cwd, parentSession, origin ('subagent'), agentPreset. No other key. (Key order follows
 * the interface declaration; the real encoder is `sessionFormatCatalog.encodeCurrentHeader`, not read.)
 */
export function headerLine(meta) {
  return {
    type: 'session',
    version: SESSION_FORMAT_VERSION,
    id: meta.id,
    createdAt: meta.createdAt,
    ...(meta.cwd === undefined ? {} : { cwd: meta.cwd }),
    ...(meta.parentSession === undefined ? {} : { parentSession: meta.parentSession }),
    isSeeded: meta.isSeeded ?? false,
    ...(meta.origin === undefined ? {} : { origin: meta.origin }),
    delegationDepth: meta.delegationDepth ?? 0,
    ...(meta.agentPreset === undefined ? {} : { agentPreset: meta.agentPreset }),
  }
}

/** zstd.ts `compressZstdFrame`: one independently decodable, checksummed frame. */
export function compressFrame(text) {
  return zstdCompressSync(Buffer.from(text, 'utf8'), CHECKSUM_OPTIONS)
}

/**
 * One session's log file. The header is written as its own frame when the session is created
 * (R8 `encodeMaterialization` writes header frame + first batch frame together; here the header
 * frame is written at creation so a freshly created session is visible on disk before its first
 * event). Every later `appendBatch` is one frame (R8 `encodeEventBatch`).
 */
export class SessionLogFile {
  constructor(sessionsRoot, meta) {
    this.dir = sessionDir(sessionsRoot, meta.cwd, meta.id)
    this.path = join(this.dir, logFilename())
    this.frames = 0
    mkdirSync(this.dir, { recursive: true })
    writeFileSync(this.path, compressFrame(JSON.stringify(headerLine(meta)) + '\n'))
    this.frames = 1
  }

  /** Append one batch of events as one frame (no-op for an empty batch). */
  appendBatch(events) {
    if (events.length === 0) return
    const body = events.map(event => JSON.stringify(event)).join('\n') + '\n'
    appendFileSync(this.path, compressFrame(body))
    this.frames += 1
  }
}

/**
 * credentials-local `parseCredentialsDocument` layout: `version: 1`, `refs:` map, `records:` map;
 * the browser-session record is `{kind: grant, payload: {version: 1, secret: <b64url 32 bytes>}}`
 * (browser-auth.ts `initializeSecret`). Written with mode 0600 (`assertOwnerOnly`).
 */
export function writeCredentials(dshHome, secretB64) {
  const path = join(dshHome, '.credentials.yaml')
  const text = [
    'version: 1',
    'refs: {}',
    'records:',
    '  client-connection/browser-session:',
    '    kind: grant',
    '    payload:',
    '      version: 1',
    `      secret: ${secretB64}`,
    '',
  ].join('\n')
  writeFileSync(path, text, { mode: 0o600 })
  chmodSync(path, 0o600)
  return path
}
