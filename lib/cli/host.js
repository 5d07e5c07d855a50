// Where the host is and how to talk to it from outside: the web server URL (--url, DSH_WEB_URL, the
// default port) and small JSON-RPC helpers for the doctor.
import { randomUUID } from 'node:crypto'
import { UsageError } from './args.js'

/** The web app's default address (rc.8 `bundle/web-app/cordis.patch.yml`: 127.0.0.1:3080). */
const DEFAULT_URL = 'http://127.0.0.1:3080'

/**
 * The host's base URL: `--url`, else `DSH_WEB_URL` (the `dsh web:` line carries `?token=…`; only the
 * origin is kept — the launch token is never sent anywhere), else the default. Returns { url, source }.
 */
export function hostUrl(explicit, env = process.env, command = 'send') {
  const [raw, source] = explicit !== undefined
    ? [explicit, '--url']
    : env.DSH_WEB_URL?.trim() ? [env.DSH_WEB_URL.trim(), 'DSH_WEB_URL'] : [DEFAULT_URL, 'default']
  let u
  try {
    u = new URL(raw)
  } catch {
    throw new UsageError(`${source} ${JSON.stringify(raw)} is not a URL; expected e.g. ${DEFAULT_URL}`, command)
  }
  if (u.protocol !== 'http:') throw new UsageError(`${source} ${JSON.stringify(raw)} must be an http:// URL (the host's web server on loopback)`, command)
  return { url: u.origin, source }
}

/**
 * POST one client-request to `<url>/api/<path>`; resolves to { status, body } (body parsed when JSON)
 * or { error } when no HTTP answer came back.
 */
async function post(url, path, method, payload, { timeoutMs = 3000, headers = {} } = {}) {
  try {
    const res = await fetch(`${url}/api/${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ type: 'client-request', rpcId: randomUUID(), method, payload }),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    })
    const text = await res.text()
    let body = text
    try { body = JSON.parse(text) } catch { /* not JSON */ }
    return { status: res.status, body }
  } catch (e) {
    const cause = e?.cause?.code ?? e?.cause?.message ?? e?.name ?? 'error'
    return { error: e?.name === 'TimeoutError' ? `no answer within ${timeoutMs} ms` : `${cause}${e?.cause?.message && e.cause.code ? ` (${e.cause.message})` : ''}` }
  }
}

/** An rc.8 RPC (`/api/<method>` with the payload as is); resolves to result.value or throws. */
export async function rc8(url, method, payload, opts) {
  const r = await post(url, method, method, payload, opts)
  if (r.error) throw new Error(`${method}: ${r.error}`)
  if (r.status !== 200 || r.body?.result?.ok !== true) {
    const why = typeof r.body === 'string' ? r.body : JSON.stringify(r.body?.result?.error ?? r.body)
    throw new Error(`${method}: HTTP ${r.status}: ${why}`)
  }
  return r.body.result.value
}
