#!/usr/bin/env node
// The demo behind the README's first command (`bash scripts/demo.sh`): the built plugin, installed by
// its own scripts/install.mjs into a fresh web profile of the real DSH 0.1.0-rc.8 host, with a scripted
// local fake LLM (no API key, nothing leaves 127.0.0.1). Two sessions, A and B:
//   1. A's model calls sessions_list and sessions_read;
//   2. A's model calls send_session_message to B; B's next turn sees `From <A> ：`;
//   3. B's model answers with the same tool; A receives the reply.
// Prints each tool result as the model saw it. KEEP_TMP=1 keeps the temp DSH_HOME.
import {
  REPO_ROOT, makeSandbox, initProfile, packAndInstall, bootWeb, callTool, userTexts, turnEndCount,
} from '../test/real-host/harness.mjs'

const show = (title, text) => console.log(`\n=== ${title}\n${text}`)
const box = await makeSandbox({ keep: process.env.KEEP_TMP === '1' })
let web
try {
  const pdir = initProfile(box, 'web')
  const installed = packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
  show('install (node scripts/install.mjs --profile <DSH_HOME>/profiles/web)', installed.stdout?.trim() ?? '')
  web = await bootWeb(box)
  console.log(`\nDSH ${web.base} is up (DSH_HOME=${box.home})`)
  const A = await web.createSession(box.mkdir('project-a'))
  const B = await web.createSession(box.mkdir('project-b'))
  await callTool(web, B, 'sessions_list', {}) // gives B a first turn (and a title)

  show(`A calls sessions_list`, (await callTool(web, A, 'sessions_list', { scope: 'all' })).text)
  show(`A calls sessions_read ${B}`, (await callTool(web, A, 'sessions_read', { session_id: B, max_messages: 5 })).text)

  const before = turnEndCount(await web.history(A))
  const body = `Please confirm you got this.\n@@call send_session_message {"toSessionId":"${A}","message":"got it, B here"}`
  show(`A calls send_session_message to B`, (await callTool(web, A, 'send_session_message', { toSessionId: B, message: body })).text)
  const evB = await web.waitFor(B, ev => userTexts(ev).some(u => u.text.startsWith(`From ${A} ：`)) && turnEndCount(ev) >= 2, { timeout: 20_000 })
  show(`what B's next turn received`, userTexts(evB).filter(u => u.text.startsWith('From ')).at(-1).text)
  const evA = await web.waitFor(A, ev => turnEndCount(ev) > before && userTexts(ev).some(u => u.text.startsWith(`From ${B} ：`)), { timeout: 20_000 })
  show(`the reply that reached A`, userTexts(evA).filter(u => u.text.startsWith(`From ${B}`)).at(-1).text)
  console.log('\ndemo: ok')
} finally {
  await web?.stop()
  box.cleanup?.()
}
