// The `@` trigger: an `inputTriggers` source, the host's own pattern (rc.8 packages/client/ui-reference/src/
// client/index.ts: `onPick` → `insert` with `appearance: 'session'`, `codec.serialize` = the prompt text).
// It offers this home's top-level sessions (the runtime's list) and, once the human has linked machines,
// theirs (issue 31 #6): the `machines.sessions` route asks each linked machine's own listing, kept for a
// few seconds so typing a name does not ask again on every key; a machine that does not answer offers
// nothing, and never delays this home's rows past the route's deadline (the listing's 3 s).
import { sessionMention } from './mail'
import { call } from './rpc'
import { sessionRow, titleOf, type HostContext, type SessionRow } from './host'
import type { T } from './i18n'
import type { Machine } from './types'

/** One session of a linked machine as `machines.sessions` gives it (the far side's listing row). */
export interface RemoteSession { id: string; title: string | null; live: boolean; status: string | null; machine: Machine }

/** The rows of a `machines.sessions` answer, top-level only; a field of the wrong type drops the row. */
export function remoteSessionsOf(v: any): RemoteSession[] {
  const out: RemoteSession[] = []
  const ms: any[] = Array.isArray(v?.machines) ? v.machines : []
  for (const m of ms) {
    if (!m || typeof m.id !== 'string' || typeof m.name !== 'string' || !Array.isArray(m.rows)) continue
    for (const r of m.rows) {
      if (!r || typeof r.id !== 'string' || r.subagent === true) continue
      out.push({
        id: r.id,
        title: typeof r.title === 'string' && r.title !== '' ? r.title : null,
        live: r.live === true,
        status: typeof r.status === 'string' ? r.status : null,
        machine: { id: m.id, name: m.name },
      })
    }
  }
  return out
}

/** What the agent reads for a picked session of a linked machine: its id (the send tools take it) and where it is. */
export function remoteMention(id: string, title: string | null, machine: string): string {
  return '@' + (title && title !== id ? title + ' (session ' + id + ', machine ' + machine + ')' : 'session ' + id + ' (machine ' + machine + ')')
}

const REMOTE_TTL_MS = 5000

export function makeTriggerSource(ctx: HostContext, t: T) {
  function rows(self: string | undefined): SessionRow[] {
    let snap
    try { snap = ctx.sessions!.list.getSnapshot() } catch { return [] }
    const out: SessionRow[] = []
    for (const id of snap.ids) {
      const r = snap.byId[id]
      if (!r || r.blank || r.origin === 'subagent' || r.parentId || r.id === self) continue
      out.push(r)
    }
    return out
  }
  function status(r: SessionRow): string {
    if (r.pendingInteraction) return t('trigger.waiting')
    return r.running ? t('trigger.running') : t('trigger.idle')
  }
  // the linked machines' sessions: one ask at a time, kept REMOTE_TTL_MS; remembered by id for the codec
  let remote: { at: number; rows: Promise<RemoteSession[]> } | null = null
  const known = new Map<string, RemoteSession>()
  function remoteRows(): Promise<RemoteSession[]> {
    const now = Date.now()
    if (remote === null || now - remote.at > REMOTE_TTL_MS) {
      remote = {
        at: now,
        rows: call('machines.sessions', { limit: 50 }).then(r => {
          const list = r.ok ? remoteSessionsOf(r.value) : []
          for (const s of list) known.set(s.id, s)
          return list
        }),
      }
    }
    return remote.rows
  }
  function remoteStatus(s: RemoteSession): string {
    if (!s.live) return t('trigger.cold')
    return s.status === 'running' ? t('trigger.running') : s.status === 'awaiting-user' ? t('trigger.waiting') : t('trigger.idle')
  }
  function mention(ref: string): string {
    const s = known.get(ref)
    if (s) return remoteMention(s.id, s.title, s.machine.name)
    return sessionMention(ref, titleOf(sessionRow(ctx, ref), ref))
  }
  return {
    trigger: '@',
    name: 'dsh-session-mail',
    order: 5,
    showGroupTitle: false,
    candidates(session: { sessionId?: string } | undefined, request: { query?: string } | undefined) {
      const q = String((request && request.query) || '').toLowerCase()
      const self = session && session.sessionId
      const here = rows(self)
        .filter(r => q === '' || titleOf(r).toLowerCase().indexOf(q) >= 0 || String(r.id).toLowerCase().indexOf(q) >= 0)
        .sort((a, b) => (b.running ? 1 : 0) - (a.running ? 1 : 0) || (b.updatedAt || 0) - (a.updatedAt || 0))
        .slice(0, 20)
        .map(r => ({
          name: '@' + titleOf(r, r.id),
          description: status(r) + ' · ' + r.id,
          section: t('trigger.section'),
          value: JSON.stringify({ id: r.id, title: titleOf(r, r.id) }),
        }))
      return remoteRows().then(list => here.concat(list
        .filter(s => s.id !== self && (q === '' || (s.title || '').toLowerCase().indexOf(q) >= 0 || s.id.toLowerCase().indexOf(q) >= 0 || s.machine.name.indexOf(q) >= 0))
        .slice(0, 20)
        .map(s => ({
          name: '@' + (s.title || s.id),
          description: t('trigger.onMachine', { machine: s.machine.name }) + ' · ' + remoteStatus(s) + ' · ' + s.id,
          section: t('trigger.sectionMachines'),
          value: JSON.stringify({ id: s.id, title: s.title || s.id, machine: s.machine.name }),
        }))), () => here)
    },
    onPick(p: { candidate: { value: string } }) {
      let v: any
      try { v = JSON.parse(p.candidate.value) } catch { return undefined }
      if (!v || typeof v.id !== 'string') return undefined
      const clipboardText = typeof v.machine === 'string' ? remoteMention(v.id, v.title, v.machine) : sessionMention(v.id, v.title)
      const label = '@' + v.title + (typeof v.machine === 'string' ? ' · ' + v.machine : '')
      return { insert: { source: 'dsh-session-mail', ref: v.id, label, appearance: 'session', clipboardText } }
    },
    codec: {
      clipboardText: (ref: string) => mention(ref),
      serialize: (ref: string) => Promise.resolve(mention(ref)),
    },
  }
}
