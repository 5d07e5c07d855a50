// A scriptable HTTP proxy on 127.0.0.1 for the real-host e2e tests: it sits in front of the host's web port
// so a test can make one exchange fail in a chosen way while everything else passes through.
//
//   const proxy = await startProxy({ target: web.base, rule })   // -> { port, url, log, setRule(fn), close() }
//   rule({ method, url, n, body, json }) -> one of
//     'pass'            forward, relay the answer (the default)
//     'forward-drop'    forward, wait for the host's full answer, then destroy the client socket without
//                       relaying it (the host accepted the request; the client sees a closed connection)
//     'drop'            destroy the client socket as soon as the request body is read (RST, never forwarded)
//     'stall'           never forward, never answer; the socket is held until the client gives up
//     'stall-forward'   hold the request until the client gives up (its timeout), THEN forward it to the
//                       host (a request that arrives late, after the sender stopped waiting)
//   `n` counts requests to the same `method url` (1 = the first). `json` is the parsed body (or undefined).
//   Every request is logged: { at, method, url, n, action, rpcId, sessionId, status?, clientGoneAt?, forwardedAt? }.
//
// No dependency besides node:http. The proxy forwards the request headers as they came (the Host header
// names the proxy port, which the host's loopback fence accepts).
import http from 'node:http'

/**
 * @param {{ target: string, rule?: (r: { method: string, url: string, n: number, body: Buffer, json: any }) => string }} options
 */
export async function startProxy({ target, rule = () => 'pass' }) {
  const to = new URL(target)
  const counts = new Map()
  const log = []
  const sockets = new Set()
  let current = rule

  const forward = (req, body) => new Promise((resolve, reject) => {
    const out = http.request({
      host: to.hostname, port: to.port, method: req.method, path: req.url,
      headers: { ...req.headers, 'content-length': String(body.length) },
    }, (res) => {
      const chunks = []
      res.on('data', c => chunks.push(c))
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }))
      res.on('error', reject)
    })
    out.on('error', reject)
    out.end(body)
  })

  const server = http.createServer(async (req, res) => {
    const chunks = []
    for await (const c of req) chunks.push(c)
    const body = Buffer.concat(chunks)
    let json
    try { json = JSON.parse(body.toString('utf8')) } catch { /* not JSON */ }
    const key = `${req.method} ${req.url}`
    const n = (counts.get(key) ?? 0) + 1
    counts.set(key, n)
    let action = 'pass'
    try { action = current({ method: req.method, url: req.url, n, body, json }) ?? 'pass' } catch { action = 'pass' }
    const entry = { at: Date.now(), method: req.method, url: req.url, n, action, rpcId: json?.rpcId, sessionId: json?.payload?.sessionId }
    log.push(entry)
    const clientGone = new Promise(r => req.socket.once('close', () => { entry.clientGoneAt = Date.now(); r() }))
    try {
      if (action === 'drop') {
        if (typeof req.socket.resetAndDestroy === 'function') req.socket.resetAndDestroy()
        else req.socket.destroy()
        return
      }
      if (action === 'stall') { await clientGone; return }
      if (action === 'stall-forward') {
        await clientGone
        entry.forwardedAt = Date.now()
        const r = await forward(req, body)
        entry.status = r.status
        return
      }
      const r = await forward(req, body)
      entry.status = r.status
      if (action === 'forward-drop') {
        req.socket.destroy()
        return
      }
      res.writeHead(r.status, r.headers)
      res.end(r.body)
    } catch (e) {
      entry.error = String(e?.message ?? e)
      if (!res.headersSent) { res.writeHead(502); res.end() } else req.socket.destroy()
    }
  })
  server.on('connection', (s) => { sockets.add(s); s.once('close', () => sockets.delete(s)) })
  await new Promise((resolve, reject) => { server.once('error', reject); server.listen(0, '127.0.0.1', resolve) })
  const port = server.address().port
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    log,
    /** The log entries of `POST /api/session.prompt`. */
    prompts: () => log.filter(e => e.method === 'POST' && e.url === '/api/session.prompt'),
    /** Replace the rule; the per-route counts and the log start over. */
    setRule(fn) { current = fn; counts.clear(); log.length = 0 },
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy()
      server.close(() => resolve())
    }),
  }
}

/** A port on 127.0.0.1 that nothing listens on (bound, then closed). */
export async function closedPort() {
  const s = http.createServer()
  await new Promise(r => s.listen(0, '127.0.0.1', r))
  const { port } = s.address()
  await new Promise(r => s.close(r))
  return port
}
