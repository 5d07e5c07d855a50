// The agent mail card: how a message our plugin delivered looks in the receiving session's chat. The facts
// (sender, mode, hop, machine) come from the sender's ledger line through the `card` route, not from the
// body: a model can write anything in a body.
import { React } from './react'
import { bodyOf, senderFromText, shortId, textOf } from './mail'
import { openSession, sessionRow, titleOf, type HostContext } from './host'
import { useFacts, useSessionList } from './hooks'
import type { FactStore } from './facts'
import type { T } from './i18n'
import { CARD_ATTR } from './style'

export interface NodeProps { node: { kind?: string; data?: { source?: any; content?: unknown } } }

export function makeAgentCard(ctx: HostContext, store: FactStore, t: T, openThread?: (requestId: string) => void) {
  return function AgentMailCard(props: NodeProps) {
    const data = props.node && props.node.data ? props.node.data : {}
    const requestId: string = data.source.rpcId
    const text = textOf(data.content)
    const facts = useFacts(store, requestId) || {}
    useSessionList(ctx)
    const sender = facts.sender || senderFromText(text)
    const title = titleOf(sessionRow(ctx, sender), facts.senderTitle || sender || '?')
    const mode = facts.mode || (props.node.kind === 'steering' ? 'steer' : 'queue')
    const hop = facts.hop
    const open = t('card.open', { title })
    // a sender on a linked machine (the ledger line's fromMachine): named with its machine, not opened here
    const machine = facts.machine || null
    const aria = machine ? t('card.ariaMachine', { title, machine: machine.name }) : t('card.aria', { title })
    const attrs: Record<string, unknown> = { role: 'article', 'aria-label': aria, 'data-request-id': requestId, [CARD_ATTR]: '' }
    const body = bodyOf(text)
    return (
      <div {...attrs}>
        <div className="dsm-card-head">
          <span className="dsm-from">{t('card.from')}</span>
          {sender && !machine
            ? <button type="button" className="dsm-peer" data-dsh-session-mail-open={sender} title={open} aria-label={open}
              onClick={e => { e.preventDefault(); openSession(ctx, sender) }}>{title}</button>
            : <span className="dsm-peer">{title}</span>}
          {machine ? <span className="dsm-chip dsm-machine" data-machine={machine.id} data-dsh-session-mail-card-machine={machine.name}
            title={t('card.machine', { machine: machine.name, id: machine.id })}>{t('card.onMachine', { machine: machine.name })}</span> : null}
          {sender ? <code className="dsm-id" title={sender}>{shortId(sender)}</code> : null}
          <span className="dsm-chip" data-mode={mode}>{t(mode === 'steer' ? 'card.steer' : 'card.queue')}</span>
          {typeof hop === 'number' ? <span className="dsm-chip" data-hop={hop}>{t('card.hop', { hop })}</span> : null}
          {openThread ? <button type="button" className="dsm-peer dsm-card-thread" data-dsh-session-mail-card-thread={requestId}
            onClick={e => { e.preventDefault(); openThread(requestId) }}>{t('card.thread')}</button> : null}
        </div>
        <div className="dsm-body">{body}</div>
        {body !== text ? <details className="dsm-exact"><summary>{t('card.exact')}</summary><pre>{text}</pre></details> : null}
      </div>
    )
  }
}
