#!/usr/bin/env node
// The demo's second part (`bash scripts/demo.sh` runs it after scripts/demo.mjs): across machines (issue 31).
// Two DSH homes on this machine stand for two machines, each with the real DSH 0.1.0-rc.8 `dsh web`, the plugin
// installed by its own scripts/install.mjs and a scripted local fake LLM. The human links them once through the
// command line — on loopback, relay none (DSH_SESSION_MAIL_LINK_BIND=127.0.0.1:0: no packet leaves 127.0.0.1) —
// then on home A:
//   1. A's model calls sessions_list: home B's session is listed with its machine's name;
//   2. A's model calls send_session_message to B's session; home B verifies the sending machine and B's next turn
//      sees `From <A> ：`;
//   3. B's model answers with the same tool; the reply goes back across the link to A.
// Prints each tool result as the model saw it. KEEP_TMP=1 keeps the temp DSH_HOMEs.
import {
  REPO_ROOT, makeSandbox, initProfile, packAndInstall, bootWeb, callTool, userTexts, turnEndCount, isIdle, sleep,
  messageText, startCli, leaseHeldByHost,
} from '../test/real-host/harness.mjs'

const ENV = { DSH_SESSION_MAIL_LINK_BIND: '127.0.0.1:0' }
// no demo may send a packet to a public relay: the core refuses that choice here and in every process started
process.env.DSH_SESSION_MAIL_NO_PUBLIC_NETWORK = '1'
const show = (title, text) => console.log(`\n=== ${title}\n${text}`)

const cli = (box, args) => startCli(box, args, ENV)

async function run(box, args) {
  const r = await cli(box, args).done
  if (r.code !== 0) throw new Error(`dsh-session-mail ${args.join(' ')}: exit ${r.code}\n${r.stdout}${r.stderr}`)
  return r
}

const keep = process.env.KEEP_TMP === '1'
const boxA = await makeSandbox({ keep, env: ENV })
const boxB = await makeSandbox({ keep, env: ENV })
try {
  for (const [name, box] of [['A', boxA], ['B', boxB]]) {
    const installed = packAndInstall(initProfile(box, 'web'), REPO_ROOT, { mode: 'script' })
    show(`home ${name}: install (node scripts/install.mjs --profile <DSH_HOME>/profiles/web)`, name === 'A' ? installed.stdout?.trim() ?? '' : '(the same)')
  }
  const [webA, webB] = await Promise.all([bootWeb(boxA), bootWeb(boxB)])
  console.log(`\nhome A: DSH ${webA.base} (DSH_HOME=${boxA.home})\nhome B: DSH ${webB.base} (DSH_HOME=${boxB.home})`)
  const A = await webA.createSession(boxA.mkdir('project-a'))
  const B = await webB.createSession(boxB.mkdir('project-b'))
  // a first turn each (and a title)
  await Promise.all([[webA, A], [webB, B]].map(async ([web, id]) => {
    await web.prompt(id, 'hello')
    await web.waitFor(id, ev => turnEndCount(ev) >= 1 && isIdle(ev))
  }))

  // the human links the two homes once: an invite on A (the command holds A's endpoint until it is used) …
  const inviting = cli(boxA, ['link', '--relay', 'none', '--ttl-minutes', '5'])
  let invite
  for (const t0 = Date.now(); !invite; await sleep(50)) {
    invite = inviting.out().split('\n')[0].match(/^dshm1\S+/)?.[0]
    if (!invite && Date.now() - t0 > 30_000) throw new Error('no invite')
  }
  show('home A: dsh-session-mail link --relay none --ttl-minutes 5', `${invite.slice(0, 40)}… (${invite.length} characters, works once)`)
  // … used on B, which names A "home-a"
  show('home B: dsh-session-mail link <invite> --name home-a', (await run(boxB, ['link', invite, '--name', 'home-a'])).stdout.trim())
  const invited = await inviting.done
  if (invited.code !== 0) throw new Error(`link on A: exit ${invited.code}\n${invited.stderr}`)
  // A's name for B is the one B suggested (this host's name, the same for both homes here): call it home-b
  const asA = JSON.parse((await run(boxA, ['links', '--no-probe', '--json'])).stdout)
  await run(boxA, ['machines', 'rename', asA.links[0].name, 'home-b'])
  // each dsh web takes its home's endpoint (the lease) within seconds of the command's exit
  await Promise.all([leaseHeldByHost(boxA.home), leaseHeldByHost(boxB.home)])
  show('home A: dsh-session-mail links', (await run(boxA, ['links'])).stdout.trim())

  show('A calls sessions_list', (await callTool(webA, A, 'sessions_list', {})).text)

  const beforeA = turnEndCount(await webA.history(A))
  const body = `Please confirm you got this across the link.\n@@call send_session_message {"toSessionId":"${A}","message":"got it, B here on home-b"}`
  show(`A calls send_session_message to ${B} (on home-b)`, (await callTool(webA, A, 'send_session_message', { toSessionId: B, message: body })).text)
  const evB = await webB.waitFor(B, ev => userTexts(ev).some(u => u.text.startsWith(`From ${A} ：`)) && turnEndCount(ev) >= 2 && isIdle(ev), { timeout: 30_000 })
  show(`what B's next turn received (home B)`, userTexts(evB).filter(u => u.text.startsWith('From ')).at(-1).text)
  const replyCall = evB.filter(e => e.type === 'tool/call' && e.data?.name === 'send_session_message').at(-1)
  const replyResult = evB.find(e => e.type === 'tool/result' && e.data?.message?.source?.callId === replyCall?.data?.callId)
  const block = replyResult?.data?.message?.content?.find(b => b.type === 'tool-result')
  show(`B's model answered with send_session_message (home B's result)`, messageText(block))
  const evA = await webA.waitFor(A, ev => turnEndCount(ev) > beforeA && userTexts(ev).some(u => u.text.startsWith(`From ${B} ：`)), { timeout: 30_000 })
  show('the reply that reached A (home A)', userTexts(evA).filter(u => u.text.startsWith(`From ${B}`)).at(-1).text)
  console.log('\ndemo across machines: ok')
} finally {
  await boxA.cleanup()
  await boxB.cleanup()
}
