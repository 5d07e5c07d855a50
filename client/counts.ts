// "Waiting for you" (issue 32 #5): the held counts of the home (`held.counts`), shared by the page's entry,
// the page and the session list's badges. rc.8 has no channel a plugin can push its own frames on, so the
// counts are asked when something can have changed them, as far as this page can see it: when the page comes
// into view (`visibilitychange`), when a session's turn ends (its `running` flag falls in the runtime's session
// list: agents send during turns), after the human's own decisions (`refresh()`), and — since a send in another
// process of the home shows no frame here — every COUNTS_POLL_MS while something shows them and the document is
// visible. Nothing is asked while the document is hidden or nobody is subscribed.
import { call, missing } from './rpc'
import { countsOf, type HeldCounts } from './model'
import { sessionRow, titleOf, type HostContext, type SessionSnapshot } from './host'
import type { T } from './i18n'

export const COUNTS_POLL_MS = 10_000
const EMPTY: HeldCounts = { bySession: {}, total: 0, nextExpiresAt: null }

export interface CountStore {
  get(): HeldCounts
  /** false once the host answered that it has no `held.counts` route (an older plugin half). */
  available(): boolean
  subscribe(fn: () => void): () => void
  refresh(): Promise<void>
}

export function createHeldCounts(ctx?: HostContext): CountStore {
  let value = EMPTY
  let routeThere = true
  const listeners = new Set<() => void>()
  let timer: ReturnType<typeof setTimeout> | undefined
  let inflight: Promise<void> | null = null
  const hidden = () => typeof document !== 'undefined' && document.hidden
  function notify() { listeners.forEach(fn => { try { fn() } catch { /* a listener's own problem */ } }) }
  function refresh(): Promise<void> {
    if (!routeThere) return Promise.resolve()
    if (inflight) return inflight
    inflight = call('held.counts', {}).then(r => {
      inflight = null
      if (r.ok) {
        const next = countsOf(r.value)
        if (JSON.stringify(next) !== JSON.stringify(value)) { value = next; notify() }
      } else if (missing(r)) { routeThere = false; notify() }
    })
    return inflight
  }
  function schedule() {
    clearTimeout(timer)
    timer = undefined
    if (listeners.size === 0 || hidden() || !routeThere) return
    timer = setTimeout(() => { refresh().then(schedule) }, COUNTS_POLL_MS)
  }
  function onVisibility() {
    if (hidden()) { clearTimeout(timer); timer = undefined } else if (listeners.size > 0) refresh().then(schedule)
  }
  // a turn that ended may have sent: ask when any session's running flag falls
  let running = new Set<string>()
  let offList: (() => void) | undefined
  function runningNow(): Set<string> {
    const now = new Set<string>()
    try {
      const snap = ctx!.sessions!.list.getSnapshot()
      for (const id of snap.ids) if (snap.byId[id]?.running) now.add(id)
    } catch { /* no list */ }
    return now
  }
  function onList() {
    const now = runningNow()
    let ended = false
    running.forEach(id => { if (!now.has(id)) ended = true })
    running = now
    if (ended && listeners.size > 0 && !hidden()) refresh().then(schedule)
  }
  return {
    get: () => value,
    available: () => routeThere,
    subscribe(fn) {
      listeners.add(fn)
      if (listeners.size === 1) {
        if (typeof document !== 'undefined') document.addEventListener('visibilitychange', onVisibility)
        if (ctx && ctx.sessions) { running = runningNow(); try { offList = ctx.sessions.list.subscribe(onList) } catch { offList = undefined } }
        if (!hidden()) refresh().then(schedule)
      }
      return () => {
        listeners.delete(fn)
        if (listeners.size === 0) {
          clearTimeout(timer)
          timer = undefined
          if (typeof document !== 'undefined') document.removeEventListener('visibilitychange', onVisibility)
          if (offList) { offList(); offList = undefined }
        }
      }
    },
    refresh: () => refresh().then(schedule),
  }
}

/**
 * The session a sidebar row shows. rc.8's session rows (ui-workspace `SessionNodeItem`: a `role="treeitem"`
 * div) carry no id in the DOM, so: the row component's own `node` prop, read from React's fiber on the
 * element (`__reactFiber$…`, walked up a few owners), else the row's title when exactly one session has it.
 * A row that cannot be told is left undecorated — never a count on the wrong session.
 */
export function sessionIdOfRow(el: Element, snap: SessionSnapshot, titleText: string | null): string | null {
  const key = Object.keys(el).find(k => k.indexOf('__reactFiber$') === 0)
  let f: any = key ? (el as any)[key] : null
  for (let i = 0; f && i < 12; i++, f = f.return) {
    const id = f.memoizedProps && f.memoizedProps.node && f.memoizedProps.node.id
    if (typeof id === 'string' && snap.byId[id]) return id
  }
  if (titleText === null || titleText === '') return null
  let found: string | null = null
  for (const id of snap.ids) {
    const row = snap.byId[id]
    if (!row || titleOf(row) !== titleText) continue
    if (found !== null) return null
    found = id
  }
  return found
}

export const BADGE_ATTR = 'data-dsh-session-mail-held-count'

/**
 * Badges on the sidebar's session rows: the number of messages held for each. Repainted when the counts
 * change and when the tree's rows change (a MutationObserver that reacts only to changes inside a
 * `role="tree"`, coalesced to one paint per frame). Returns its disposer (badges removed).
 */
export function decorateSessionList(ctx: HostContext, counts: CountStore, t: T): () => void {
  if (typeof document === 'undefined' || typeof MutationObserver === 'undefined') return () => {}
  let frame = 0
  function paint() {
    frame = 0
    let snap: SessionSnapshot
    try { snap = ctx.sessions!.list.getSnapshot() } catch { return }
    const by = counts.get().bySession
    const rows = document.querySelectorAll('[role="tree"] [role="treeitem"]')
    rows.forEach(el => {
      const titleEl = el.querySelector('[class*="_title"]')
      const id = sessionIdOfRow(el, snap, titleEl ? titleEl.textContent : null)
      const n = id ? by[id] || 0 : 0
      let badge = el.querySelector('[' + BADGE_ATTR + ']')
      if (n <= 0 || !id) { if (badge) badge.remove(); return }
      const label = t('badge.held', { n, title: titleOf(sessionRow(ctx, id), id) })
      if (!badge) {
        badge = document.createElement('span')
        badge.className = 'dsm-badge'
        badge.setAttribute('role', 'status')
        if (titleEl && titleEl.parentElement === el) titleEl.after(badge)
        else el.appendChild(badge)
      }
      if (badge.getAttribute(BADGE_ATTR) !== String(n)) badge.setAttribute(BADGE_ATTR, String(n))
      if (badge.getAttribute('data-session-id') !== id) badge.setAttribute('data-session-id', id)
      if (badge.textContent !== String(n)) badge.textContent = String(n)
      if (badge.getAttribute('aria-label') !== label) { badge.setAttribute('aria-label', label); badge.setAttribute('title', label) }
    })
  }
  const later = () => { if (frame === 0) frame = requestAnimationFrame(paint) }
  const inTree = (n: Node | null) => {
    const e = n && (n.nodeType === 1 ? (n as Element) : n.parentElement)
    return !!e && !!e.closest('[role="tree"]')
  }
  const addsTree = (r: MutationRecord) => {
    for (const n of Array.from(r.addedNodes)) {
      if (n.nodeType === 1 && ((n as Element).matches('[role="tree"],[role="treeitem"]') || (n as Element).querySelector('[role="tree"]'))) return true
    }
    return false
  }
  const observer = new MutationObserver(records => {
    for (const r of records) {
      if (r.target instanceof Element && r.target.hasAttribute(BADGE_ATTR)) continue
      if (inTree(r.target) || addsTree(r)) { later(); return }
    }
  })
  observer.observe(document.body, { childList: true, subtree: true, characterData: true })
  const off = counts.subscribe(later)
  let offList: (() => void) | undefined
  try { offList = ctx.sessions!.list.subscribe(later) } catch { /* no list: the tree's own changes repaint */ }
  later()
  return () => {
    observer.disconnect()
    off()
    if (offList) offList()
    if (frame) cancelAnimationFrame(frame)
    document.querySelectorAll('[' + BADGE_ATTR + ']').forEach(b => b.remove())
  }
}
