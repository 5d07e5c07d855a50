// One POST to the plugin's host route `/dsh-session-mail/<endpoint>` (lib/client-host.js), in the host's own
// Connection envelope (`client-request` → `server-response`): `{ok, value}` or `{ok:false, error}`; never throws.

export const CHANNEL = '/dsh-session-mail'

export interface RouteError { code: string; message?: string }
export type Result<T> = { ok: true; value: T } | { ok: false; error: RouteError }

export function call<T = any>(endpoint: string, payload?: object): Promise<Result<T>> {
  const rpcId = 'dsm-' + Math.random().toString(36).slice(2) + Date.now().toString(36)
  if (typeof fetch !== 'function') return Promise.resolve({ ok: false, error: { code: 'unreachable', message: 'no fetch here' } })
  return fetch(CHANNEL + '/' + endpoint, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'client-request', rpcId, method: endpoint, payload: payload || {} }),
  }).then(r => {
    if (!r.ok) return { ok: false, error: { code: 'http-' + r.status, message: 'HTTP ' + r.status } } as Result<T>
    return r.json().then((b: any) => (b && b.result ? b.result : { ok: false, error: { code: 'bad-response', message: 'no result' } }) as Result<T>)
  }).catch((e: any) => ({ ok: false, error: { code: 'unreachable', message: String((e && e.message) || e) } }) as Result<T>)
}

/** A route this host does not have (an older plugin half, or a sibling route not built yet). */
export function missing(r: Result<unknown>): boolean {
  return !r.ok && (r.error.code === 'not-found' || r.error.code === 'http-404')
}
