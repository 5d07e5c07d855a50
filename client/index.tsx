// dsh-session-mail: the web client half (package.json `dsh.client`, `exports["./client"]`).
//
// Typed source, bundled by esbuild (scripts/build-client.mjs) into the classic script rc.8 loads:
// one `lib/client.js` per `dsh.client` package, a same-origin <script> whose only effect is to register a
// factory (`window.__ModuleLoader__.load({id, factory})`, packages/client/modules/src/index.ts
// `injectBootManifest`; .agents/notes/implemented/architecture/2026-07-23-client-plugin-loading-model.md).
// The factory runs when the Cordis Loader imports the row; `require` answers the shell's platform modules
// only (packages/client/web/src/platform.ts `PLATFORM_MODULES`): this bundle asks for `react` and nothing
// else. Nothing here throws at the page: one failed client entry keeps the whole UI on the boot page
// (packages/client/web/README.md), so every extension point is guarded and an absent one is skipped.
//
// Extension points used (rc.8 source paths):
// - the agent mail card: a keyed `conversation.chat.node` renderer for the `user` and `steering` node kinds
//   registered at priority -1, which shadows ui-conversation's own (packages/client/ui-slots/src/index.ts
//   `register` "Shadowing"; packages/client/ui-conversation/src/client/chat/register-node-renderers.ts). A
//   message whose `source.rpcId` starts with `dsh-session-mail:` (seed 003) renders as agent mail; every other
//   is handed to the built-in renderer with the same props (registered under its locale namespace).
// - the per-session mail tab: a `conversation.view` entry (packages/client/ui-trajectory/src/client/index.ts).
// - the `@` trigger: an `inputTriggers` source (packages/client/ui-reference/src/client/index.ts).
// - the home-wide Agent mail page (page.tsx): its entry a `sidebar.footer.action` (packages/client/ui-sidebar/
//   src/client/contract/slots.ts), the page a `shell.overlay` entry (packages/client/ui-layout/src/client/
//   index.ts) shown while open; the held counts as badges on the sidebar's session rows (counts.ts).
// - data: the plugin's host route `/dsh-session-mail/<endpoint>` (lib/client-host.js), a Connection RPC
//   channel behind the host's own request policy (packages/client/connection/src/rpc-host.ts).
import { React, h } from './react'
import { NS, en, zh, format, type Key, type T } from './i18n'
import { bodyOf, isAgentMail, senderFromText, sessionMention, textOf } from './mail'
import type { HostContext } from './host'
import { createCardFacts } from './facts'
import { makeAgentCard, type NodeProps } from './card'
import { makeMailView } from './view'
import { makeTriggerSource, remoteMention, remoteSessionsOf } from './trigger'
import { STYLE } from './style'
import { createHeldCounts, decorateSessionList, sessionIdOfRow } from './counts'
import { countsOf, listPayload, machinesOf, mailRow, pageOf, rulesOf, threadOf, timeLeft } from './model'
import { createPageStore, makeEntry, makePage } from './page'

export const name = 'dsh-session-mail-client'
export const inject = ['slots', 'sessions', 'locale', 'inputTriggers']

function guarded<R>(label: string, fn: () => R): R | undefined {
  try { return fn() } catch (e) {
    try { console.warn('dsh-session-mail client: ' + label + ' skipped:', e) } catch { /* no console */ }
    return undefined
  }
}

function injectStyle(): () => void {
  if (typeof document === 'undefined' || document.querySelector('style[data-plugin="dsh-session-mail"]')) return () => {}
  const el = document.createElement('style')
  el.setAttribute('data-plugin', 'dsh-session-mail')
  el.textContent = STYLE
  document.head.appendChild(el)
  return () => { el.remove() }
}

export function apply(ctx: HostContext): void {
  guarded('style', () => { ctx.effect!(() => injectStyle(), 'dsh-session-mail: style') })
  guarded('locale', () => { ctx.effect!(() => ctx.locale!.register(NS, { zh, en }), 'dsh-session-mail: dictionaries') })
  const bound = guarded('locale.bind', () => ctx.locale!.bind(NS))
  const t: T = (key: Key, params?: Record<string, unknown>) => {
    const s = bound ? guarded('t', () => bound(key, params)) : undefined
    return typeof s === 'string' && s !== key ? s : format(en[key] || key, params)
  }
  const store = createCardFacts()
  const counts = createHeldCounts(ctx)
  const page = createPageStore()
  const Card = makeAgentCard(ctx, store, t, requestId => { page.open(requestId) })
  for (const key of ['user', 'steering']) {
    guarded('card ' + key, () => {
      const slots = ctx.slots!
      let own: (props: NodeProps) => unknown = () => null
      const builtin = () => {
        const list = typeof slots.entries === 'function' ? slots.entries('conversation.chat.node') : []
        for (const e of list) if (e && e.component !== own && e.options && e.options.key === key) return e.component as any
        return null
      }
      own = function DshSessionMailMessage(props: NodeProps) {
        const data = props && props.node ? props.node.data : null
        if (data && isAgentMail(data.source)) return <Card {...props} />
        const B = builtin()
        return B ? h(B, props) : null
      }
      slots.inject('conversation.chat.node', () => slots.register({ name: 'conversation.chat.node', key, priority: -1, locale: 'conversation' }, own))
    })
  }
  guarded('view', () => {
    const View = makeMailView(ctx, t)
    const slots = ctx.slots!
    slots.inject('conversation.view', () => slots.register({
      name: 'conversation.view',
      id: 'dsh-session-mail',
      order: 20,
      label: () => t('view.mail'),
      inject: (sessionId: string) => ({ sessionId }),
    }, View))
  })
  guarded('page entry', () => {
    const slots = ctx.slots!
    const Entry = makeEntry(page, counts, t)
    slots.inject('sidebar.footer.action', () => slots.register({
      name: 'sidebar.footer.action', id: 'dsh-session-mail', order: 10, label: () => t('page.entry'),
    }, Entry))
  })
  guarded('page', () => {
    const slots = ctx.slots!
    const Page = makePage(ctx, page, counts, t)
    slots.inject('shell.overlay', () => slots.register({
      name: 'shell.overlay', id: 'dsh-session-mail-page', order: 50, label: () => t('page.title'),
    }, Page))
  })
  guarded('session list badges', () => {
    ctx.effect!(() => decorateSessionList(ctx, counts, t), 'dsh-session-mail: held counts in the session list')
  })
  guarded('trigger', () => {
    const triggers = ctx.inputTriggers || (typeof ctx.get === 'function' ? ctx.get('inputTriggers') : undefined)
    if (!triggers || typeof triggers.registerSource !== 'function') return
    const source = makeTriggerSource(ctx, t)
    ctx.effect!(() => triggers.registerSource(source), 'dsh-session-mail: @ source')
  })
}

/** For the unit tests (test/client.test.mjs): the pure parts. */
export const internals = {
  isAgentMail, senderFromText, bodyOf, textOf, sessionMention, en, zh,
  mailRow, pageOf, threadOf, countsOf, rulesOf, timeLeft, listPayload, machinesOf, sessionIdOfRow, createPageStore, createHeldCounts,
  remoteSessionsOf, remoteMention,
}
