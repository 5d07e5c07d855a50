// The per-session "Agent mail" tab (a `conversation.view` entry, the ui-trajectory pattern): the session's
// inbound policy, the home's stop-all switch, the messages held for the human, and its mail rows from the
// `view` route. The view ring mounts only the active tab, so a closed tab polls nothing.
import { React, useCallback, useEffect, useState } from './react'
import { call, type Result } from './rpc'
import { openSession, sessionRow, titleOf, type HostContext } from './host'
import { useSessionList } from './hooks'
import type { Key, T } from './i18n'
import type { Fate, HeldMessage, Policy } from './types'

export const POLL_MS = 2000

interface ViewRow {
  requestId: string
  direction: 'in' | 'out'
  peer?: string
  peerTitle?: string
  timeMs: number
  mode?: string
  hop?: number
  outcome: string
  fate: Fate
  fateText?: string
  machine?: { id: string; name: string } | null
  /** Mail out to a linked machine: the remembered answer the fate comes from (crossing::fates). */
  answered?: { at: number; source: string } | null
}
interface ViewValue { rows: ViewRow[]; held?: HeldMessage[]; policy: Policy; rules?: unknown; truncated?: boolean }
type ViewState = (Result<ViewValue> & { actionError?: { message?: string } }) | null

/** Poll `fn` every `ms` while mounted and the page is visible (a hidden page asks nothing). */
export function useVisiblePoll(fn: () => Promise<unknown>, ms: number, deps: unknown[]): void {
  useEffect(() => {
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    function tick() {
      if (stopped) return
      const p = typeof document !== 'undefined' && document.hidden ? Promise.resolve() : fn()
      p.then(() => { if (!stopped) timer = setTimeout(tick, ms) })
    }
    tick()
    return () => { stopped = true; clearTimeout(timer) }
  }, deps)
}

export function makeMailView(ctx: HostContext, t: T) {
  return function MailView(props: { sessionId?: string; session?: { sessionId?: string } }) {
    const sessionId = props.sessionId || (props.session && props.session.sessionId)
    const [state, setState] = useState<ViewState>(null)
    const [busy, setBusy] = useState(false)
    useSessionList(ctx)
    const refresh = useCallback(() => {
      if (!sessionId) return Promise.resolve()
      return call<ViewValue>('view', { sessionId, limit: 100 }).then(r => { setState(r) })
    }, [sessionId])
    useVisiblePoll(refresh, POLL_MS, [refresh])
    function act(endpoint: string, payload: object) {
      setBusy(true)
      return call(endpoint, payload).then(r => {
        setBusy(false)
        if (!r.ok) setState(s => Object.assign({}, s, { actionError: r.error }))
        return refresh()
      })
    }
    if (state === null) return <div className="dsm-view" data-dsh-session-mail-view="loading" />
    if (!state.ok) return <div className="dsm-view" data-dsh-session-mail-view="unavailable">{t('view.unavailable')}</div>
    const v = state.value
    const peerButton = (id: string, fallback?: string) => {
      const title = titleOf(sessionRow(ctx, id), fallback || id)
      return <button type="button" className="dsm-peer" data-dsh-session-mail-open={id} title={id} onClick={() => { openSession(ctx, id) }}>{title}</button>
    }
    const mode = v.policy.inbound
    const held = (v.held || []).filter(x => x.state === 'held')
    return (
      <div className="dsm-view" data-dsh-session-mail-view="ready">
        <h2>{t('view.title')}</h2>
        <fieldset className="dsm-policy">
          <legend>{t('policy.legend')}</legend>
          {(['accept', 'hold', 'refuse'] as const).map(m => (
            <label key={m} className="dsm-choice">
              <input type="radio" name={'dsm-inbound-' + sessionId} value={m} checked={mode === m} disabled={busy}
                data-dsh-session-mail-policy={m} onChange={() => { act('policy.set', { sessionId, inbound: m }) }} />
              <span>{t(('policy.' + m) as 'policy.accept')}</span>
            </label>
          ))}
        </fieldset>
        <label className="dsm-stop">
          <input type="checkbox" role="switch" checked={!!v.policy.stopAll} aria-checked={!!v.policy.stopAll} disabled={busy}
            data-dsh-session-mail-stop-all="" onChange={e => { act('policy.set', { stopAll: e.target.checked }) }} />
          <span>{t('policy.stopAll')}</span>
        </label>
        {v.policy.stopAll ? <div className="dsm-alert" role="status">{t('policy.stopped')}</div> : null}
        {v.policy.unverified ? <div className="dsm-alert" role="alert">{t('policy.unverified', { why: v.policy.unverified })}</div> : null}
        {state.actionError ? <div className="dsm-alert" role="alert">{state.actionError.message}</div> : null}
        <h3>{t('held.title')}</h3>
        {held.length === 0
          ? <p data-dsh-session-mail-held="none">{t('held.none')}</p>
          : held.map(x => (
            <div key={x.requestId} className="dsm-held" data-dsh-session-mail-held={x.requestId}>
              <div>{t('held.from', { peer: '' })}{x.sender ? (x.machine ? <><span className="dsm-peer" title={x.sender}>{x.senderTitle || x.sender}</span>{' '}<span className="dsm-chip dsm-machine" data-machine={x.machine.id}>{t('card.onMachine', { machine: x.machine.name })}</span></> : peerButton(x.sender, x.senderTitle)) : '?'}{' · '}{new Date(x.postedAt).toLocaleString()}{' · '}{x.mode}</div>
              <pre>{x.text}</pre>
              <button type="button" className="dsm-btn" disabled={busy} data-dsh-session-mail-approve={x.requestId}
                onClick={() => { act('held.decide', { sessionId, requestId: x.requestId, decision: 'approve' }) }}>{t('held.approve')}</button>
              <button type="button" className="dsm-btn" disabled={busy} data-dsh-session-mail-reject={x.requestId}
                onClick={() => { act('held.decide', { sessionId, requestId: x.requestId, decision: 'reject' }) }}>{t('held.reject')}</button>
              {x.sender && v.rules ? (['accept', 'hold', 'refuse'] as const).map(inb => {
                const who = titleOf(sessionRow(ctx, x.sender), x.senderTitle || x.sender)
                return (
                  <button key={inb} type="button" className="dsm-btn dsm-rule" disabled={busy} data-dsh-session-mail-always={inb}
                    title={t(('page.always.' + inb + '.hint') as Key, { sender: who })}
                    onClick={() => {
                      // the standing rule, then this message as the rule says (hold: it stays held)
                      act('rules.set', { sender: x.sender, inbound: inb }).then(() => {
                        if (inb !== 'hold') return act('held.decide', { sessionId, requestId: x.requestId, decision: inb === 'accept' ? 'approve' : 'reject' })
                      })
                    }}>{t(('page.always.' + inb) as Key, { sender: who })}</button>
                )
              }) : null}
            </div>
          ))}
        <h3>{t('view.mail')}</h3>
        {v.rows.length === 0
          ? <p>{t('view.empty')}</p>
          : (
            <table className="dsm-table">
              <thead><tr>{(['dir', 'peer', 'time', 'mode', 'hop', 'outcome', 'fate'] as const).map(c => <th key={c} scope="col">{t(('view.col.' + c) as 'view.col.dir')}</th>)}</tr></thead>
              <tbody>
                {v.rows.map(r => (
                  <tr key={r.requestId + r.direction} data-dsh-session-mail-row={r.requestId} data-fate={r.fate} data-direction={r.direction}>
                    <td>{t(r.direction === 'in' ? 'view.in' : 'view.out')}</td>
                    <td>{r.peer ? (r.machine ? <span className="dsm-peer" title={r.peer}>{r.peerTitle || r.peer}</span> : peerButton(r.peer, r.peerTitle)) : '—'}
                      {r.machine ? <span className="dsm-chip dsm-machine" data-machine={r.machine.id} data-dsh-session-mail-row-machine={r.machine.name}
                        title={t('card.machine', { machine: r.machine.name, id: r.machine.id })}>{t('card.onMachine', { machine: r.machine.name })}</span> : null}</td>
                    <td><time dateTime={new Date(r.timeMs).toISOString()}>{new Date(r.timeMs).toLocaleString()}</time></td>
                    <td>{r.mode || '—'}</td>
                    <td>{typeof r.hop === 'number' ? String(r.hop) : '—'}</td>
                    <td>{r.outcome}</td>
                    <td className={'dsm-fate-' + r.fate} title={r.fateText}>{t(('fate.' + r.fate) as 'fate.landed')}
                      {r.answered && typeof r.answered.at === 'number' ? <span className="dsm-muted" data-dsh-session-mail-fate-as-of={String(r.answered.at)} data-source={String(r.answered.source)}>
                        {' '}{t('fate.asOfShort', { time: new Date(r.answered.at).toLocaleString() })}</span> : null}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        {v.truncated ? <p>{t('view.more', { n: v.rows.length })}</p> : null}
      </div>
    )
  }
}
