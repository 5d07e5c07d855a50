// The home-wide Agent mail page (issue 32 #1, #3-#6; issue 31's "Linked machines").
//
// Where rc.8 puts a top-level view of a plugin: its entry is a `sidebar.footer.action` (the actions beside
// Settings at the sidebar foot, packages/client/ui-sidebar/src/client/contract/slots.ts; ui-cordis' panel
// is the shipped occupant), and the page itself is a `shell.overlay` entry (ui-layout's frame-wide layer
// above every column, packages/client/ui-layout/src/client/index.ts) shown while it is open: a modal
// dialog over the whole frame, closed with Escape or its close button, focus returned to the entry. The
// per-session "Agent mail" tab stays (view.tsx). Nothing on the page polls while it is closed or the
// document is hidden.
import { React, useCallback, useEffect, useRef, useState } from './react'
import { call, missing, type Result } from './rpc'
import { openSession, sessionRow, titleOf, type HostContext, type SessionRow } from './host'
import { bodyOf } from './mail'
import { useSessionList } from './hooks'
import { useVisiblePoll } from './view'
import type { CountStore } from './counts'
import type { Key, T } from './i18n'
import { FATES, type HeldMessage, type Inbound, type Machine } from './types'
import {
  listPayload, machineOf, machinesOf, pageOf, rulesOf, threadOf, timeLeft,
  type Building, type Filters, type MachineLink, type MailRow, type Rules,
} from './model'

export const PAGE_POLL_MS = 5000
/** How often the list is asked while the index is being rebuilt (client/model.ts `Building`). */
export const BUILDING_POLL_MS = 1000
/** How often the Linked machines section asks each machine for a round trip while the page is shown. */
export const MACHINES_POLL_MS = 5000
const PAGE_SIZE = 50
const MACHINE_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/

// ------------------------------------------------------------------------------------------ open state

export interface PageStore {
  isOpen(): boolean
  thread(): string | null
  open(thread?: string | null): void
  close(): void
  subscribe(fn: () => void): () => void
}

export function createPageStore(): PageStore {
  let open = false
  let thread: string | null = null
  const listeners = new Set<() => void>()
  const notify = () => listeners.forEach(fn => { try { fn() } catch { /* a listener's own problem */ } })
  return {
    isOpen: () => open,
    thread: () => thread,
    open(t) { open = true; if (t !== undefined) thread = t; notify() },
    close() { open = false; notify() },
    subscribe(fn) { listeners.add(fn); return () => { listeners.delete(fn) } },
  }
}

function useSubscribe(subscribe: (fn: () => void) => () => void): void {
  const [, bump] = useState(0)
  useEffect(() => subscribe(() => { bump(n => n + 1) }), [])
}

function topLevel(ctx: HostContext): SessionRow[] {
  try {
    const snap = ctx.sessions!.list.getSnapshot()
    return snap.ids.map(id => snap.byId[id]).filter((r): r is SessionRow => !!r && !r.blank && r.origin !== 'subagent' && !r.parentId)
  } catch { return [] }
}

// ------------------------------------------------------------------------------------------ entry

export function makeEntry(page: PageStore, counts: CountStore, t: T) {
  return function MailEntry(props: { wide?: boolean }) {
    useSubscribe(counts.subscribe)
    useSubscribe(page.subscribe)
    const n = counts.get().total
    const label = n > 0 ? t('page.entryHeld', { n }) : t('page.entry')
    const wide = props.wide !== false
    return (
      <button type="button" className={'dsm-entry' + (wide ? '' : ' dsm-entry-rail')} data-dsh-session-mail-entry=""
        aria-label={label} title={label} aria-haspopup="dialog" aria-expanded={page.isOpen()}
        onClick={() => { if (page.isOpen()) page.close(); else page.open(null) }}>
        <span aria-hidden="true" className="dsm-entry-icon">✉</span>
        {wide ? <span className="dsm-entry-label">{t('page.entry')}</span> : null}
        {n > 0 ? <span className="dsm-badge" data-dsh-session-mail-entry-count={n}>{n}</span> : null}
      </button>
    )
  }
}

// ------------------------------------------------------------------------------------------ page

interface HeldCard extends HeldMessage { target: string; senderRule?: Inbound | null; msLeft?: number }

type ListState =
  | { status: 'loading' }
  | { status: 'missing' }
  | { status: 'error'; message: string }
  | { status: 'ready'; rows: MailRow[]; next: string | null; building: Building | null }

const NO_FILTERS: Filters = { session: '', fate: '', held: false, since: '', query: '' }

export function makePage(ctx: HostContext, page: PageStore, counts: CountStore, t: T) {
  function MailPage() {
    useSubscribe(page.subscribe)
    if (!page.isOpen()) return null
    return <MailHome />
  }

  function SessionButton({ id, title, machine }: { id: string | null; title?: string | null; machine?: Machine | null }) {
    if (!id) return <span className="dsm-peer">?</span>
    const name = titleOf(sessionRow(ctx, id), title || id)
    // a session of a linked machine is not in this host's list: named with its machine, nothing to open here
    if (machine) {
      return (
        <span className="dsm-who" data-dsh-session-mail-remote={id}>
          <span className="dsm-peer" title={t('machines.sessionOn', { id, machine: machine.name })}>{name}</span>
          <span className="dsm-chip dsm-machine" data-machine={machine.id} title={machine.id}>{machine.name}</span>
        </span>
      )
    }
    return (
      <span className="dsm-who">
        <button type="button" className="dsm-peer" data-dsh-session-mail-open={id} title={t('page.openSession', { title: name })}
          onClick={() => { page.close(); openSession(ctx, id) }}>{name}</button>
      </span>
    )
  }

  function Fate({ fate, answered, machine }: { fate: string; answered?: MailRow['answered']; machine?: Machine | null }) {
    const chip = <span className={'dsm-chip dsm-fate-' + fate} data-fate={fate}>{t(('fate.' + fate) as Key)}</span>
    if (!answered) return chip
    // a remote message's fate is a remembered answer (crossing::fates), never a fresh reading: say whose, and when
    const args = { machine: machine ? machine.name : '?', time: new Date(answered.at).toLocaleString() }
    return <>{chip}<span className="dsm-muted dsm-fate-asof" data-dsh-session-mail-fate-as-of={String(answered.at)} data-source={answered.source}>
      {t(answered.source === 'outbox' ? 'fate.asOfOutbox' : 'fate.asOf', args)}</span></>
  }

  function MailHome() {
    useSessionList(ctx)
    useSubscribe(counts.subscribe)
    const [filters, setFilters] = useState<Filters>(NO_FILTERS)
    const [queryInput, setQueryInput] = useState('')
    const [list, setList] = useState<ListState>({ status: 'loading' })
    const [paged, setPaged] = useState(false)
    const [held, setHeld] = useState<HeldCard[]>([])
    const [rules, setRules] = useState<Rules | null>(null)
    const [machines, setMachines] = useState<MachineLink[] | null>(null)
    const [thread, setThread] = useState<{ id: string; rows: MailRow[]; truncated: boolean } | { id: string; missing: true; why: string } | null>(null)
    const [notice, setNotice] = useState<{ text: string; error?: boolean } | null>(null)
    const [busy, setBusy] = useState(false)
    const [compose, setCompose] = useState(false)
    const dialog = useRef<HTMLDivElement>(null)
    const returnFocus = useRef<Element | null>(null)
    const names = useRef<Record<string, string>>({})

    // focus: into the dialog on open, back to where it was on close; Escape closes
    useEffect(() => {
      returnFocus.current = typeof document !== 'undefined' ? document.activeElement : null
      const first = dialog.current && dialog.current.querySelector<HTMLElement>('[data-dsh-session-mail-search]')
      if (first) first.focus()
      return () => { const el = returnFocus.current as HTMLElement | null; if (el && typeof el.focus === 'function' && el.isConnected) el.focus() }
    }, [])
    // Escape closes the dialog wherever focus is (a button that disabled itself while sending leaves focus on body)
    useEffect(() => {
      const onKey = (e: KeyboardEvent) => { if (e.key === 'Escape' && !e.defaultPrevented) { e.stopPropagation(); page.close() } }
      document.addEventListener('keydown', onKey)
      return () => { document.removeEventListener('keydown', onKey) }
    }, [])

    // the search box asks 250 ms after the last key
    useEffect(() => {
      const id = setTimeout(() => { setFilters(f => (f.query === queryInput ? f : { ...f, query: queryInput })); setPaged(false) }, 250)
      return () => { clearTimeout(id) }
    }, [queryInput])

    const loadList = useCallback((): Promise<unknown> => {
      if (paged) return Promise.resolve()
      return call('mail.list', listPayload(filters, Date.now(), null, PAGE_SIZE)).then(r => {
        if (r.ok) { const p = pageOf(r.value, names.current); setList({ status: 'ready', rows: p.rows, next: p.next, building: p.building }) }
        else if (missing(r)) setList({ status: 'missing' })
        else setList({ status: 'error', message: r.error.message || r.error.code })
      })
    }, [filters, paged])

    const loadHeld = useCallback((): Promise<unknown> => {
      const ids = Object.keys(counts.get().bySession).slice(0, 24)
      return Promise.all(ids.map(sessionId => call<{ held?: any[]; rules?: unknown }>('view', { sessionId, limit: 1 }).then(r => {
        if (!r.ok) return [] as HeldCard[]
        if (r.value.rules) setRules(rulesOf(r.value.rules))
        return (r.value.held || []).filter(x => x && x.state === 'held').map(x => ({ ...x, target: sessionId }) as HeldCard)
      }))).then(parts => {
        const all = ([] as HeldCard[]).concat(...parts)
        all.sort((a, b) => (a.expiresAt ?? Infinity) - (b.expiresAt ?? Infinity) || a.postedAt - b.postedAt)
        setHeld(all)
      })
    }, [])

    const loadRules = useCallback((): Promise<unknown> => call('rules.list', {}).then(r => { if (r.ok) setRules(rulesOf(r.value)) }), [])
    // the links, each asked for a round trip (machines.list {probe}: a machine that does not answer costs
    // the dial's deadline, so one ask at a time); asked again every MACHINES_POLL_MS while the page is shown
    const machinesAsking = useRef(false)
    const loadMachines = useCallback((): Promise<unknown> => {
      if (machinesAsking.current) return Promise.resolve()
      machinesAsking.current = true
      return call('machines.list', { probe: true }).then(r => {
        machinesAsking.current = false
        if (r.ok) {
          const ms = machinesOf(r.value)
          names.current = Object.fromEntries(ms.map(m => [m.id, m.name]))
          setMachines(ms)
        } else if (missing(r)) setMachines(null)
      })
    }, [])

    const refresh = useCallback(() => counts.refresh().then(() => Promise.all([loadList(), loadHeld()])), [loadList, loadHeld])
    useVisiblePoll(refresh, PAGE_POLL_MS, [refresh])
    // while the index is rebuilt the list is asked every second (its newest rows come first)
    const building = list.status === 'ready' && list.building !== null
    useEffect(() => {
      if (!building) return undefined
      const id = setInterval(() => { if (typeof document === 'undefined' || !document.hidden) void loadList() }, BUILDING_POLL_MS)
      return () => { clearInterval(id) }
    }, [building, loadList])
    useEffect(() => { loadRules() }, [])
    useVisiblePoll(loadMachines, MACHINES_POLL_MS, [loadMachines])

    // the thread shown: the page store's (a card or a row asked for it)
    useSubscribe(page.subscribe)
    const threadId = page.thread()
    useEffect(() => {
      if (!threadId) { setThread(null); return }
      let live = true
      call('mail.thread', { requestId: threadId }).then(r => {
        if (!live) return
        if (r.ok && (r.value as any)?.found !== false) { const th = threadOf(r.value, names.current); setThread({ id: threadId, rows: th.rows, truncated: th.truncated }) }
        else setThread({ id: threadId, missing: true, why: r.ok ? t('page.threadNotFound') : missing(r) ? t('page.noIndex') : (r.error.message || r.error.code) })
      })
      return () => { live = false }
    }, [threadId])

    function act<V>(endpoint: string, payload: object, done?: (r: Result<V>) => string | null): Promise<Result<V>> {
      setBusy(true)
      return call<V>(endpoint, payload).then(r => {
        setBusy(false)
        if (!r.ok) setNotice({ text: (r.error.message || r.error.code), error: true })
        else if (done) { const text = done(r); if (text) setNotice({ text }) }
        return Promise.all([refresh(), loadRules()]).then(() => r)
      })
    }

    const senderName = (c: { sender?: string | null; senderTitle?: string | null }) => titleOf(sessionRow(ctx, c.sender || ''), c.senderTitle || c.sender || '?')

    function decide(c: HeldCard, decision: 'approve' | 'reject') {
      return act('held.decide', { sessionId: c.target, requestId: c.requestId, decision }, () => t(decision === 'approve' ? 'page.approved' : 'page.rejected'))
    }

    /** "Always allow / hold / refuse from <sender>" on a held card: the standing rule, then this message as the rule says. */
    function always(c: HeldCard, inbound: Inbound) {
      if (!c.sender) return
      const who = senderName(c)
      act('rules.set', { sender: c.sender, inbound }, () => t(('page.ruleSaved.' + inbound) as Key, { sender: who })).then(r => {
        if (!r.ok || inbound === 'hold') return
        decide(c, inbound === 'accept' ? 'approve' : 'reject')
      })
    }

    function bulk(filter: { all?: boolean; sender?: string }, decision: 'approve' | 'reject') {
      act<{ items?: { state?: string; error?: string | null }[] }>('held.decideMany', { filter, decision }, r => {
        const items = (r.ok && r.value.items) || []
        return t('page.bulkDone', { n: items.filter(i => !i.error).length })
      })
    }

    const sessions = topLevel(ctx)
    const heldSenders = Array.from(new Set(held.map(c => c.sender).filter((s): s is string => !!s)))
    const [bulkScope, setBulkScope] = useState('all')
    const now = Date.now()

    const set = (k: keyof Filters, v: string | boolean) => { setPaged(false); setFilters(f => ({ ...f, [k]: v })) }

    function more() {
      if (list.status !== 'ready' || list.next === null) return
      setPaged(true)
      call('mail.list', listPayload(filters, Date.now(), list.next, PAGE_SIZE)).then(r => {
        if (!r.ok) return
        const p = pageOf(r.value, names.current)
        setList(l => (l.status === 'ready' ? { status: 'ready', rows: l.rows.concat(p.rows), next: p.next, building: p.building } : l))
      })
    }

    return (
      <div className="dsm-page-backdrop" data-dsh-session-mail-page="">
        <div className="dsm-page" role="dialog" aria-modal="true" aria-labelledby="dsm-page-title" ref={dialog}>
          <header className="dsm-page-head">
            <h1 id="dsm-page-title">{t('page.title')}</h1>
            <span className="dsm-page-sub">{t('page.sub')}</span>
            <button type="button" className="dsm-btn" data-dsh-session-mail-compose-open="" aria-expanded={compose} onClick={() => { setCompose(c => !c) }}>{t('compose.open')}</button>
            <button type="button" className="dsm-close" aria-label={t('page.close')} title={t('page.close')} data-dsh-session-mail-close="" onClick={() => { page.close() }}>×</button>
          </header>
          {notice ? <div className={notice.error ? 'dsm-alert' : 'dsm-note'} role={notice.error ? 'alert' : 'status'}>{notice.text}</div> : null}
          {compose ? <Compose sessions={sessions} onDone={text => { setNotice({ text }); refresh() }} /> : null}
          <div className="dsm-page-body">
            <main className="dsm-page-main">
              {held.length > 0 || counts.get().total > 0 ? (
                <section className="dsm-section" aria-labelledby="dsm-held-h" data-dsh-session-mail-held-section="">
                  <h2 id="dsm-held-h">{t('page.held', { n: held.length })}</h2>
                  <div className="dsm-bulk" role="group" aria-label={t('page.bulk')}>
                    <label>{t('page.bulkScope')}{' '}
                      <select value={bulkScope} onChange={e => { setBulkScope(e.target.value) }} data-dsh-session-mail-bulk-scope="">
                        <option value="all">{t('page.bulkAll')}</option>
                        {heldSenders.map(s => <option key={s} value={s}>{t('page.bulkFrom', { sender: senderName({ sender: s }) })}</option>)}
                      </select>
                    </label>
                    <button type="button" className="dsm-btn" disabled={busy} data-dsh-session-mail-bulk="approve"
                      onClick={() => { bulk(bulkScope === 'all' ? { all: true } : { sender: bulkScope }, 'approve') }}>{t('page.bulkApprove')}</button>
                    <button type="button" className="dsm-btn dsm-danger" disabled={busy} data-dsh-session-mail-bulk="reject"
                      onClick={() => { bulk(bulkScope === 'all' ? { all: true } : { sender: bulkScope }, 'reject') }}>{t('page.bulkReject')}</button>
                  </div>
                  {held.map(c => {
                    const left = timeLeft(typeof c.expiresAt === 'number' ? c.expiresAt : null, now)
                    const who = senderName(c)
                    return (
                      <article key={c.target + c.requestId} className="dsm-held" data-dsh-session-mail-held={c.requestId} data-sender={c.sender || ''}
                        aria-label={t('page.heldCard', { sender: who, target: titleOf(sessionRow(ctx, c.target), c.target) })}>
                        <div className="dsm-held-head">
                          <SessionButton id={c.sender || null} title={c.senderTitle} machine={machineOf(c.machine, names.current)} />
                          <span aria-hidden="true">→</span>
                          <SessionButton id={c.target} />
                          <span className="dsm-chip">{c.mode}</span>
                          {left ? <span className={'dsm-left' + (left.expired ? ' dsm-expired' : left.h < 1 ? ' dsm-soon' : '')} data-dsh-session-mail-expires={c.expiresAt}>
                            {left.expired ? t('page.expired') : left.h === 0 ? t('page.expiresInMin', { m: left.m }) : left.m === 0 ? t('page.expiresInH', { h: left.h }) : t('page.expiresIn', { h: left.h, m: left.m })}
                          </span> : null}
                          {c.senderRule ? <span className="dsm-chip">{t(('rules.inbound.' + c.senderRule) as Key)}</span> : null}
                        </div>
                        <pre className="dsm-text">{bodyOf(c.text)}</pre>
                        {bodyOf(c.text) !== c.text ? <details className="dsm-exact"><summary>{t('card.exact')}</summary><pre>{c.text}</pre></details> : null}
                        <div className="dsm-actions">
                          <button type="button" className="dsm-btn dsm-primary" disabled={busy} data-dsh-session-mail-approve={c.requestId} onClick={() => { decide(c, 'approve') }}>{t('held.approve')}</button>
                          <button type="button" className="dsm-btn" disabled={busy} data-dsh-session-mail-reject={c.requestId} onClick={() => { decide(c, 'reject') }}>{t('held.reject')}</button>
                          {c.sender ? (['accept', 'hold', 'refuse'] as const).map(inb => (
                            <button key={inb} type="button" className="dsm-btn dsm-rule" disabled={busy} data-dsh-session-mail-always={inb}
                              title={t(('page.always.' + inb + '.hint') as Key, { sender: who })}
                              onClick={() => { always(c, inb) }}>{t(('page.always.' + inb) as Key, { sender: who })}</button>
                          )) : null}
                        </div>
                      </article>
                    )
                  })}
                </section>
              ) : null}
              <section className="dsm-section" aria-labelledby="dsm-list-h">
                <h2 id="dsm-list-h">{t('page.messages')}</h2>
                <div className="dsm-filters" role="search">
                  <input type="search" className="dsm-search" value={queryInput} placeholder={t('page.search')} aria-label={t('page.search')}
                    data-dsh-session-mail-search="" onChange={e => { setQueryInput(e.target.value) }} />
                  <label>{t('page.f.session')}{' '}
                    <select value={filters.session} data-dsh-session-mail-filter="session" onChange={e => { set('session', e.target.value) }}>
                      <option value="">{t('page.f.any')}</option>
                      {sessions.map(s => <option key={s.id} value={s.id}>{titleOf(s, s.id)}</option>)}
                    </select>
                  </label>
                  <label>{t('page.f.fate')}{' '}
                    <select value={filters.fate} data-dsh-session-mail-filter="fate" onChange={e => { set('fate', e.target.value) }}>
                      <option value="">{t('page.f.any')}</option>
                      {FATES.map(f => <option key={f} value={f}>{t(('fate.' + f) as Key)}</option>)}
                    </select>
                  </label>
                  <label>{t('page.f.since')}{' '}
                    <select value={filters.since} data-dsh-session-mail-filter="since" onChange={e => { set('since', e.target.value) }}>
                      <option value="">{t('page.f.anytime')}</option>
                      <option value="1h">{t('page.f.1h')}</option>
                      <option value="24h">{t('page.f.24h')}</option>
                      <option value="7d">{t('page.f.7d')}</option>
                    </select>
                  </label>
                  <label className="dsm-choice">
                    <input type="checkbox" checked={filters.held} data-dsh-session-mail-filter="held" onChange={e => { set('held', e.target.checked) }} />
                    <span>{t('page.f.held')}</span>
                  </label>
                </div>
                <MailList list={list} onThread={id => { page.open(id) }} selected={threadId} />
                {list.status === 'ready' && list.next !== null
                  ? <button type="button" className="dsm-btn" data-dsh-session-mail-more="" onClick={more}>{t('page.more')}</button> : null}
              </section>
              <RulesSection rules={rules} machines={machines} sessions={sessions} busy={busy} act={act} />
              {machines !== null ? <MachinesSection machines={machines} rules={rules} busy={busy} act={act} reload={loadMachines} /> : null}
            </main>
            {thread ? <ThreadPanel thread={thread} onClose={() => { page.open(null) }} /> : null}
          </div>
        </div>
      </div>
    )
  }

  function MailList({ list, onThread, selected }: { list: ListState; onThread: (id: string) => void; selected: string | null }) {
    if (list.status === 'loading') return <p data-dsh-session-mail-list="loading">{t('page.loading')}</p>
    if (list.status === 'missing') return <p className="dsm-note" data-dsh-session-mail-list="missing">{t('page.noIndex')}</p>
    if (list.status === 'error') return <p className="dsm-alert" role="alert" data-dsh-session-mail-list="error">{list.message}</p>
    const b = list.building
    const note = b === null ? null
      : <p className="dsm-note" role="status" data-dsh-session-mail-building={b.total > 0 ? `${b.done}/${b.total}` : ''}>
        {b.total > 0 ? t('page.building', { n: b.done.toLocaleString(), of: b.total.toLocaleString() }) : t('page.buildingStart')}
      </p>
    if (list.rows.length === 0) return note ?? <p data-dsh-session-mail-list="empty">{t('page.none')}</p>
    return (
      <>{note}
      <ol className="dsm-list" data-dsh-session-mail-list="ready">
        {list.rows.map(r => (
          <li key={r.requestId} className={'dsm-mail' + (selected === r.requestId ? ' dsm-selected' : '')} data-dsh-session-mail-message={r.requestId} data-fate={r.fate}>
            <div className="dsm-mail-head">
              <SessionButton id={r.sender} title={r.senderTitle} machine={r.senderMachine} />
              <span aria-hidden="true">→</span>
              <SessionButton id={r.target} title={r.targetTitle} machine={r.targetMachine} />
              {r.mode ? <span className="dsm-chip">{t(r.mode === 'steer' ? 'card.steer' : 'card.queue')}</span> : null}
              {r.hop !== null ? <span className="dsm-chip">{t('card.hop', { hop: r.hop })}</span> : null}
              <Fate fate={r.fate} answered={r.answered} machine={r.targetMachine} />
              <time className="dsm-time" dateTime={new Date(r.time).toISOString()}>{new Date(r.time).toLocaleString()}</time>
              <button type="button" className="dsm-btn dsm-thread-btn" data-dsh-session-mail-thread-open={r.requestId} aria-pressed={selected === r.requestId}
                onClick={() => { onThread(r.requestId) }}>{t('page.thread')}</button>
            </div>
            <p className="dsm-mail-text" onClick={() => { onThread(r.requestId) }}>{r.text}</p>
          </li>
        ))}
      </ol></>
    )
  }

  function ThreadPanel({ thread, onClose }: { thread: { id: string; rows: MailRow[]; truncated: boolean } | { id: string; missing: true; why: string }; onClose: () => void }) {
    const first = 'rows' in thread && thread.rows.length > 0 ? thread.rows[0].sender : null
    return (
      <aside className="dsm-thread" aria-labelledby="dsm-thread-h" data-dsh-session-mail-thread={thread.id}>
        <div className="dsm-thread-head">
          <h2 id="dsm-thread-h">{t('page.threadTitle')}</h2>
          <button type="button" className="dsm-close" aria-label={t('page.threadClose')} title={t('page.threadClose')} onClick={onClose}>×</button>
        </div>
        {'missing' in thread ? <p className="dsm-note" data-dsh-session-mail-thread-missing="">{thread.why}</p> : (
          <ol className="dsm-thread-list">
            {thread.rows.map((r, i) => (
              <li key={r.requestId} className={'dsm-bubble' + (r.sender === first ? ' dsm-a' : ' dsm-b') + (r.requestId === thread.id ? ' dsm-root' : '')}
                data-dsh-session-mail-thread-item={r.requestId} data-index={i}>
                <div className="dsm-mail-head">
                  <SessionButton id={r.sender} title={r.senderTitle} machine={r.senderMachine} />
                  <span aria-hidden="true">→</span>
                  <SessionButton id={r.target} title={r.targetTitle} machine={r.targetMachine} />
                  <Fate fate={r.fate} answered={r.answered} machine={r.targetMachine} />
                  <time className="dsm-time" dateTime={new Date(r.time).toISOString()}>{new Date(r.time).toLocaleTimeString()}</time>
                </div>
                <pre className="dsm-text">{r.text}</pre>
              </li>
            ))}
          </ol>
        )}
        {'truncated' in thread && thread.truncated ? <p className="dsm-note">{t('page.threadMore')}</p> : null}
      </aside>
    )
  }

  /** Held mail waits this long, then is rejected as expired (policy.set {heldTtlMs}: 1 min … 30 days). */
  const TTL_CHOICES = [3_600_000, 4 * 3_600_000, 24 * 3_600_000, 3 * 86_400_000, 7 * 86_400_000]
  const ttlText = (ms: number) => (ms % 86_400_000 === 0 && ms >= 2 * 86_400_000 ? t('rules.ttlDays', { d: ms / 86_400_000 })
    : ms % 3_600_000 === 0 ? t('rules.ttlHours', { h: ms / 3_600_000 }) : t('rules.ttlMinutes', { m: Math.round(ms / 60_000) }))

  type Act = <V>(endpoint: string, payload: object, done?: (r: Result<V>) => string | null) => Promise<Result<V>>

  function RulesSection({ rules, machines, sessions, busy, act }: { rules: Rules | null; machines: MachineLink[] | null; sessions: SessionRow[]; busy: boolean; act: Act }) {
    const [who, setWho] = useState('')
    const [inb, setInb] = useState<Inbound>('accept')
    if (rules === null) return null
    const machineName = (id: string) => (machines || []).find(m => m.id === id)?.name || id.slice(0, 8)
    return (
      <section className="dsm-section" aria-labelledby="dsm-rules-h" data-dsh-session-mail-rules="">
        <h2 id="dsm-rules-h">{t('rules.title')}</h2>
        <p className="dsm-muted">{t('rules.orderIntro')}</p>
        <ol className="dsm-order" data-dsh-session-mail-order="">
          {rules.order.map(b => <li key={b} data-by={b}>{t(('rules.order.' + b) as Key)}</li>)}
        </ol>
        {rules.unverified ? <div className="dsm-alert" role="alert">{t('policy.unverified', { why: rules.unverified })}</div> : null}
        <label className="dsm-stop">
          <input type="checkbox" role="switch" checked={rules.stopAll} aria-checked={rules.stopAll} disabled={busy} data-dsh-session-mail-page-stop-all=""
            onChange={e => { act('policy.set', { stopAll: e.target.checked }) }} />
          <span>{t('policy.stopAll')}</span>
        </label>
        {rules.heldTtlMs !== null ? (
          <label className="dsm-ttl">{t('rules.ttlLabel')}{' '}
            <select value={String(rules.heldTtlMs)} disabled={busy} data-dsh-session-mail-ttl=""
              onChange={e => { act('policy.set', { heldTtlMs: Number(e.target.value) }, () => t('rules.ttlSaved')) }}>
              {Array.from(new Set([...TTL_CHOICES, rules.heldTtlMs])).sort((a, b) => a - b).map(ms => (
                <option key={ms} value={String(ms)}>{ttlText(ms)}</option>
              ))}
            </select>
          </label>
        ) : null}
        <h3>{t('rules.senders')}</h3>
        {Object.keys(rules.senders).length === 0 ? <p className="dsm-muted">{t('rules.none')}</p> : (
          <ul className="dsm-rules">
            {Object.entries(rules.senders).map(([id, v]) => (
              <li key={id} data-dsh-session-mail-sender-rule={id} data-inbound={v}>
                <SessionButton id={id} /> <span className="dsm-chip">{t(('rules.inbound.' + v) as Key)}</span>
                <button type="button" className="dsm-btn" disabled={busy} data-dsh-session-mail-rule-remove={id}
                  onClick={() => { act('rules.set', { sender: id, inbound: null }) }}>{t('rules.remove')}</button>
              </li>
            ))}
          </ul>
        )}
        <div className="dsm-add-rule" role="group" aria-label={t('rules.add')}>
          <select value={who} onChange={e => { setWho(e.target.value) }} aria-label={t('rules.addSender')} data-dsh-session-mail-rule-sender="">
            <option value="">{t('rules.addSender')}</option>
            {sessions.map(s => <option key={s.id} value={s.id}>{titleOf(s, s.id)}</option>)}
          </select>
          <select value={inb} onChange={e => { setInb(e.target.value as Inbound) }} aria-label={t('rules.addInbound')} data-dsh-session-mail-rule-inbound="">
            {(['accept', 'hold', 'refuse'] as const).map(v => <option key={v} value={v}>{t(('rules.inbound.' + v) as Key)}</option>)}
          </select>
          <button type="button" className="dsm-btn" disabled={busy || who === ''} data-dsh-session-mail-rule-add=""
            onClick={() => { act('rules.set', { sender: who, inbound: inb }); setWho('') }}>{t('rules.add')}</button>
        </div>
        {Object.keys(rules.machines).length > 0 ? <>
          <h3>{t('rules.machines')}</h3>
          <ul className="dsm-rules">
            {Object.entries(rules.machines).map(([id, v]) => (
              <li key={id} data-dsh-session-mail-machine-rule={id}><span className="dsm-chip dsm-machine">{machineName(id)}</span> <span className="dsm-chip">{t(('rules.inbound.' + v) as Key)}</span>
                <button type="button" className="dsm-btn" disabled={busy} onClick={() => { act('rules.set', { machine: id, inbound: null }) }}>{t('rules.remove')}</button></li>
            ))}
          </ul>
        </> : null}
      </section>
    )
  }

  function MachinesSection({ machines, rules, busy, act, reload }: { machines: MachineLink[]; rules: Rules | null; busy: boolean; act: Act; reload: () => Promise<unknown> }) {
    const [invite, setInvite] = useState<{ text: string; expiresAt: number | null } | null>(null)
    const [paste, setPaste] = useState('')
    const [relayKind, setRelayKind] = useState<'none' | 'public' | 'url'>('none')
    const [relayUrl, setRelayUrl] = useState('')
    const relayOk = relayKind !== 'url' || /^https?:\/\/\S{1,500}$/.test(relayUrl.trim())
    const relay = relayKind === 'url' ? relayUrl.trim() : relayKind
    const [pasteName, setPasteName] = useState('')
    const [renames, setRenames] = useState<Record<string, string>>({})
    const after = <V,>(p: Promise<Result<V>>) => p.then(r => { reload(); return r })
    const pasteOk = /^dshm1[A-Za-z0-9_-]+$/.test(paste.trim())
    const nameOk = MACHINE_NAME.test(pasteName.trim())
    return (
      <section className="dsm-section" aria-labelledby="dsm-machines-h" data-dsh-session-mail-machines="">
        <h2 id="dsm-machines-h">{t('machines.title')}</h2>
        <p className="dsm-muted">{t('machines.intro')}</p>
        {machines.length === 0 ? <p className="dsm-muted" data-dsh-session-mail-machines-none="">{t('machines.none')}</p> : (
          <ul className="dsm-rules dsm-machine-list">
            {machines.map(m => {
              const inbound = rules?.machines[m.id] || ''
              const draft = renames[m.id] ?? m.name
              const canRename = !busy && draft !== m.name && MACHINE_NAME.test(draft)
              const rename = () => {
                if (!canRename) return
                after(act('machines.rename', { name: m.name, newName: draft }, () => t('machines.renamed', { name: draft })))
                  .then(r => { if (r.ok) setRenames(x => { const y = { ...x }; delete y[m.id]; return y }) })
              }
              const status = m.online === true ? t('machines.online', { ms: m.rttMs !== null ? Math.max(1, Math.round(m.rttMs)) : '?' })
                : m.online === false ? t('machines.offline') : t('machines.unknown')
              return (
                <li key={m.id} className="dsm-machine-row" data-dsh-session-mail-machine={m.id} data-name={m.name}>
                  <div className="dsm-machine-head">
                    <strong className="dsm-machine-name">{m.name}</strong>
                    <span className={'dsm-chip ' + (m.online === true ? 'dsm-fate-landed' : m.online === false ? 'dsm-fate-rejected' : '')}
                      data-dsh-session-mail-machine-online={m.online === null ? 'unknown' : String(m.online)} title={m.error || undefined}>{status}</span>
                    <span className="dsm-muted" data-dsh-session-mail-machine-seen={m.lastSeen ?? ''}>
                      {m.lastSeen !== null ? t('machines.lastSeen', { time: new Date(m.lastSeen).toLocaleString() }) : t('machines.neverSeen')}</span>
                    <code className="dsm-id" title={m.id}>{m.id.slice(0, 12)}…</code>
                    <span className="dsm-muted" data-dsh-session-mail-machine-relay={m.relay ?? 'none'}>{m.relay === null || m.relay === 'none' ? t('machines.direct') : m.relay === 'public' ? t('machines.relayPublicShown') : t('machines.relay', { relay: m.relay })}</span>
                  </div>
                  <div className="dsm-actions">
                    <input value={draft} aria-label={t('machines.renameLabel', { name: m.name })} size={16} data-dsh-session-mail-machine-name={m.id}
                      onChange={e => { setRenames(r => ({ ...r, [m.id]: e.target.value })) }}
                      onKeyDown={e => { if (e.key === 'Enter') { e.preventDefault(); rename() } }} />
                    <button type="button" className="dsm-btn" disabled={!canRename} data-dsh-session-mail-machine-rename={m.id} onClick={rename}>{t('machines.rename')}</button>
                    <label>{t('machines.inbound')}{' '}
                      <select value={inbound} disabled={busy} data-dsh-session-mail-machine-inbound={m.id}
                        onChange={e => { const v = e.target.value; act('rules.set', { machine: m.id, inbound: v === '' ? null : v }, () => t('machines.inboundSaved', { name: m.name })) }}>
                        <option value="">{t('machines.inboundDefault')}</option>
                        {(['accept', 'hold', 'refuse'] as const).map(v => <option key={v} value={v}>{t(('rules.inbound.' + v) as Key)}</option>)}
                      </select>
                    </label>
                    <button type="button" className="dsm-btn dsm-danger" disabled={busy} data-dsh-session-mail-machine-unlink={m.id}
                      onClick={() => { if (typeof window === 'undefined' || window.confirm(t('machines.unlinkConfirm', { name: m.name }))) after(act('machines.unlink', { name: m.name }, () => t('machines.unlinked', { name: m.name }))) }}>{t('machines.unlink')}</button>
                  </div>
                </li>
              )
            })}
          </ul>
        )}
        <h3>{t('machines.addTitle')}</h3>
        <div className="dsm-invite">
          <label>{t('machines.relayChoice')}{' '}
            <select value={relayKind} disabled={busy} data-dsh-session-mail-invite-relay=""
              onChange={e => { setRelayKind(e.target.value as 'none' | 'public' | 'url') }}>
              <option value="none">{t('machines.relayNone')}</option>
              <option value="public">{t('machines.relayPublic')}</option>
              <option value="url">{t('machines.relayOwn')}</option>
            </select>
          </label>
          {relayKind === 'url' ? <input value={relayUrl} placeholder={t('machines.relayUrl')} aria-label={t('machines.relayUrl')} size={32} data-dsh-session-mail-invite-relay-url=""
            onChange={e => { setRelayUrl(e.target.value) }} /> : null}
          {relayKind === 'public' ? <p className="dsm-muted" data-dsh-session-mail-invite-relay-note="">{t('machines.relayPublicNote')}</p> : null}
          <button type="button" className="dsm-btn" disabled={busy || !relayOk} data-dsh-session-mail-invite=""
            onClick={() => { act<any>('machines.invite', relay === 'none' ? {} : { relay }).then(r => { if (r.ok) setInvite({ text: typeof r.value === 'string' ? r.value : String(r.value?.invite ?? ''), expiresAt: typeof r.value?.expiresAt === 'number' ? r.value.expiresAt : null }) }) }}>{t('machines.invite')}</button>
          {invite !== null ? <>
            <textarea readOnly value={invite.text} rows={3} aria-label={t('machines.inviteText')} data-dsh-session-mail-invite-text="" onFocus={e => { e.target.select() }} />
            <button type="button" className="dsm-btn" onClick={() => { try { navigator.clipboard.writeText(invite.text) } catch { /* select and copy by hand */ } }}>{t('machines.copy')}</button>
            <p className="dsm-muted">{invite.expiresAt !== null ? t('machines.inviteHint', { time: new Date(invite.expiresAt).toLocaleTimeString() }) : null}</p>
          </> : null}
        </div>
        <div className="dsm-invite">
          <textarea value={paste} rows={2} placeholder={t('machines.paste')} aria-label={t('machines.paste')} data-dsh-session-mail-invite-paste=""
            onChange={e => { setPaste(e.target.value) }} />
          <input value={pasteName} placeholder={t('machines.name')} aria-label={t('machines.nameNew')} data-dsh-session-mail-link-name=""
            onChange={e => { setPasteName(e.target.value) }} />
          <button type="button" className="dsm-btn dsm-primary" disabled={busy || !pasteOk || !nameOk} data-dsh-session-mail-link=""
            onClick={() => { const name = pasteName.trim(); after(act('machines.link', { invite: paste.trim(), name }, () => t('machines.linked', { name }))).then(r => { if (r.ok) { setPaste(''); setPasteName('') } }) }}>{t('machines.link')}</button>
          {pasteName !== '' && !nameOk ? <p className="dsm-alert" role="alert">{t('machines.nameRule')}</p> : null}
        </div>
      </section>
    )
  }

  interface Landing { sessionId: string; requestId?: string | null; state: string; code?: string | null; message?: string | null }

  function Compose({ sessions, onDone }: { sessions: SessionRow[]; onDone: (text: string) => void }) {
    const [chosen, setChosen] = useState<Record<string, boolean>>({})
    const [text, setText] = useState('')
    const [mode, setMode] = useState<'queue' | 'steer'>('queue')
    const [sending, setSending] = useState(false)
    const [landings, setLandings] = useState<Landing[] | null>(null)
    const [error, setError] = useState<string | null>(null)
    const ids = Object.keys(chosen).filter(k => chosen[k])
    function send(e: React.FormEvent) {
      e.preventDefault()
      if (ids.length === 0 || text.trim() === '') return
      setSending(true)
      setError(null)
      call<{ landings?: Landing[] }>('human.sendMany', { sessionIds: ids, text, mode }).then(r => {
        setSending(false)
        if (!r.ok) { setError(missing(r) ? t('compose.unavailable') : (r.error.message || r.error.code)); return }
        const ls = Array.isArray(r.value.landings) ? r.value.landings : []
        setLandings(ls)
        onDone(t('compose.done', { n: ls.filter(l => l.state === 'accepted').length, of: ls.length }))
      })
    }
    return (
      <form className="dsm-section dsm-compose" onSubmit={send} data-dsh-session-mail-compose="" aria-labelledby="dsm-compose-h">
        <h2 id="dsm-compose-h">{t('compose.title')}</h2>
        <p className="dsm-muted">{t('compose.hint')}</p>
        <fieldset className="dsm-targets">
          <legend>{t('compose.to')}</legend>
          {sessions.map(s => (
            <label key={s.id} className="dsm-choice">
              <input type="checkbox" checked={!!chosen[s.id]} data-dsh-session-mail-compose-to={s.id}
                onChange={e => { setChosen(c => ({ ...c, [s.id]: e.target.checked })) }} />
              <span>{titleOf(s, s.id)}</span>
            </label>
          ))}
        </fieldset>
        <textarea value={text} rows={3} aria-label={t('compose.text')} placeholder={t('compose.text')} data-dsh-session-mail-compose-text=""
          onChange={e => { setText(e.target.value) }} />
        <div className="dsm-actions">
          <label className="dsm-choice"><input type="radio" name="dsm-compose-mode" checked={mode === 'queue'} onChange={() => { setMode('queue') }} /><span>{t('compose.queue')}</span></label>
          <label className="dsm-choice"><input type="radio" name="dsm-compose-mode" checked={mode === 'steer'} onChange={() => { setMode('steer') }} /><span>{t('compose.steer')}</span></label>
          <button type="submit" className="dsm-btn dsm-primary" disabled={sending || ids.length === 0 || text.trim() === ''} data-dsh-session-mail-compose-send="">
            {t('compose.send', { n: ids.length })}</button>
        </div>
        {error ? <div className="dsm-alert" role="alert">{error}</div> : null}
        {landings ? (
          <ul className="dsm-landings" aria-live="polite">
            {landings.map(l => (
              <li key={l.sessionId} data-dsh-session-mail-landing={l.sessionId} data-state={l.state}>
                <SessionButton id={l.sessionId} />{' '}
                <span className={'dsm-chip dsm-landing-' + l.state}>{t(('compose.state.' + l.state) as Key)}</span>
                {l.message ? <span className="dsm-muted"> {l.code ? l.code + ': ' : ''}{l.message}</span> : null}
              </li>
            ))}
          </ul>
        ) : null}
      </form>
    )
  }

  return MailPage
}
