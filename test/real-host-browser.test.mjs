// The human's side of agent mail (issue 17) in a real browser against the real host: headless Chromium
// (Debian's `chromium`, test/real-host/browser.mjs installs it when missing) driven by playwright-core,
// against the npm-installed rc.8 `dsh web` with this package installed by scripts/install.mjs and the
// scripted fake LLM. Screenshots go to $SCREENSHOT_DIR (default: <sandbox>/shots, printed).
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-browser.test.mjs
//
// What the real host decides here (rc.8 source paths):
// - our bundle loads as a `dsh.client` row of the host graph (packages/client/modules/src/index.ts);
// - a message whose source.rpcId starts with `dsh-session-mail:` renders through our shadowing
//   `conversation.chat.node` renderer (packages/client/ui-slots/src/index.ts "Shadowing"), a typed one
//   through ui-conversation's own (packages/client/ui-conversation/src/client/chat/register-node-renderers.ts);
// - the mail tab is a `conversation.view` entry (the ui-trajectory pattern);
// - the routes sit behind the host's fence (packages/client/connection/src/rpc-host.ts).
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, packAndInstall, bootWeb, initProfile, callTool, readSessionLog, findSessionLog, userTexts,
  isIdle, turnEndCount, REPO_ROOT, sleep, until, boxCli,
} from './real-host/harness.mjs'
import { launchBrowser, chromiumVersion } from './real-host/browser.mjs'

const TITLE_A = 'Planner A'
const TITLE_B = 'Builder B'

function requestIdOf(text) {
  const id = /request: (dsh-session-mail:[0-9a-f-]{36})/.exec(text)?.[1]
  assert.ok(id, `a request id in:\n${text}`)
  return id
}

/** User messages of B's log (the file: what the host wrote) that carry `rpcId`. */
function landed(home, id, rpcId) {
  const file = findSessionLog(home, id)
  if (!file) return 0
  return userTexts(readSessionLog(file)).filter(u => u.source?.rpcId === rpcId).length
}

const cli = boxCli

describe('the web client half in headless Chromium against rc.8 dsh web', () => {
  let box, web, browser, page, A, B, shots
  let noticeSeen = false

  async function send(text, mode = 'queue') {
    const r = await callTool(web, A, 'send_session_message', { toSessionId: B, message: text, ...(mode === 'steer' ? { urgent: true } : {}) })
    return r.text
  }

  async function openSession(title) {
    // rc.8's first-run notice, then the sidebar's "Ungrouped" folder (sessions made over the API have no
    // workspace group) holds the session rows
    const folder = page.getByText('Ungrouped').first()
    await folder.waitFor({ timeout: 30_000 })
    const notice = page.getByRole('button', { name: 'Continue' })
    if (!noticeSeen) {
      // it opens shortly after the page (the background turns inert): wait for it once
      await notice.first().click({ timeout: 8000 }).catch(() => {})
      noticeSeen = true
    }
    const item = page.getByText(title, { exact: true }).first()
    if (!(await item.isVisible())) await folder.click()
    await item.click()
  }

  async function openMailTab() {
    const tab = page.getByRole('tab', { name: 'Agent mail' })
    if (await tab.count()) await tab.first().click()
    else await page.getByText('Agent mail', { exact: true }).first().click()
    await page.locator('[data-dsh-session-mail-view="ready"]').waitFor({ timeout: 20_000 })
  }

  async function openChat() {
    const tab = page.getByRole('tab', { name: /^(Chat|对话)$/ })
    if (await tab.count()) await tab.first().click()
  }

  before(async () => {
    box = await makeSandbox()
    shots = process.env.SCREENSHOT_DIR || join(box.dir, 'shots')
    mkdirSync(shots, { recursive: true })
    console.log(`# screenshots in ${shots}; ${chromiumVersion()}`)
    const pdir = initProfile(box, 'web')
    packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
    web = await bootWeb(box)
    A = await web.createSession(box.ws)
    B = await web.createSession(box.mkdir('ws-b'))
    await web.prompt(A, 'hello from the human in A')
    await web.prompt(B, 'hello from the human in B')
    await web.waitFor(A, ev => turnEndCount(ev) >= 1 && isIdle(ev))
    await web.waitFor(B, ev => turnEndCount(ev) >= 1 && isIdle(ev))
    await web.rpc('session.rename', { sessionId: A, title: TITLE_A })
    await web.rpc('session.rename', { sessionId: B, title: TITLE_B })
    browser = await launchBrowser()
    page = await browser.page(web.base + '/')
  })

  after(async () => {
    await browser?.close()
    await box?.cleanup()
  })

  test('A mails B: B shows an agent card with A\'s title, id, mode and hop; the human\'s own message keeps its bubble; a click opens A', async () => {
    const receipt = await send('the API changed: /v2/items now pages by cursor')
    assert.match(receipt, /^accepted for /m, receipt)
    const rid = requestIdOf(receipt)
    await until('the delivery in B\'s log', () => landed(box.home, B, rid) === 1)

    await openSession(TITLE_B)
    const card = page.locator(`[data-dsh-session-mail-card][data-request-id="${rid}"]`)
    await card.waitFor({ timeout: 30_000 })
    await until('the card facts from the ledger', async () => /hop 1/.test(await card.innerText()))
    const text = await card.innerText()
    assert.match(text, new RegExp(TITLE_A), text)
    assert.match(text, /From agent session/)
    assert.match(text, /queue/)
    assert.match(text, /the API changed/, 'the body is shown as delivered')
    const peer = card.locator('[data-dsh-session-mail-open]')
    assert.equal(await peer.getAttribute('data-dsh-session-mail-open'), A)

    // the human-typed message in B is the host's own bubble, not a card
    const human = page.locator('[data-chat-flow-kind="user"]').filter({ hasText: 'hello from the human in B' })
    await human.first().waitFor()
    assert.equal(await human.locator('[data-dsh-session-mail-card]').count(), 0)
    assert.equal(await page.locator('[data-dsh-session-mail-card]').filter({ hasText: 'hello from the human' }).count(), 0)

    await card.scrollIntoViewIfNeeded()
    await page.screenshot({ path: join(shots, 'agent-card.png') })

    // keyboard: focus the sender and press Enter → A opens
    await peer.focus()
    await page.keyboard.press('Enter')
    await page.getByText('hello from the human in A').first().waitFor({ timeout: 20_000 })
    assert.equal(await page.locator(`[data-dsh-session-mail-card][data-request-id="${rid}"]`).count(), 0, 'A\'s view is shown now')
  })

  test('B\'s mail tab lists the message as landed, newest first; a row opens the peer', async () => {
    await openSession(TITLE_B)
    await openMailTab()
    const row = page.locator('[data-dsh-session-mail-row]').first()
    await until('a landed row', async () => (await row.getAttribute('data-fate')) === 'landed')
    assert.equal(await row.getAttribute('data-direction'), 'in')
    const text = await row.innerText()
    assert.match(text, new RegExp(TITLE_A))
    assert.match(text, /queue/)
    await page.screenshot({ path: join(shots, 'mail-tab.png') })
  })

  test('hold: A\'s send is held for the human, B\'s tab shows it pending; approve lands it once, reject never, and verify says so', async () => {
    await openSession(TITLE_B)
    await openMailTab()
    // controlled inputs: the click asks the route, the box follows the saved policy
    await page.locator('[data-dsh-session-mail-policy="hold"]').click()
    await until('the hold policy saved', async () => page.locator('[data-dsh-session-mail-policy="hold"]').isChecked())

    const r1 = await send('please review PR 12 (held 1)')
    assert.match(r1, /held for the human/i, r1)
    const rid1 = requestIdOf(r1)
    const pending = page.locator(`[data-dsh-session-mail-held="${rid1}"]`)
    await pending.waitFor({ timeout: 20_000 })
    assert.equal(landed(box.home, B, rid1), 0, 'a held message does not land')
    await page.screenshot({ path: join(shots, 'held.png') })
    assert.match(cli(box, 'verify', rid1).out, /held/)

    await pending.locator('[data-dsh-session-mail-approve]').click()
    await until('the approved message in B\'s log', () => landed(box.home, B, rid1) === 1, { timeout: 30_000 })
    await sleep(1500)
    assert.equal(landed(box.home, B, rid1), 1, 'delivered exactly once')

    const r2 = await send('drop the database (held 2)')
    const rid2 = requestIdOf(r2)
    const pending2 = page.locator(`[data-dsh-session-mail-held="${rid2}"]`)
    await pending2.waitFor({ timeout: 20_000 })
    await pending2.locator('[data-dsh-session-mail-reject]').click()
    await until('the rejection', () => /rejected/.test(cli(box, 'verify', rid2).out))
    await sleep(1500)
    assert.equal(landed(box.home, B, rid2), 0, 'a rejected message never lands')
    const row = page.locator(`[data-dsh-session-mail-row="${rid2}"]`)
    await until('the rejected row', async () => (await row.getAttribute('data-fate')) === 'rejected')
  })

  test('a held message survives a host restart and lands once after approval', async () => {
    const r = await send('held across a restart')
    const rid = requestIdOf(r)
    assert.match(r, /held for the human/i, r)
    await web.stop()
    web = await bootWeb(box)
    page = await browser.page(web.base + '/')
    await openSession(TITLE_B)
    await openMailTab()
    const pending = page.locator(`[data-dsh-session-mail-held="${rid}"]`)
    await pending.waitFor({ timeout: 30_000 })
    assert.equal(landed(box.home, B, rid), 0)
    await pending.locator('[data-dsh-session-mail-approve]').click()
    await until('the approved message in B\'s log', () => landed(box.home, B, rid) === 1, { timeout: 30_000 })
    await sleep(1500)
    assert.equal(landed(box.home, B, rid), 1)
    await page.locator('[data-dsh-session-mail-policy="accept"]').click()
    await until('accept saved', () => page.locator('[data-dsh-session-mail-policy="accept"]').isChecked())
  })

  test('stop all: every send is refused with its code until the human switches it back', async () => {
    await openSession(TITLE_B)
    await openMailTab()
    const sw = page.locator('[data-dsh-session-mail-stop-all]')
    await sw.click()
    await until('stop-all saved', () => sw.isChecked())
    const r = await send('anything while stopped')
    assert.match(r, /^refused \(stopped\)/m, r)
    assert.match(r, /stop all agent mail/i)
    const C = await web.createSession(box.mkdir('ws-c'))
    const r2 = (await callTool(web, A, 'sessions_send', { session_id: C, message: 'to another session' })).text
    assert.match(r2, /^refused \(stopped\)/m, 'every target, not only B')
    await sw.click()
    await until('stop-all off', async () => !(await sw.isChecked()))
    const r3 = await send('after the switch is off')
    assert.match(r3, /^accepted for /m, r3)
    const refusedRow = page.locator('[data-dsh-session-mail-row][data-fate="refused"]')
    await refusedRow.first().waitFor({ timeout: 20_000 })
    await page.screenshot({ path: join(shots, 'mail-tab-all.png') })
  })

  test('the page loaded our bundle without a console or page error', () => {
    const ours = browser.errors.filter(e => /dsh-session-mail/.test(e))
    assert.deepEqual(ours, [])
  })
})
