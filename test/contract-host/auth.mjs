// Contract host: the /api trust fence and the browser-session cookie check.
//
// Reference sources (read, not copied):
//   Z17 = zsagi1368/deepseek-harness-zDSH (0.1.7-rc.2 era), R8 = toninfo/deepseek-harness (0.1.0-rc.8)
//   - packages/client/connection/src/api-request-trust.ts   (Zx @55432965) `apiTrustRejection`
//   - packages/client/connection/src/loopback-hostname.ts   (R8) `isLoopbackHostname`
//   - packages/client/connection/src/browser-auth.ts        (Z17 @1dd6c6a3) `BrowserAuth.isAuthenticated`,
//     `decodeCookie`, `decodeBase64Url`, `cookieName`, `cookieValue`, `requestAuthority`
//   - packages/client/connection/src/rpc-host.ts            (Z17) `requestRejection` (403 before 401)

import { createHash, createHmac, timingSafeEqual } from 'node:crypto'

const DAY_MILLISECONDS = 24 * 60 * 60 * 1000
const COOKIE_PREFIX = 'dsh-auth-'
const BASE64URL_PATTERN = /^[A-Za-z0-9_-]*$/

export function encodeBase64Url(bytes) {
  return Buffer.from(bytes).toString('base64url')
}

// browser-auth.ts `decodeBase64Url`: only canonical base64url (re-encoding must round-trip).
export function decodeBase64Url(value) {
  if (typeof value !== 'string' || !BASE64URL_PATTERN.test(value) || value.length % 4 === 1) return undefined
  const decoded = Buffer.from(value, 'base64url')
  return encodeBase64Url(decoded) === value ? decoded : undefined
}

function headerOf(headers, name) {
  const value = headers[name]
  return typeof value === 'string' ? value : undefined
}

// api-request-trust.ts `parseAuthority`: WHATWG http parse of the Host authority.
function parseAuthority(authority) {
  try {
    return new URL(`http://${authority}`)
  } catch {
    return undefined
  }
}

// loopback-hostname.ts (R8) `isLoopbackHostname`: localhost, [::1], any 127/8 dotted quad.
export function isLoopbackHostname(hostname) {
  if (hostname === 'localhost' || hostname === '[::1]') return true
  const parts = hostname.split('.')
  return parts.length === 4 && parts[0] === '127'
    && parts.every(part => /^\d{1,3}$/.test(part) && Number(part) <= 255)
}

// api-request-trust.ts `canonicalAuthority`: port judged under both special schemes.
function canonicalAuthority(entry, entryUrl) {
  const port = entryUrl.port !== '' ? entryUrl.port : new URL(`https://${entry}`).port
  return port === '' ? entryUrl.hostname : `${entryUrl.hostname}:${port}`
}

// api-request-trust.ts `isTrustedAuthority`: port-less entry = any port; else exact host:port.
function isTrustedAuthority(hostUrl, trustedHosts) {
  return trustedHosts.some((entry) => {
    const entryUrl = parseAuthority(entry)
    if (entryUrl === undefined) return false
    return canonicalAuthority(entry, entryUrl) === entryUrl.hostname
      ? entryUrl.hostname === hostUrl.hostname
      : entryUrl.host === hostUrl.host
  })
}

// api-request-trust.ts `assertTrustedAuthority`: a trustedHosts entry must be a bare canonical authority.
export function assertTrustedAuthority(entry) {
  const entryUrl = parseAuthority(entry)
  if (entryUrl !== undefined && canonicalAuthority(entry, entryUrl) === entry.toLowerCase()) return
  throw new Error(`contract-host: trustedHosts entry ${JSON.stringify(entry)} is not a bare host[:port] authority`)
}

/**
 * api-request-trust.ts `apiTrustRejection`: Host fence, then Sec-Fetch-Site, then Origin.
 * @returns undefined when trusted, else one of missing-host | bad-host | untrusted-host |
 *   cross-site | opaque-origin | origin-mismatch.
 */
export function apiTrustRejection(headers, trustedHosts) {
  const host = headerOf(headers, 'host')
  if (host === undefined) return 'missing-host'
  const hostUrl = parseAuthority(host)
  if (hostUrl === undefined) return 'bad-host'
  if (!isLoopbackHostname(hostUrl.hostname) && !isTrustedAuthority(hostUrl, trustedHosts)) return 'untrusted-host'
  if (headerOf(headers, 'sec-fetch-site') === 'cross-site') return 'cross-site'
  const origin = headerOf(headers, 'origin')
  if (origin === undefined) return undefined
  let originUrl
  try {
    originUrl = new URL(origin)
  } catch {
    return 'opaque-origin'
  }
  if (originUrl.protocol !== 'http:' && originUrl.protocol !== 'https:') return 'opaque-origin'
  if (originUrl.host === hostUrl.host) return undefined
  if (isLoopbackHostname(hostUrl.hostname) && isLoopbackHostname(originUrl.hostname)) return undefined
  return 'origin-mismatch'
}

// browser-auth.ts `requestAuthority`: `new URL('http://' + Host).host` (lowercase, no :80, [v6]).
export function requestAuthority(headers) {
  const host = headerOf(headers, 'host')
  if (host === undefined) return undefined
  try {
    return new URL(`http://${host}`).host
  } catch {
    return undefined
  }
}

// browser-auth.ts `cookieName`: 'dsh-auth-' + base64url(sha256(authority)).
export function cookieName(authority) {
  return COOKIE_PREFIX + encodeBase64Url(createHash('sha256').update(authority).digest())
}

// browser-auth.ts `cookieValue`: first `name=value` segment whose trimmed name matches exactly.
function cookieValue(headerValue, name) {
  for (const segment of headerValue.split(';')) {
    const at = segment.indexOf('=')
    if (at === -1 || segment.slice(0, at).trim() !== name) continue
    return segment.slice(at + 1).trim()
  }
  return undefined
}

// browser-auth.ts `signature`: HMAC-SHA256 keyed by the decoded 32-byte secret over the base64url BODY STRING.
function signature(secret, body) {
  return createHmac('sha256', secret).update(body).digest()
}

// browser-auth.ts `encodeCookie` (used by the host only for `mintCookie`, a test convenience).
export function encodeCookie(payload, secret) {
  const body = encodeBase64Url(Buffer.from(JSON.stringify(payload), 'utf8'))
  return `v1.${body}.${encodeBase64Url(signature(secret, body))}`
}

// browser-auth.ts `decodeCookie`: v1.<body>.<sig>, timing-safe signature, version 1, safe integers.
function decodeCookie(value, secret) {
  const parts = value.split('.')
  const [version, body, encodedSignature] = parts
  if (parts.length !== 3 || version !== 'v1' || body === undefined || encodedSignature === undefined) return undefined
  const actual = decodeBase64Url(encodedSignature)
  if (actual === undefined) return undefined
  const expected = signature(secret, body)
  if (actual.byteLength !== expected.byteLength || !timingSafeEqual(actual, expected)) return undefined
  let decoded
  try {
    const bodyBytes = decodeBase64Url(body)
    if (bodyBytes === undefined) return undefined
    decoded = JSON.parse(bodyBytes.toString('utf8'))
  } catch {
    return undefined
  }
  if (typeof decoded !== 'object' || decoded === null || Array.isArray(decoded)
    || decoded.version !== 1
    || typeof decoded.authority !== 'string'
    || !Number.isSafeInteger(decoded.issuedAt)
    || !Number.isSafeInteger(decoded.expiresAt)) return undefined
  return decoded
}

/**
 * browser-auth.ts `BrowserAuth.isAuthenticated`. No clock-skew allowance anywhere.
 * @param headers - node IncomingHttpHeaders (lowercase keys).
 * @param secret - the decoded 32-byte secret.
 * @param maxAgeDays - `cookieMaxAgeDays` (client/connection/src/index.ts Config, default 30).
 * @param now - the host clock in ms.
 */
export function isAuthenticated(headers, secret, maxAgeDays, now) {
  const authority = requestAuthority(headers)
  const rawCookie = headerOf(headers, 'cookie')
  if (authority === undefined || rawCookie === undefined) return false
  const value = cookieValue(rawCookie, cookieName(authority))
  if (value === undefined) return false
  const payload = decodeCookie(value, secret)
  if (payload === undefined || payload.authority !== authority) return false
  const maxAgeMilliseconds = maxAgeDays * DAY_MILLISECONDS
  return payload.issuedAt <= now
    && payload.expiresAt > now
    && payload.expiresAt > payload.issuedAt
    && payload.expiresAt - payload.issuedAt <= maxAgeMilliseconds
}

/** rpc-host.ts `requestRejection`: trust fence first (403), then the cookie (401). */
export function requestRejection(headers, { trustedHosts, secret, cookieMaxAgeDays, now }) {
  const reason = apiTrustRejection(headers, trustedHosts)
  if (reason !== undefined) return { status: 403, reason }
  if (!isAuthenticated(headers, secret, cookieMaxAgeDays, now)) return { status: 401 }
  return undefined
}
