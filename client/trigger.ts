// The `@` trigger: an `inputTriggers` source, the host's own pattern (rc.8 packages/client/ui-reference/src/
// client/index.ts: `onPick` → `insert` with `appearance: 'session'`, `codec.serialize` = the prompt text).
import { sessionMention } from './mail'
import { sessionRow, titleOf, type HostContext, type SessionRow } from './host'
import type { T } from './i18n'

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
  return {
    trigger: '@',
    name: 'dsh-session-mail',
    order: 5,
    showGroupTitle: false,
    candidates(session: { sessionId?: string } | undefined, request: { query?: string } | undefined) {
      const q = String((request && request.query) || '').toLowerCase()
      const self = session && session.sessionId
      return Promise.resolve(rows(self)
        .filter(r => q === '' || titleOf(r).toLowerCase().indexOf(q) >= 0 || String(r.id).toLowerCase().indexOf(q) >= 0)
        .sort((a, b) => (b.running ? 1 : 0) - (a.running ? 1 : 0) || (b.updatedAt || 0) - (a.updatedAt || 0))
        .slice(0, 20)
        .map(r => ({
          name: '@' + titleOf(r, r.id),
          description: status(r) + ' · ' + r.id,
          section: t('trigger.section'),
          value: JSON.stringify({ id: r.id, title: titleOf(r, r.id) }),
        })))
    },
    onPick(p: { candidate: { value: string } }) {
      let v: any
      try { v = JSON.parse(p.candidate.value) } catch { return undefined }
      if (!v || typeof v.id !== 'string') return undefined
      return { insert: { source: 'dsh-session-mail', ref: v.id, label: '@' + v.title, appearance: 'session', clipboardText: sessionMention(v.id, v.title) } }
    },
    codec: {
      clipboardText: (ref: string) => sessionMention(ref, titleOf(sessionRow(ctx, ref), ref)),
      serialize: (ref: string) => Promise.resolve(sessionMention(ref, titleOf(sessionRow(ctx, ref), ref))),
    },
  }
}
