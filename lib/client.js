// dsh-session-mail: the web client half (package.json `dsh.client`, `exports["./client"]`).
//
// A plain classic script, no build step: rc.8 loads one `lib/client.js` per `dsh.client` package as a
// same-origin <script> whose only effect is to register a factory (`window.__ModuleLoader__.load({id,
// factory})`, packages/client/modules/src/index.ts `injectBootManifest`; loading model:
// .agents/notes/implemented/architecture/2026-07-23-client-plugin-loading-model.md). The factory runs when
// the Cordis Loader imports the row; `require` answers the shell's platform modules only (React, Cordis, the
// static UI libraries: packages/client/web/src/platform.ts `PLATFORM_MODULES`). Nothing here throws at the
// page: one failed client entry keeps the whole UI on the boot page (packages/client/web/README.md), so
// every extension point is guarded and an absent one is skipped.
//
// Extension points used (rc.8 source paths):
// - the agent mail card: a keyed `conversation.chat.node` renderer for the `user` and `steering` node kinds
//   registered at priority -1, which shadows ui-conversation's own (packages/client/ui-slots/src/index.ts
//   `register` "Shadowing"; the built-in registrations: packages/client/ui-conversation/src/client/chat/
//   register-node-renderers.ts). A message whose `source.rpcId` starts with `dsh-session-mail:` (seed 003;
//   the node data keeps `source`: packages/client/ui-conversation/src/client/conversation-nodes/message.ts)
//   renders as agent mail; every other message is handed to the built-in renderer unchanged, with the same
//   props (registered under its locale namespace `conversation`, so its `t` is the one it expects).
// - the mail view: a `conversation.view` tab, as ui-trajectory registers its own
//   (packages/client/ui-trajectory/src/client/index.ts); the view ring mounts only the active tab, so a closed
//   tab polls nothing (packages/client/ui-conversation/README.md "The view ring is a slot").
// - the `@` trigger: an `inputTriggers` source, the host's own pattern (packages/client/ui-reference/src/
//   client/index.ts: `onPick` → `insert` with `appearance: 'session'`, `codec.serialize` = the prompt text).
// - data: the plugin's host route `/dsh-session-mail/<endpoint>` (lib/client-host.js), a Connection RPC
//   channel behind the host's own request policy (packages/client/connection/src/rpc-host.ts
//   `HostConnectionService.register` → `isTrustedApiRequest`).
(function () {
  'use strict'
  var loader = typeof window !== 'undefined' ? window.__ModuleLoader__ : undefined
  if (loader === undefined || loader === null || typeof loader.load !== 'function') return
  loader.load({
    id: 'dsh-session-mail',
    factory: function (require) {
      var module = { exports: {} }
      var exports = module.exports
      Object.defineProperty(exports, Symbol.toStringTag, { value: 'Module' })
      var React = require('react')
      var h = React.createElement

      var PREFIX = 'dsh-session-mail:'
      var NS = 'sessionMail'
      var CHANNEL = '/dsh-session-mail'
      var CARD_ATTR = 'data-dsh-session-mail-card'

      var en = {
        'view.mail': 'Agent mail',
        'card.from': 'From agent session',
        'card.open': 'Open sender session {title}',
        'card.hop': 'hop {hop}',
        'card.queue': 'queue',
        'card.steer': 'steer',
        'card.aria': 'Agent mail from {title}',
        'card.exact': 'Exact text the model received',
        'view.title': 'Agent mail of this session',
        'view.empty': 'No agent mail to or from this session yet.',
        'view.in': 'in',
        'view.out': 'out',
        'view.from': 'from',
        'view.to': 'to',
        'view.col.dir': 'Direction',
        'view.col.peer': 'Peer',
        'view.col.time': 'Time',
        'view.col.mode': 'Mode',
        'view.col.hop': 'Hop',
        'view.col.outcome': 'Outcome',
        'view.col.fate': 'Fate',
        'view.unavailable': 'The agent mail routes are not available on this host.',
        'view.more': 'Showing the newest {n} lines.',
        'policy.legend': 'Inbound agent mail for this session',
        'policy.accept': 'Accept',
        'policy.hold': 'Hold for me',
        'policy.refuse': 'Refuse',
        'policy.stopAll': 'Stop all agent mail on this home',
        'policy.stopped': 'All agent mail is stopped: every send is refused until you switch this off.',
        'policy.unverified': 'The policy file could not be verified ({why}); every message is held until you save the policy again.',
        'held.title': 'Held for you',
        'held.none': 'Nothing is waiting for your decision.',
        'held.approve': 'Approve',
        'held.reject': 'Reject',
        'held.from': 'from {peer}',
        'fate.landed': 'landed',
        'fate.queued': 'queued',
        'fate.waiting': 'waiting in a mailbox',
        'fate.held': 'held',
        'fate.approved': 'approved',
        'fate.rejected': 'rejected',
        'fate.expired': 'expired',
        'fate.refused': 'refused',
        'fate.canceled': 'canceled',
        'fate.lost': 'lost with its process, re-delivery pending',
        'fate.removed': 'removed from the queue',
        'fate.unknown': 'unknown',
        'trigger.section': 'Mail a session (puts its id in the message)',
        'trigger.running': 'running',
        'trigger.idle': 'idle',
        'trigger.waiting': 'waiting for you',
      }
      var zh = {
        'view.mail': 'Agent 邮件',
        'card.from': '来自 Agent 会话',
        'card.open': '打开发送方会话 {title}',
        'card.hop': '第 {hop} 跳',
        'card.queue': '排队',
        'card.steer': '插话',
        'card.aria': '来自 {title} 的 Agent 邮件',
        'card.exact': '模型收到的原文',
        'view.title': '本会话的 Agent 邮件',
        'view.empty': '本会话还没有收发过 Agent 邮件。',
        'view.in': '收',
        'view.out': '发',
        'view.from': '来自',
        'view.to': '发往',
        'view.col.dir': '方向',
        'view.col.peer': '对方',
        'view.col.time': '时间',
        'view.col.mode': '方式',
        'view.col.hop': '跳数',
        'view.col.outcome': '结果',
        'view.col.fate': '去向',
        'view.unavailable': '此宿主上没有 Agent 邮件的路由。',
        'view.more': '只显示最新的 {n} 条。',
        'policy.legend': '本会话接收 Agent 邮件的方式',
        'policy.accept': '接收',
        'policy.hold': '先给我看',
        'policy.refuse': '拒收',
        'policy.stopAll': '停止本机所有 Agent 邮件',
        'policy.stopped': '所有 Agent 邮件已停止：关掉此开关之前，每次发送都会被拒绝。',
        'policy.unverified': '策略文件无法验证（{why}）；重新保存策略之前，每条消息都会先扣下。',
        'held.title': '等你决定',
        'held.none': '没有等你决定的消息。',
        'held.approve': '放行',
        'held.reject': '拒绝',
        'held.from': '来自 {peer}',
        'fate.landed': '已送达',
        'fate.queued': '排队中',
        'fate.waiting': '在邮箱中等待',
        'fate.held': '已扣下',
        'fate.approved': '已放行',
        'fate.rejected': '已拒绝',
        'fate.expired': '已过期',
        'fate.refused': '被拒收',
        'fate.canceled': '已取消',
        'fate.lost': '随进程丢失，待重投',
        'fate.removed': '已移出队列',
        'fate.unknown': '未知',
        'trigger.section': '给会话发消息（把它的 id 放进消息）',
        'trigger.running': '运行中',
        'trigger.idle': '空闲',
        'trigger.waiting': '等你回复',
      }

      function format(template, params) {
        return String(template).replace(/\{(\w+)\}/g, function (m, k) { return params && k in params ? String(params[k]) : m })
      }

      /** Is this message one our plugin delivered? (seed 003: `data.source.rpcId` starts with the prefix, rc.8 and 0.1.2+ alike.) */
      function isAgentMail(source) {
        return source !== null && typeof source === 'object' && source.kind === 'user' &&
          typeof source.rpcId === 'string' && source.rpcId.indexOf(PREFIX) === 0
      }

      function textOf(content) {
        if (!Array.isArray(content)) return ''
        var out = []
        for (var i = 0; i < content.length; i++) {
          var b = content[i]
          if (b && b.type === 'text' && typeof b.text === 'string') out.push(b.text)
        }
        return out.join('\n')
      }

      /** The sender as the body's own header names it (seed 003 `From <id> ：`, seed 000 `from-session:`): display only. */
      function senderFromText(text) {
        var m = /^From (session-[A-Za-z0-9_.-]+)/.exec(text) || /(?:^|\n)from-session: (session-[A-Za-z0-9_.-]+)/.exec(text)
        return m ? m[1] : null
      }

      /**
       * The message inside its header or frame (seed 003 `From <id> ：` line; seed 000 frame between
       * `--- message begins ---` and `--- message ends ---`), for the card's body. The exact delivered text
       * stays one click away (what the model received is never rewritten, only shown).
       */
      function bodyOf(text) {
        var m = /^From session-[A-Za-z0-9_.-]+ ：\n/.exec(text)
        if (m) return text.slice(m[0].length)
        var begin = text.indexOf('--- message begins ---\n')
        var end = text.lastIndexOf('\n--- message ends ---')
        if (begin >= 0 && end > begin) return text.slice(begin + '--- message begins ---\n'.length, end)
        return text
      }

      /** One POST to the plugin's host route: `{ok, value}` or `{ok:false, error}`; never throws. */
      function call(endpoint, payload) {
        var rpcId = 'dsm-' + Math.random().toString(36).slice(2) + Date.now().toString(36)
        return fetch(CHANNEL + '/' + endpoint, {
          method: 'POST',
          credentials: 'same-origin',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ type: 'client-request', rpcId: rpcId, method: endpoint, payload: payload || {} }),
        }).then(function (r) {
          if (!r.ok) return { ok: false, error: { code: 'http-' + r.status, message: 'HTTP ' + r.status } }
          return r.json().then(function (b) { return b && b.result ? b.result : { ok: false, error: { code: 'bad-response', message: 'no result' } } })
        }).catch(function (e) { return { ok: false, error: { code: 'unreachable', message: String(e && e.message || e) } } })
      }

      var STYLE = [
        '[' + CARD_ATTR + ']{border:1px solid var(--dsm-accent,#7c6cf0);border-left-width:4px;border-radius:10px;padding:8px 12px;margin:4px 0;background:var(--dsm-bg,rgba(124,108,240,.06));max-width:100%;}',
        '.dsm-card-head{display:flex;flex-wrap:wrap;align-items:center;gap:6px;font-size:12px;color:var(--dsm-muted,#6b6b80);margin-bottom:6px;}',
        '.dsm-peer{font:inherit;font-weight:600;color:var(--dsm-accent-strong,#5b4bd6);background:none;border:0;padding:0 2px;cursor:pointer;text-decoration:underline;text-underline-offset:2px;border-radius:4px;}',
        '.dsm-peer:focus-visible,.dsm-btn:focus-visible,.dsm-choice input:focus-visible+span{outline:2px solid var(--dsm-accent-strong,#5b4bd6);outline-offset:2px;}',
        '.dsm-id{font-family:ui-monospace,monospace;font-size:11px;opacity:.8;}',
        '.dsm-chip{display:inline-block;border:1px solid currentColor;border-radius:999px;padding:0 6px;font-size:11px;line-height:16px;}',
        '.dsm-body{white-space:pre-wrap;word-break:break-word;font-size:14px;line-height:1.5;}',
        '.dsm-exact{margin-top:6px;font-size:12px;color:var(--dsm-muted,#6b6b80);}',
        '.dsm-exact pre{white-space:pre-wrap;word-break:break-word;margin:4px 0 0;font-size:12px;}',
        '.dsm-view{padding:16px 20px;font-size:13px;overflow:auto;}',
        '.dsm-view h2{font-size:15px;margin:0 0 10px;}',
        '.dsm-view h3{font-size:13px;margin:14px 0 6px;}',
        '.dsm-policy{display:flex;flex-wrap:wrap;gap:14px;align-items:center;border:0;padding:0;margin:0 0 8px;}',
        '.dsm-policy legend{font-weight:600;margin-bottom:6px;padding:0;}',
        '.dsm-choice{display:inline-flex;gap:4px;align-items:center;cursor:pointer;}',
        '.dsm-stop{display:flex;gap:6px;align-items:center;margin:6px 0;}',
        '.dsm-alert{border-radius:8px;padding:6px 10px;margin:6px 0;background:rgba(220,60,60,.1);color:#b42318;}',
        '.dsm-table{border-collapse:collapse;width:100%;}',
        '.dsm-table th,.dsm-table td{text-align:left;padding:4px 8px;border-bottom:1px solid var(--dsm-line,rgba(127,127,127,.25));vertical-align:top;}',
        '.dsm-table th{font-weight:600;font-size:12px;color:var(--dsm-muted,#6b6b80);}',
        '.dsm-held{border:1px dashed var(--dsm-accent,#7c6cf0);border-radius:8px;padding:8px;margin:6px 0;}',
        '.dsm-held pre{white-space:pre-wrap;margin:6px 0;font-size:12px;max-height:160px;overflow:auto;}',
        '.dsm-btn{font:inherit;border:1px solid var(--dsm-line,rgba(127,127,127,.5));border-radius:6px;padding:2px 10px;margin-right:6px;background:transparent;cursor:pointer;color:inherit;}',
        '.dsm-fate-landed{color:#067647;}.dsm-fate-held,.dsm-fate-waiting,.dsm-fate-queued,.dsm-fate-approved,.dsm-fate-lost{color:#b54708;}.dsm-fate-rejected,.dsm-fate-expired,.dsm-fate-refused,.dsm-fate-removed{color:#b42318;}',
      ].join('\n')

      function injectStyle() {
        if (typeof document === 'undefined' || document.querySelector('style[data-plugin="dsh-session-mail"]')) return function () {}
        var el = document.createElement('style')
        el.setAttribute('data-plugin', 'dsh-session-mail')
        el.textContent = STYLE
        document.head.appendChild(el)
        return function () { el.remove() }
      }

      // ------------------------------------------------------------------------------------------ facts

      /** Card facts per request id, fetched once from the ledger through the route (retried while unknown). */
      function createCardFacts() {
        var facts = new Map()
        var listeners = new Map()
        var inflight = new Set()
        function notify(id) {
          var set = listeners.get(id)
          if (set) set.forEach(function (fn) { try { fn() } catch (e) { /* a listener's own problem */ } })
        }
        function load(id, attempt) {
          if (inflight.has(id)) return
          inflight.add(id)
          call('card', { requestId: id }).then(function (r) {
            inflight.delete(id)
            if (r && r.ok && r.value) {
              facts.set(id, r.value)
              notify(id)
              // the sender's ledger line is written after the outcome is known: ask again a few times
              if (!r.value.sender && attempt < 5) setTimeout(function () { load(id, attempt + 1) }, 800 * (attempt + 1))
            } else {
              facts.set(id, { unavailable: true })
              notify(id)
            }
          })
        }
        return {
          get: function (id) { return facts.get(id) },
          subscribe: function (id, fn) {
            var set = listeners.get(id)
            if (!set) { set = new Set(); listeners.set(id, set) }
            set.add(fn)
            if (!facts.has(id)) load(id, 0)
            return function () { set.delete(fn) }
          },
        }
      }

      function sessionRow(ctx, id) {
        try { return ctx.sessions.list.getSnapshot().byId[id] } catch (e) { return undefined }
      }
      function titleOf(row, fallback) {
        return String((row && (row.displayTitle || row.title)) || fallback || '')
      }
      function shortId(id) {
        var s = String(id || '')
        return s.length > 22 ? s.slice(0, 16) + '…' + s.slice(-4) : s
      }
      function openSession(ctx, id) {
        try { if (id && ctx.sessions && typeof ctx.sessions.open === 'function') ctx.sessions.open(id) } catch (e) { /* the list moved on */ }
      }

      // ------------------------------------------------------------------------------------------ card

      function useFacts(store, id) {
        var pair = React.useState(0)
        var bump = pair[1]
        React.useEffect(function () {
          return store.subscribe(id, function () { bump(function (n) { return n + 1 }) })
        }, [id])
        return store.get(id)
      }

      function useSessionList(ctx) {
        var pair = React.useState(0)
        var bump = pair[1]
        React.useEffect(function () {
          try { return ctx.sessions.list.subscribe(function () { bump(function (n) { return n + 1 }) }) } catch (e) { return undefined }
        }, [])
      }

      function makeAgentCard(ctx, store, t) {
        return function AgentMailCard(props) {
          var data = props.node && props.node.data ? props.node.data : {}
          var requestId = data.source.rpcId
          var text = textOf(data.content)
          var facts = useFacts(store, requestId) || {}
          useSessionList(ctx)
          var sender = facts.sender || senderFromText(text)
          var title = titleOf(sessionRow(ctx, sender), facts.senderTitle || sender || '?')
          var mode = facts.mode || (props.node.kind === 'steering' ? 'steer' : 'queue')
          var hop = facts.hop
          var head = [
            h('span', { key: 'f', className: 'dsm-from' }, t('card.from')),
            sender
              ? h('button', {
                key: 'p', type: 'button', className: 'dsm-peer', 'data-dsh-session-mail-open': sender,
                title: t('card.open', { title: title }), 'aria-label': t('card.open', { title: title }),
                onClick: function (e) { e.preventDefault(); openSession(ctx, sender) },
              }, title)
              : h('span', { key: 'p', className: 'dsm-peer' }, title),
            sender ? h('code', { key: 'i', className: 'dsm-id', title: sender }, shortId(sender)) : null,
            h('span', { key: 'm', className: 'dsm-chip', 'data-mode': mode }, t(mode === 'steer' ? 'card.steer' : 'card.queue')),
            typeof hop === 'number' ? h('span', { key: 'h', className: 'dsm-chip', 'data-hop': hop }, t('card.hop', { hop: hop })) : null,
          ]
          var attrs = { role: 'article', 'aria-label': t('card.aria', { title: title }), 'data-request-id': requestId }
          attrs[CARD_ATTR] = ''
          var body = bodyOf(text)
          return h('div', attrs,
            h('div', { className: 'dsm-card-head' }, head),
            h('div', { className: 'dsm-body' }, body),
            body !== text ? h('details', { className: 'dsm-exact' }, h('summary', null, t('card.exact')), h('pre', null, text)) : null)
        }
      }

      // ------------------------------------------------------------------------------------------ view

      var POLL_MS = 2000

      function makeMailView(ctx, t) {
        return function MailView(props) {
          var sessionId = props.sessionId || (props.session && props.session.sessionId) || (typeof props.useSession === 'function' ? undefined : undefined)
          var st = React.useState(null)
          var state = st[0]
          var setState = st[1]
          var busy = React.useState(false)
          useSessionList(ctx)
          var refresh = React.useCallback(function () {
            if (!sessionId) return Promise.resolve()
            return call('view', { sessionId: sessionId, limit: 100 }).then(function (r) { setState(r) })
          }, [sessionId])
          React.useEffect(function () {
            var stopped = false
            var timer
            function tick() {
              if (stopped) return
              var p = (typeof document !== 'undefined' && document.hidden) ? Promise.resolve() : refresh()
              p.then(function () { if (!stopped) timer = setTimeout(tick, POLL_MS) })
            }
            tick()
            return function () { stopped = true; clearTimeout(timer) }
          }, [refresh])
          function act(endpoint, payload) {
            busy[1](true)
            return call(endpoint, payload).then(function (r) { busy[1](false); if (!r.ok) setState(function (s) { return Object.assign({}, s, { actionError: r.error }) }); return refresh() })
          }
          if (state === null) return h('div', { className: 'dsm-view', 'data-dsh-session-mail-view': 'loading' })
          if (!state.ok) return h('div', { className: 'dsm-view', 'data-dsh-session-mail-view': 'unavailable' }, t('view.unavailable'))
          var v = state.value
          var peerButton = function (id, fallback) {
            var title = titleOf(sessionRow(ctx, id), fallback || id)
            return h('button', { type: 'button', className: 'dsm-peer', 'data-dsh-session-mail-open': id, title: id, onClick: function () { openSession(ctx, id) } }, title)
          }
          var mode = v.policy.inbound
          var radios = ['accept', 'hold', 'refuse'].map(function (m) {
            return h('label', { key: m, className: 'dsm-choice' },
              h('input', {
                type: 'radio', name: 'dsm-inbound-' + sessionId, value: m, checked: mode === m, disabled: busy[0],
                'data-dsh-session-mail-policy': m,
                onChange: function () { act('policy.set', { sessionId: sessionId, inbound: m }) },
              }),
              h('span', null, t('policy.' + m)))
          })
          var held = (v.held || []).filter(function (x) { return x.state === 'held' })
          return h('div', { className: 'dsm-view', 'data-dsh-session-mail-view': 'ready' },
            h('h2', null, t('view.title')),
            h('fieldset', { className: 'dsm-policy' }, h('legend', null, t('policy.legend')), radios),
            h('label', { className: 'dsm-stop' },
              h('input', {
                type: 'checkbox', role: 'switch', checked: !!v.policy.stopAll, 'aria-checked': !!v.policy.stopAll, disabled: busy[0],
                'data-dsh-session-mail-stop-all': '',
                onChange: function (e) { act('policy.set', { stopAll: e.target.checked }) },
              }),
              h('span', null, t('policy.stopAll'))),
            v.policy.stopAll ? h('div', { className: 'dsm-alert', role: 'status' }, t('policy.stopped')) : null,
            v.policy.unverified ? h('div', { className: 'dsm-alert', role: 'alert' }, t('policy.unverified', { why: v.policy.unverified })) : null,
            state.actionError ? h('div', { className: 'dsm-alert', role: 'alert' }, state.actionError.message) : null,
            h('h3', null, t('held.title')),
            held.length === 0
              ? h('p', { 'data-dsh-session-mail-held': 'none' }, t('held.none'))
              : held.map(function (x) {
                return h('div', { key: x.requestId, className: 'dsm-held', 'data-dsh-session-mail-held': x.requestId },
                  h('div', null, t('held.from', { peer: '' }), x.sender ? peerButton(x.sender, x.senderTitle) : '?', ' · ', new Date(x.postedAt).toLocaleString(), ' · ', x.mode),
                  h('pre', null, x.text),
                  h('button', { type: 'button', className: 'dsm-btn', disabled: busy[0], 'data-dsh-session-mail-approve': x.requestId, onClick: function () { act('held.decide', { sessionId: sessionId, requestId: x.requestId, decision: 'approve' }) } }, t('held.approve')),
                  h('button', { type: 'button', className: 'dsm-btn', disabled: busy[0], 'data-dsh-session-mail-reject': x.requestId, onClick: function () { act('held.decide', { sessionId: sessionId, requestId: x.requestId, decision: 'reject' }) } }, t('held.reject')))
              }),
            h('h3', null, t('view.mail')),
            v.rows.length === 0
              ? h('p', null, t('view.empty'))
              : h('table', { className: 'dsm-table' },
                h('thead', null, h('tr', null, ['dir', 'peer', 'time', 'mode', 'hop', 'outcome', 'fate'].map(function (c) { return h('th', { key: c, scope: 'col' }, t('view.col.' + c)) }))),
                h('tbody', null, v.rows.map(function (r) {
                  return h('tr', { key: r.requestId + r.direction, 'data-dsh-session-mail-row': r.requestId, 'data-fate': r.fate, 'data-direction': r.direction },
                    h('td', null, t(r.direction === 'in' ? 'view.in' : 'view.out')),
                    h('td', null, r.peer ? peerButton(r.peer, r.peerTitle) : '—'),
                    h('td', null, h('time', { dateTime: new Date(r.timeMs).toISOString() }, new Date(r.timeMs).toLocaleString())),
                    h('td', null, r.mode || '—'),
                    h('td', null, typeof r.hop === 'number' ? String(r.hop) : '—'),
                    h('td', null, r.outcome),
                    h('td', { className: 'dsm-fate-' + r.fate, title: r.fateText }, t('fate.' + r.fate)))
                }))),
            v.truncated ? h('p', null, t('view.more', { n: v.rows.length })) : null)
        }
      }

      // ------------------------------------------------------------------------------------------ @ trigger

      function makeTriggerSource(ctx, t) {
        function rows(self) {
          var snap
          try { snap = ctx.sessions.list.getSnapshot() } catch (e) { return [] }
          var out = []
          for (var i = 0; i < snap.ids.length; i++) {
            var r = snap.byId[snap.ids[i]]
            if (!r || r.blank || r.origin === 'subagent' || r.parentId || r.id === self) continue
            out.push(r)
          }
          return out
        }
        function status(r) {
          if (r.pendingInteraction) return t('trigger.waiting')
          return r.running ? t('trigger.running') : t('trigger.idle')
        }
        return {
          trigger: '@',
          name: 'dsh-session-mail',
          order: 5,
          showGroupTitle: false,
          candidates: function (session, request) {
            var q = String((request && request.query) || '').toLowerCase()
            var self = session && session.sessionId
            return Promise.resolve(rows(self)
              .filter(function (r) { return q === '' || titleOf(r).toLowerCase().indexOf(q) >= 0 || String(r.id).toLowerCase().indexOf(q) >= 0 })
              .sort(function (a, b) { return (b.running ? 1 : 0) - (a.running ? 1 : 0) || (b.updatedAt || 0) - (a.updatedAt || 0) })
              .slice(0, 20)
              .map(function (r) {
                return {
                  name: '@' + titleOf(r, r.id),
                  description: status(r) + ' · ' + r.id,
                  section: t('trigger.section'),
                  value: JSON.stringify({ id: r.id, title: titleOf(r, r.id) }),
                }
              }))
          },
          onPick: function (p) {
            var v
            try { v = JSON.parse(p.candidate.value) } catch (e) { return undefined }
            if (!v || typeof v.id !== 'string') return undefined
            return { insert: { source: 'dsh-session-mail', ref: v.id, label: '@' + v.title, appearance: 'session', clipboardText: sessionMention(v.id, v.title) } }
          },
          codec: {
            clipboardText: function (ref) { return sessionMention(ref, titleOf(sessionRow(ctx, ref), ref)) },
            serialize: function (ref) { return Promise.resolve(sessionMention(ref, titleOf(sessionRow(ctx, ref), ref))) },
          },
        }
      }

      /** What the agent reads for a picked session: its id, which the send tools take (seed 000 `session_id`). */
      function sessionMention(id, title) {
        return title && title !== id ? '@' + title + ' (session ' + id + ')' : '@session ' + id
      }

      // ------------------------------------------------------------------------------------------ apply

      var inject = ['slots', 'sessions', 'locale', 'inputTriggers']

      function guarded(label, fn) {
        try { return fn() } catch (e) {
          try { console.warn('dsh-session-mail client: ' + label + ' skipped:', e) } catch (e2) { /* no console */ }
          return undefined
        }
      }

      function apply(ctx) {
        guarded('style', function () { ctx.effect(function () { return injectStyle() }, 'dsh-session-mail: style') })
        guarded('locale', function () { ctx.effect(function () { return ctx.locale.register(NS, { zh: zh, en: en }) }, 'dsh-session-mail: dictionaries') })
        var bound = guarded('locale.bind', function () { return ctx.locale.bind(NS) })
        var t = function (key, params) {
          var s = bound ? guarded('t', function () { return bound(key, params) }) : undefined
          return typeof s === 'string' && s !== key ? s : format(en[key] || key, params)
        }
        var store = createCardFacts()
        var Card = makeAgentCard(ctx, store, t)
        ;['user', 'steering'].forEach(function (key) {
          guarded('card ' + key, function () {
            var own
            function builtin() {
              var list = typeof ctx.slots.entries === 'function' ? ctx.slots.entries('conversation.chat.node') : []
              for (var i = 0; i < list.length; i++) {
                var e = list[i]
                if (e && e.component !== own && e.options && e.options.key === key) return e.component
              }
              return null
            }
            own = function DshSessionMailMessage(props) {
              var data = props && props.node ? props.node.data : null
              if (data && isAgentMail(data.source)) return h(Card, props)
              var B = builtin()
              return B ? h(B, props) : null
            }
            ctx.slots.inject('conversation.chat.node', function () {
              return ctx.slots.register({ name: 'conversation.chat.node', key: key, priority: -1, locale: 'conversation' }, own)
            })
          })
        })
        guarded('view', function () {
          var View = makeMailView(ctx, t)
          ctx.slots.inject('conversation.view', function () {
            return ctx.slots.register({
              name: 'conversation.view',
              id: 'dsh-session-mail',
              order: 20,
              label: function () { return t('view.mail') },
              inject: function (sessionId) { return { sessionId: sessionId } },
            }, View)
          })
        })
        guarded('trigger', function () {
          var triggers = ctx.inputTriggers || (typeof ctx.get === 'function' ? ctx.get('inputTriggers') : undefined)
          if (!triggers || typeof triggers.registerSource !== 'function') return
          var source = makeTriggerSource(ctx, t)
          ctx.effect(function () { return triggers.registerSource(source) }, 'dsh-session-mail: @ source')
        })
      }

      exports.name = 'dsh-session-mail-client'
      exports.inject = inject
      exports.apply = apply
      // for the unit tests (test/client.test.mjs): the pure parts
      exports.internals = { isAgentMail: isAgentMail, senderFromText: senderFromText, bodyOf: bodyOf, textOf: textOf, sessionMention: sessionMention, en: en, zh: zh }
      return module.exports
    },
  })
})()
