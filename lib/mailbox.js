// The owner's half of the mailbox (crates/core/src/mailbox): a send to a session live in this process
// from a process that cannot reach it over HTTP (this profile has no web server) is posted as a file
// under $DSH_HOME/dsh-session-mail/mailbox/<session>/. Every DRAIN_MS this process asks the core (on a
// worker thread) for the envelopes of the sessions it holds live, delivers each in-process, flushes the
// session, and has the core write the receipt the sender waits for. The file work, the claim and the
// hostile-input checks are the core's; this file only talks to the host.
import { attempt } from './attempt.js'
import { flushSession, pendingOf, service, userMessage } from './host.js'
import { resolveDshHome } from './home.js'

const DRAIN_MS = 250
const PROMPT_TIMEOUT_MS = 5000
const FLUSH_TIMEOUT_MS = 1000
/** Request ids this process delivered (a claim it could not settle comes back: never delivered twice). */
const REMEMBER = 4096

function errorCode(e) {
  const code = attempt(() => e?.code ?? e?.error?.code, undefined)
  return typeof code === 'string' && code !== '' ? code : 'internal'
}

/**
 * Deliver one claimed envelope in-process. Prefers the host's session controller (0.1.7:
 * `ctx.sessionController.prompt(request, signal)` keeps request-id dedup and admission,
 * kilinthecode/deepseek-harness packages/api/session-controller/README.md); else the live agent's inbox
 * (`agent.steer` / `agent.followup`, what rc.8's route and 0.1.7's built-in peer sessions call), deduped
 * here: by this process's memory, the inbox's pending ids, and the log (`env.landed`, the core's lookup).
 * null: the session is not live here any more (the envelope goes back for its next holder).
 */
async function deliverEnvelope(ctx, env, delivered) {
  if (env.landed || delivered.has(env.requestId)) return { state: 'delivered', route: 'already-delivered' }
  const agent = attempt(() => ctx.agents?.get?.(env.sessionId), undefined)
  if (agent === undefined || agent === null) return null
  if (pendingOf(agent).rpcIds.includes(env.requestId)) return { state: 'delivered', route: 'already-delivered' }
  const mode = env.mode === 'steer' ? 'steer' : 'queue'
  let route
  // Looked up, not injected: rc.8 has no such service, and an optional inject of an unknown service
  // leaves the plugin pending there ("waiting for service: sessionController").
  const controller = service(ctx, 'sessionController')
  if (typeof controller?.prompt === 'function') {
    route = 'session-controller'
    try {
      const request = { requestId: env.requestId, sessionId: env.sessionId, mode, content: [{ type: 'text', text: env.text }] }
      const r = await controller.prompt(request, AbortSignal.timeout(PROMPT_TIMEOUT_MS))
      if (r?.accepted !== true) {
        return { state: 'rejected', code: errorCode(r), message: String(attempt(() => r?.error?.message ?? r?.message, '') ?? '') }
      }
    } catch (e) {
      return { state: 'rejected', code: errorCode(e), message: String(e?.message ?? e) }
    }
  } else {
    route = 'agent'
    try {
      // what rc.8's own prompt route admits (packages/host/apiproxy `prompt`: `createUserMessage({content,
      // source:{kind:'user', rpcId}})`): `source.rpcId` is the request id, exactly as over HTTP, so the
      // store, `verify` and every dedup find it in the log
      const m = userMessage(env.text, { kind: 'user', rpcId: env.requestId })
      if (mode === 'steer') agent.steer(m)
      else agent.followup(m)
    } catch (e) {
      // rc.8's own route answers a throw here with `agent-busy` (packages/host/apiproxy `prompt`)
      return { state: 'rejected', code: 'agent-busy', message: String(e?.message ?? e) }
    }
  }
  delivered.add(env.requestId)
  if (delivered.size > REMEMBER) delivered.delete(delivered.values().next().value)
  // Written to the log before the receipt: a crash after this point is never delivered again by
  // the session's next holder (it finds the request id in the log).
  await flushSession(ctx, attempt(() => agent.session, undefined), FLUSH_TIMEOUT_MS)
  return { state: 'delivered', route }
}

/**
 * Drain this process's mailboxes every DRAIN_MS while the plugin is mounted (timer unref'd). Returns
 * the stop function. `startedAt` is this process's presence `startedAt` (envelopes are addressed to it);
 * `config` the core's configuration keys (the limits each envelope is checked against). The text delivered
 * is the core's (rebuilt from the verified sender: always framed), never the envelope's own.
 */
export function startMailbox(ctx, core, { startedAt, dshHome = () => resolveDshHome(), config = {} }) {
  if (typeof core?.mailboxDrain !== 'function') return () => {}
  const delivered = new Set()
  // the limits the core checks each envelope against (mailbox::admit): this profile's own
  const configJson = JSON.stringify(config ?? {})
  let busy = false
  let stopped = false
  const tick = async () => {
    if (busy || stopped) return
    busy = true
    try {
      const sessions = attempt(() => ctx.agents?.list?.() ?? [], []).map(a => String(attempt(() => a.id, ''))).filter(Boolean)
      if (sessions.length === 0) return
      const home = dshHome()
      const envelopes = await core.mailboxDrain(sessions, startedAt, home, configJson)
      for (const env of envelopes) {
        let out
        try {
          out = await deliverEnvelope(ctx, env, delivered)
        } catch (e) {
          out = { state: 'rejected', code: 'internal', message: String(e?.message ?? e) }
        }
        if (out === null) await core.mailboxRelease(env.sessionId, env.requestId, home)
        else await core.mailboxSettle({ requestId: env.requestId, sessionId: env.sessionId, ...out }, home)
      }
    } catch {
      // a home we cannot read or write: the envelopes stay and the next tick tries again
    } finally {
      busy = false
    }
  }
  const timer = setInterval(tick, DRAIN_MS)
  timer.unref?.()
  void tick()
  return () => {
    stopped = true
    clearInterval(timer)
  }
}

/** Does this core drain mailboxes (what the presence record advertises)? */
export function canDrain(core) {
  return typeof core?.mailboxDrain === 'function'
}
