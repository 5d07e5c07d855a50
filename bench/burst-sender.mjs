// One sender process of bench/burst.mjs (spawned by it; not meant to be run by hand): "another process" on the
// host's home, as `dsh-session-mail send` is (lib/cli: the same core and the same ToolRequest), or a raw client of the
// host's route. argv[2] = JSON {mode: 'send'|'raw', home, base, target, callers[], count, inflight, everyMs, wrap,
// config, tag}. It loads the core, prints `READY`, waits for one line on stdin, then runs `count` calls `inflight`
// at a time (or one every `everyMs`), and prints `BURST_RESULT <json>`: each call's wall time and accepted or not.
import { createInterface } from 'node:readline'
import { randomUUID } from 'node:crypto'
import http from 'node:http'
import { createRequire } from 'node:module'
import { core, toolRequest } from '../lib/cli/core.js'

const job = JSON.parse(process.argv[2])
// job.core: another build of the addon (burst.mjs --also), else the package's own
const c = job.mode !== 'send' ? null : job.core ? createRequire(import.meta.url)(job.core) : core()

const body = i => `burst ${job.tag} ${process.pid} ${i}`

/** One call: a send through the core (the CLI's request), or the raw POST of the text a send delivers. */
async function one(i) {
  const caller = job.callers[i % job.callers.length]
  const t0 = performance.now()
  if (job.mode === 'send') {
    const v = await c.run(toolRequest('send_session_message', { toSessionId: job.target, message: body(i) }, { home: job.home, caller, baseUrl: job.base, config: job.config }))
    return { ms: performance.now() - t0, ok: v.text.startsWith('accepted'), text: v.text.startsWith('accepted') ? undefined : v.text.slice(0, 400) }
  }
  const [pre, post] = job.wrap?.[caller] ?? job.wrap?.['*'] ?? ['', '']
  const payload = JSON.stringify({ type: 'client-request', rpcId: `dsh-session-mail:${randomUUID()}`, method: 'session.prompt', payload: { sessionId: job.target, mode: 'queue', content: [{ type: 'text', text: `${pre}${body(i)}${post}` }] } })
  const { status, text } = await httpPost(payload)
  let ok = false
  try { ok = status === 200 && JSON.parse(text)?.result?.ok === true } catch {}
  return { ms: performance.now() - t0, ok, text: ok ? undefined : `HTTP ${status} ${text.slice(0, 300)}` }
}

// The raw client: node:http over a keep-alive agent (lighter on this process's CPU than fetch/undici, so the
// baseline's own senders take as little CPU from the host as a client can).
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 })
function httpPost(payload) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${job.base}/api/session.prompt`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } }, res => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', d => { text += d })
      res.on('end', () => resolve({ status: res.statusCode, text }))
    })
    req.on('error', reject)
    req.end(payload)
  })
}

async function run() {
  const out = new Array(job.count)
  if (job.everyMs > 0) {
    // steady: one call every everyMs, whatever the previous one is doing
    const started = []
    const t0 = performance.now()
    for (let i = 0; i < job.count; i++) {
      const wait = t0 + i * job.everyMs - performance.now()
      if (wait > 0) await new Promise(r => setTimeout(r, wait))
      started.push(one(i).then(r => { out[i] = r }, e => { out[i] = { ms: NaN, ok: false, text: String(e?.message ?? e) } }))
    }
    await Promise.all(started)
    return out
  }
  let next = 0
  const worker = async () => {
    while (next < job.count) {
      const i = next++
      try { out[i] = await one(i) } catch (e) { out[i] = { ms: NaN, ok: false, text: String(e?.message ?? e) } }
    }
  }
  await Promise.all(Array.from({ length: Math.min(job.inflight, job.count) }, worker))
  return out
}

process.stdout.write('READY\n')
const rl = createInterface({ input: process.stdin })
rl.once('line', async () => {
  rl.close()
  const t0 = performance.now()
  const c0 = process.cpuUsage()
  const calls = await run()
  const c = process.cpuUsage(c0)
  // this process's CPU over the series, all threads (the core's worker threads among them), user and system
  agent.destroy()
  process.stdout.write(`BURST_RESULT ${JSON.stringify({ wallMs: performance.now() - t0, cpuMs: (c.user + c.system) / 1000, sysMs: c.system / 1000, calls })}\n`)
})
