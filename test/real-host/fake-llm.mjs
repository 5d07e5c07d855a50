#!/usr/bin/env node
// Fake OpenAI/DeepSeek-compatible chat-completions server for the real-host e2e tests.
// Listens on 127.0.0.1 (port $FAKE_PORT, default 0) and prints one JSON line
// {"ready":true,"baseURL":"http://127.0.0.1:PORT/v1","pid":N} on stdout. Every request is appended to
// $FAKE_LOG (JSONL) when set. Also importable: `startFakeLlm({ port, log })`.
//
// It is scripted per session FROM THE PROMPT TEXT, so sessions need no shared script. Only the
// "fresh input" counts: the messages after the last assistant message of the request. User-role
// messages the host writes itself ("Current runtime context. …") are ignored.
//
//   no tools offered (title generation etc.)  -> a short title, "Fake title"
//   newest fresh user message has directives:
//     @@call <tool> [json args]   (one per line, several allowed) -> streams those tool calls in one
//                                   response; if any named tool is not offered -> text
//                                   "TOOL_NOT_OFFERED: <name>[, <name>…]" and no call
//     @@say <text>                -> reply exactly <text> (instead of ECHO)
//     @@sleep <ms>                -> wait <ms> before answering this request (abort-aware)
//     @@fail <status>             -> answer this request with HTTP <status> and an error body
//   otherwise the reply text is made of
//     "TOOL_RESULT_SEEN: <content>"   for each fresh tool result (in order), and
//     "ECHO: <first 200 chars>"       of the newest fresh user message, if there is one
//   joined by "\n". With no fresh input at all -> "OK".
//
//     @@relay ["id1","id2",…]    -> a relaying agent: calls sessions_send to the id after this session's own
//                                   id in the list (cyclically; the session id is the request header), with
//                                   the same text as the message, so the relay directive travels on
// Every request's log line has `toolBytes`: the compact-JSON size of each tools[] entry as the host sent it.
//
// Directives inside a delivered message work the same way (the newest fresh user message is what counts),
// but a directive line must start the line (leading spaces allowed).
import http from 'node:http'
import { appendFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

export const TITLE = 'Fake title'

/** Text of a chat message's content (string, or an array of parts). */
export function contentText(content) {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content.map(p => (typeof p === 'string' ? p : p?.text ?? (p?.type === 'image_url' ? '[image]' : ''))).join('')
  }
  return content == null ? '' : JSON.stringify(content)
}

/** Parse the directive lines of a text. */
export function parseDirectives(text) {
  const out = { calls: [], say: undefined, sleepMs: 0, fail: undefined }
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    let m
    if ((m = /^@@call\s+([A-Za-z0-9_.:-]+)\s*(.*)$/.exec(line))) {
      const rest = m[2].trim()
      let args = '{}'
      if (rest !== '') {
        try { args = JSON.stringify(JSON.parse(rest)) } catch { args = rest } // malformed on purpose: pass it through
      }
      out.calls.push({ name: m[1], args })
    } else if ((m = /^@@relay\s+(\[.*\])\s*$/.exec(line))) {
      try {
        const ids = JSON.parse(m[1])
        if (Array.isArray(ids) && ids.every(x => typeof x === 'string')) out.relay = { ids, line }
      } catch { /* not a relay line */ }
    } else if ((m = /^@@say\s(.*)$/.exec(line))) {
      out.say = m[1]
    } else if ((m = /^@@sleep\s+(\d+)\s*$/.exec(line))) {
      out.sleepMs = Number(m[1])
    } else if ((m = /^@@fail\s+(\d{3})\s*$/.exec(line))) {
      out.fail = Number(m[1])
    }
  }
  return out
}

/** User-role messages the host writes itself (not a prompt): the per-step runtime context snapshot. */
export function isHostContext(text) {
  return /^Current runtime context\b/.test(text)
}

function toolNames(body) {
  return Array.isArray(body.tools) ? body.tools.map(t => t?.function?.name ?? t?.name).filter(Boolean) : []
}

/** Decide the response to one chat-completions request body. */
export function decide(body, sessionId = null) {
  const messages = Array.isArray(body.messages) ? body.messages : []
  const offered = toolNames(body)
  if (offered.length === 0) return { kind: 'text', text: TITLE, why: 'no-tools' }
  let lastAssistant = -1
  messages.forEach((m, i) => { if (m?.role === 'assistant') lastAssistant = i })
  const fresh = messages.slice(lastAssistant + 1)
  const toolResults = fresh.filter(m => m?.role === 'tool')
  // the host appends its own user-role context after the prompt ("Current runtime context. …"); skip it
  const users = fresh.filter(m => m?.role === 'user' && !isHostContext(contentText(m.content)))
  const newestUser = users.length > 0 ? contentText(users[users.length - 1].content) : undefined
  const d = parseDirectives(newestUser ?? '')
  const common = { sleepMs: d.sleepMs }
  if (d.fail !== undefined) return { kind: 'fail', status: d.fail, ...common }
  if (d.relay !== undefined && d.calls.length === 0) {
    // an agent that forwards every peer message: to the id after its own in the list, the same relay line
    const i = d.relay.ids.indexOf(sessionId)
    const next = d.relay.ids[(i + 1) % d.relay.ids.length]
    d.calls.push({ name: 'sessions_send', args: JSON.stringify({ session_id: next, message: d.relay.line }) })
  }
  if (d.calls.length > 0) {
    const missing = d.calls.filter(c => !offered.includes(c.name)).map(c => c.name)
    if (missing.length > 0) return { kind: 'text', text: `TOOL_NOT_OFFERED: ${missing.join(', ')}`, ...common }
    return { kind: 'tools', calls: d.calls, ...common }
  }
  if (d.say !== undefined) return { kind: 'text', text: d.say, ...common }
  const parts = toolResults.map(m => `TOOL_RESULT_SEEN: ${contentText(m.content)}`)
  if (newestUser !== undefined) parts.push(`ECHO: ${newestUser.slice(0, 200)}`)
  return { kind: 'text', text: parts.length > 0 ? parts.join('\n') : 'OK', ...common }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms)
    signal.addEventListener('abort', () => { clearTimeout(timer); resolve() }, { once: true })
  })
}

/**
 * Start the server. Resolves to { baseURL, port, server, requests (in-memory array), close() }.
 * @param {{ port?: number, log?: string }} [options]
 */
export function startFakeLlm({ port = 0, log } = {}) {
  let n = 0
  const requests = []
  const server = http.createServer(async (req, res) => {
    const chunks = []
    for await (const c of req) chunks.push(c)
    if (req.method === 'GET' && /\/models$/.test(req.url)) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ object: 'list', data: [{ id: 'deepseek-v4-flash', object: 'model' }] }))
      return
    }
    if (req.method !== 'POST' || !/\/chat\/completions$/.test(req.url)) {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: `no route ${req.method} ${req.url}` } }))
      return
    }
    let body = {}
    try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')) } catch { /* keep empty */ }
    const id = ++n
    const decision = decide(body, req.headers['x-deepseek-harness-session-id'] ?? null)
    const entry = {
      n: id,
      at: Date.now(),
      sessionId: req.headers['x-deepseek-harness-session-id'] ?? null,
      auth: req.headers.authorization ? 'present' : null,
      model: body.model,
      stream: body.stream,
      tools: toolNames(body),
      // bytes of each tool definition exactly as the host sent it (compact JSON of the request's tools[] entry)
      toolBytes: Object.fromEntries((Array.isArray(body.tools) ? body.tools : []).map(t => [t?.function?.name ?? t?.name, Buffer.byteLength(JSON.stringify(t))])),
      messages: (body.messages ?? []).map(m => ({
        role: m.role,
        content: contentText(m.content),
        ...(m.tool_calls ? { tool_calls: m.tool_calls.map(c => ({ id: c.id, name: c.function?.name, arguments: c.function?.arguments })) } : {}),
        ...(m.tool_call_id ? { tool_call_id: m.tool_call_id } : {}),
      })),
      decision,
    }
    requests.push(entry)
    if (log) appendFileSync(log, JSON.stringify(entry) + '\n')

    const aborted = new AbortController()
    res.on('close', () => aborted.abort())
    if (decision.sleepMs > 0) await sleep(decision.sleepMs, aborted.signal)
    if (aborted.signal.aborted) return
    if (decision.kind === 'fail') {
      res.writeHead(decision.status, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: `fake failure ${decision.status}`, type: 'fake', code: String(decision.status) } }))
      return
    }
    const rid = `chatcmpl-fake-${id}`
    const model = body.model ?? 'deepseek-v4-flash'
    const created = Math.floor(Date.now() / 1000)
    const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    const calls = decision.kind === 'tools'
      ? decision.calls.map((c, i) => ({ index: i, id: `call_${id}_${i}`, type: 'function', function: { name: c.name, arguments: c.args } }))
      : []
    if (body.stream !== true) {
      const message = calls.length > 0
        ? { role: 'assistant', content: null, tool_calls: calls.map(({ index, ...c }) => c) }
        : { role: 'assistant', content: decision.text }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ id: rid, object: 'chat.completion', created, model, choices: [{ index: 0, message, finish_reason: calls.length > 0 ? 'tool_calls' : 'stop' }], usage }))
      return
    }
    const base = { id: rid, object: 'chat.completion.chunk', created, model }
    const sse = payload => res.write(`data: ${typeof payload === 'string' ? payload : JSON.stringify(payload)}\n\n`)
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' })
    sse({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })
    if (calls.length > 0) {
      for (const c of calls) {
        sse({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: c.index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }] }, finish_reason: null }] })
        sse({ ...base, choices: [{ index: 0, delta: { tool_calls: [{ index: c.index, function: { arguments: c.function.arguments } }] }, finish_reason: null }] })
      }
      sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] })
    } else {
      for (const piece of decision.text.match(/[\s\S]{1,24}/g) ?? ['']) {
        sse({ ...base, choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })
      }
      sse({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })
    }
    sse({ ...base, choices: [], usage })
    sse('[DONE]')
    res.end()
  })
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, '127.0.0.1', () => {
      const bound = server.address().port
      resolve({
        baseURL: `http://127.0.0.1:${bound}/v1`,
        port: bound,
        server,
        requests,
        close: () => new Promise(r => { server.closeAllConnections?.(); server.close(() => r()) }),
      })
    })
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const llm = await startFakeLlm({ port: Number(process.env.FAKE_PORT ?? 0), log: process.env.FAKE_LOG })
  process.stdout.write(JSON.stringify({ ready: true, baseURL: llm.baseURL, pid: process.pid }) + '\n')
  for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => { llm.close().then(() => process.exit(0)) })
}
