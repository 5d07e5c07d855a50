// Two contract-host instances on one DSH_HOME: what two 0.1.5+ host processes sharing a home look like to the
// plugin (test/contract-host/index.mjs; the writer lease between them is its WRITER_LEASES).
import { startContractHost } from '../contract-host/index.mjs'

/** Start both (the second on the first's home and secret) and point DSH_HOME at that home. */
export async function startTwoHosts() {
  const host1 = await startContractHost({})
  const host2 = await startContractHost({ dshHome: host1.dshHome, secret: host1.secret })
  process.env.DSH_HOME = host1.dshHome
  return { host1, host2 }
}

/** The `/api/session/prompt` requests `host` received for session `id`. */
export function promptsTo(host, id) {
  return host.requests.filter(r => r.path === '/api/session/prompt' && r.body?.payload?.args?.request?.sessionId === id)
}
