// The home-wide Agent mail page (issue 32) in a real browser against the real host: headless Chromium
// (Debian's `chromium`) driven by playwright-core, the npm-installed rc.8 `dsh web` with this package
// installed by scripts/install.mjs and the scripted fake LLM; five sessions mail each other. Screenshots go to
// $SCREENSHOT_DIR (default: <sandbox>/shots, printed).
//
//   eval "$(bash test/real-host/install-host.sh)" && $DSH_NODE --test --test-concurrency=1 test/real-host-page.test.mjs
//
// What the real host decides here (rc.8 source paths):
// - the page's entry is a `sidebar.footer.action` (packages/client/ui-sidebar/src/client/contract/slots.ts),
//   the page a `shell.overlay` entry (packages/client/ui-layout/src/client/index.ts);
// - the session list's rows are ui-workspace's (`role="treeitem"`, packages/client/ui-workspace), our badge
//   sits in them;
// - the routes sit behind the host's fence (packages/client/connection/src/rpc-host.ts).
import { describe, test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdirSync } from 'node:fs'
import { join } from 'node:path'
import {
  makeSandbox, packAndInstall, bootWeb, initProfile, callTool, readSessionLog, findSessionLog, userTexts,
  isIdle, turnEndCount, REPO_ROOT, sleep, until, boxCli, requestIdOf, requestIdIn, landedCount,
} from './real-host/harness.mjs'
import { launchBrowser, chromiumVersion, pluginRoute } from './real-host/browser.mjs'

const TITLES = { A: 'Planner A', B: 'Builder B', C: 'Critic C', D: 'Docs D', E: 'Ops E' }

/** Deliveries of `rpcId` in a session's log (the file: what the host wrote). */
function landed(home, id, rpcId) {
  const file = findSessionLog(home, id)
  return file ? landedCount(readSessionLog(file), rpcId) : 0
}

const cli = boxCli

describe('the home-wide Agent mail page in headless Chromium against rc.8 dsh web, five sessions', () => {
  let box, web, browser, page, shots
  const S = {}
  const sent = {}
  const routes = {}

  /** Skip (saying why) when this checkout's host half lacks a route the test needs — an older plugin half. */
  function needs(t, ...names) {
    const absent = names.filter(n => routes[n] === false)
    if (absent.length > 0) { t.skip(`no ${absent.join(', ')} route in this checkout`); return false }
    return true
  }

  async function send(from, to, message, key) {
    const r = await callTool(web, S[from], 'send_session_message', { toSessionId: S[to], message })
    if (key) sent[key] = { text: r.text, rid: requestIdIn(r.text) }
    return r.text
  }

  /** A route of ours, called from the page as the bundle calls it (same origin, the host's envelope). */
  const route = (endpoint, payload) => pluginRoute(page, endpoint, payload)

  async function dismissNotice() {
    await page.getByText('Ungrouped').first().waitFor({ timeout: 30_000 })
    await page.getByRole('button', { name: 'Continue' }).first().click({ timeout: 8000 }).catch(() => {})
  }

  async function showSessionList() {
    const folder = page.getByText('Ungrouped').first()
    const row = page.getByText(TITLES.A, { exact: true }).first()
    if (!(await row.isVisible())) await folder.click()
    await row.waitFor()
  }

  async function openPage() {
    const entry = page.locator('[data-dsh-session-mail-entry]')
    await entry.waitFor({ timeout: 30_000 })
    if (!(await page.locator('[data-dsh-session-mail-page]').count())) await entry.click()
    await page.locator('[data-dsh-session-mail-page] [role="dialog"]').waitFor()
  }

  async function closePage() {
    if (await page.locator('[data-dsh-session-mail-page]').count()) await page.keyboard.press('Escape')
    await until('the page closed', async () => (await page.locator('[data-dsh-session-mail-page]').count()) === 0)
  }

  before(async () => {
    box = await makeSandbox()
    shots = process.env.SCREENSHOT_DIR || join(box.dir, 'shots')
    mkdirSync(shots, { recursive: true })
    console.log(`# screenshots in ${shots}; ${chromiumVersion()}`)
    const pdir = initProfile(box, 'web')
    packAndInstall(pdir, REPO_ROOT, { mode: 'script' })
    web = await bootWeb(box)
    for (const k of Object.keys(TITLES)) {
      S[k] = await web.createSession(k === 'A' ? box.ws : box.mkdir('ws-' + k.toLowerCase()))
      await web.prompt(S[k], `hello from the human in ${k}`)
    }
    for (const k of Object.keys(TITLES)) {
      await web.waitFor(S[k], ev => turnEndCount(ev) >= 1 && isIdle(ev))
      await web.rpc('session.rename', { sessionId: S[k], title: TITLES[k] })
    }
    // the exchange the thread test reads: a question, its answer, a follow-up
    await send('A', 'B', 'Question: should the schema migration run before the deploy? (codeword kestrel)', 'q')
    await send('B', 'A', 'Answer: run the migration first, then deploy the API.', 'answer')
    await send('A', 'B', 'Follow-up: then I will add a lock timeout to the migration.', 'followup')
    // mail among the others
    await send('C', 'D', 'Docs: the README still shows the v1 endpoints（文档里还是旧的接口说明，请更新）.', 'cd')
    await send('D', 'E', 'Ops: please rotate the staging certificate before Friday.', 'de')
    await send('E', 'C', 'Review request: the rollback script in ops/rollback.sh.', 'ec')
    for (const k of ['q', 'answer', 'followup', 'cd', 'de', 'ec']) assert.match(sent[k].text, /^accepted for /m, sent[k].text)
    browser = await launchBrowser()
    page = await browser.page(web.base + '/')
    await dismissNotice()
    for (const [name, payload] of [['mail.list', { filter: {}, limit: 1 }], ['held.counts', {}], ['rules.set', {}], ['held.decideMany', {}], ['human.sendMany', {}]]) {
      const r = await route(name, payload)
      routes[name] = !(r && r.ok === false && r.error?.code === 'not-found')
    }
    console.log(`# routes: ${JSON.stringify(routes)}`)
  })

  after(async () => {
    await browser?.close()
    await box?.cleanup()
  })

  test('the page opens from the sidebar\'s foot and lists every message newest first, each with its text, sender, target and fate', async t => {
    if (!needs(t, 'mail.list')) return
    await openPage()
    const rows = page.locator('[data-dsh-session-mail-message]')
    await until('six messages listed', async () => (await rows.count()) >= 6, { timeout: 30_000 })
    const ids = await rows.evaluateAll(els => els.map(e => e.getAttribute('data-dsh-session-mail-message')))
    assert.deepEqual(ids.slice(0, 6), ['ec', 'de', 'cd', 'followup', 'answer', 'q'].map(k => sent[k].rid), 'newest first')
    const q = page.locator(`[data-dsh-session-mail-message="${sent.q.rid}"]`)
    const text = await q.innerText()
    assert.match(text, /codeword kestrel/, 'the message\'s text, not a hash')
    assert.match(text, new RegExp(TITLES.A))
    assert.match(text, new RegExp(TITLES.B))
    await until('the fate landed', async () => (await q.getAttribute('data-fate')) === 'landed')
    await page.screenshot({ path: join(shots, 'page.png') })
  })

  test('a search finds a message by a word of its body, and only it', async t => {
    if (!needs(t, 'mail.list')) return
    await openPage()
    const box_ = page.locator('[data-dsh-session-mail-search]')
    await box_.fill('certificate')
    const rows = page.locator('[data-dsh-session-mail-message]')
    await until('one search result', async () => {
      const ids = await rows.evaluateAll(els => els.map(e => e.getAttribute('data-dsh-session-mail-message')))
      return ids.length === 1 && ids[0] === sent.de.rid
    })
    assert.match(await rows.first().innerText(), /rotate the staging certificate/)
    await page.screenshot({ path: join(shots, 'page-search.png') })
    // a Chinese word inside a sentence written without spaces (crates/index fts_text / fts_query)
    await box_.fill('接口')
    await until('the Chinese word found', async () => {
      const ids = await rows.evaluateAll(els => els.map(e => e.getAttribute('data-dsh-session-mail-message')))
      return ids.length === 1 && ids[0] === sent.cd.rid
    })
    assert.match(await rows.first().innerText(), /旧的接口说明/)
    await box_.fill('')
    await until('the list back', async () => (await rows.count()) >= 6)
  })

  test('a message opens in its thread: the question, the answer and the follow-up, in order, both sides\' texts', async t => {
    if (!needs(t, 'mail.list')) return
    await openPage()
    // keyboard: focus the row's Thread button and press Enter
    const btn = page.locator(`[data-dsh-session-mail-thread-open="${sent.q.rid}"]`)
    await btn.focus()
    await page.keyboard.press('Enter')
    const items = page.locator('[data-dsh-session-mail-thread] [data-dsh-session-mail-thread-item]')
    await until('three thread items', async () => (await items.count()) === 3)
    const ids = await items.evaluateAll(els => els.map(e => e.getAttribute('data-dsh-session-mail-thread-item')))
    assert.deepEqual(ids, ['q', 'answer', 'followup'].map(k => sent[k].rid), 'oldest first')
    const texts = await items.allInnerTexts()
    assert.match(texts[0], /codeword kestrel/)
    assert.match(texts[1], /run the migration first/)
    assert.match(texts[2], /lock timeout/)
    await page.screenshot({ path: join(shots, 'page-thread.png') }) // docs/img/agent-mail-page.png
    // any session opens with one click (the page closes onto it)
    await page.locator('[data-dsh-session-mail-thread] [data-dsh-session-mail-open]').filter({ hasText: TITLES.B }).first().click()
    await until('the page closed onto B', async () => (await page.locator('[data-dsh-session-mail-page]').count()) === 0)
    await page.getByText('hello from the human in B').first().waitFor({ timeout: 20_000 })
  })

  test('held mail: C holds, the count shows on C in the session list and on the entry; "always allow from Planner A" lets A through while B\'s next is held', async t => {
    if (!needs(t, 'held.counts', 'rules.set')) return
    const r0 = await route('policy.set', { sessionId: S.C, inbound: 'hold' })
    assert.equal(r0.ok, true, JSON.stringify(r0))
    const a1 = await send('A', 'C', 'Please review the migration plan (held A1).')
    const b1 = await send('B', 'C', 'Please review the deploy plan (held B1).')
    assert.match(a1, /held for the human/i, a1)
    assert.match(b1, /held for the human/i, b1)
    const ridA1 = requestIdOf(a1)
    await closePage()
    await showSessionList()
    const badge = page.locator(`[data-dsh-session-mail-held-count][data-session-id="${S.C}"]`)
    await until('C\'s badge says 2', async () => (await badge.count()) === 1 && (await badge.getAttribute('data-dsh-session-mail-held-count')) === '2', { timeout: 20_000 })
    const row = page.locator('[role="treeitem"]').filter({ has: badge })
    assert.match(await row.innerText(), new RegExp(TITLES.C), 'the badge sits in C\'s own row')
    assert.equal(await page.locator(`[data-dsh-session-mail-held-count][data-session-id="${S.A}"]`).count(), 0, 'no badge where nothing is held')
    await until('the entry counts 2', async () => (await page.locator('[data-dsh-session-mail-entry-count]').getAttribute('data-dsh-session-mail-entry-count').catch(() => null)) === '2')
    await page.screenshot({ path: join(shots, 'session-list-held.png') })

    await openPage()
    const card = page.locator(`[data-dsh-session-mail-held="${ridA1}"]`)
    await card.waitFor({ timeout: 20_000 })
    assert.match(await card.innerText(), /expires in (23 h 59 min|24 h)\b/, 'the time left before it expires (24 h by default)')
    await page.screenshot({ path: join(shots, 'page-held.png') })
    await card.locator('[data-dsh-session-mail-always="accept"]').click()
    await until('A1 approved and landed in C', () => landed(box.home, S.C, ridA1) === 1, { timeout: 30_000 })
    await until('A\'s sender rule listed', async () => (await page.locator(`[data-dsh-session-mail-sender-rule="${S.A}"][data-inbound="accept"]`).count()) === 1)
    const a2 = await send('A', 'C', 'Second note from A: the plan is final (A2).')
    assert.match(a2, /^accepted for /m, `A's next message goes through the held session: ${a2}`)
    const b2 = await send('B', 'C', 'Second note from B (B2).')
    assert.match(b2, /held for the human/i, `B's is still held: ${b2}`)
    await until('A2 landed in C', () => landed(box.home, S.C, requestIdOf(a2)) === 1, { timeout: 30_000 })
    assert.match(cli(box, 'verify', requestIdOf(b2)).out, /held/)
    await page.locator(`[data-dsh-session-mail-held="${requestIdOf(b2)}"]`).waitFor({ timeout: 20_000 })
    await page.locator('[data-dsh-session-mail-rules]').scrollIntoViewIfNeeded()
    await page.screenshot({ path: join(shots, 'page-rules.png') })
  })

  test('bulk: "Reject all" from B decides B\'s held messages once each; none lands', async t => {
    if (!needs(t, 'held.counts', 'held.decideMany')) return
    await openPage()
    const heldB = await page.locator(`[data-dsh-session-mail-held][data-sender="${S.B}"]`).evaluateAll(els => els.map(e => e.getAttribute('data-dsh-session-mail-held')))
    assert.equal(heldB.length, 2, 'B1 and B2')
    await page.locator('[data-dsh-session-mail-bulk-scope]').selectOption(S.B)
    await page.locator('[data-dsh-session-mail-bulk="reject"]').click()
    for (const rid of heldB) await until(`${rid} rejected`, () => /rejected/.test(cli(box, 'verify', rid).out))
    await until('no held card left', async () => (await page.locator('[data-dsh-session-mail-held]').count()) === 0)
    for (const rid of heldB) assert.equal(landed(box.home, S.C, rid), 0)
  })

  test('the human writes to three sessions at once: it lands once in each, as the human\'s own message', async t => {
    if (!needs(t, 'human.sendMany')) return
    await openPage()
    await page.locator('[data-dsh-session-mail-compose-open]').click()
    for (const k of ['B', 'D', 'E']) await page.locator(`[data-dsh-session-mail-compose-to="${S[k]}"]`).check()
    const text = 'All of you: the API changed, /v2/items pages by cursor now.'
    await page.locator('[data-dsh-session-mail-compose-text]').fill(text)
    await page.locator('[data-dsh-session-mail-compose-send]').click()
    for (const k of ['B', 'D', 'E']) {
      const l = page.locator(`[data-dsh-session-mail-landing="${S[k]}"]`)
      await l.waitFor({ timeout: 30_000 })
      assert.equal(await l.getAttribute('data-state'), 'accepted')
    }
    await page.screenshot({ path: join(shots, 'page-compose.png') })
    for (const k of ['B', 'D', 'E']) {
      await until(`the message in ${k}'s log`, () => {
        const file = findSessionLog(box.home, S[k])
        const mine = userTexts(readSessionLog(file)).filter(u => JSON.stringify(u).includes('/v2/items pages by cursor'))
        return mine.length === 1 && !String(mine[0].source?.rpcId ?? '').startsWith('dsh-session-mail:')
      }, { timeout: 30_000 })
    }
    const fileA = findSessionLog(box.home, S.A)
    assert.equal(userTexts(readSessionLog(fileA)).filter(u => JSON.stringify(u).includes('/v2/items pages by cursor')).length, 0, 'not to A')
  })

  test('held mail expires: with a 1-minute hold the card counts down, then the message is rejected as expired — the list and D\'s verify say so', async t => {
    if (!needs(t, 'held.counts')) return
    const r0 = await route('policy.set', { heldTtlMs: 60_000 }) // the shortest the policy takes (1 min … 30 days)
    assert.equal(r0.ok, true, JSON.stringify(r0))
    const d1 = await send('D', 'C', 'Held until it expires (D1).')
    assert.match(d1, /held for the human/i, d1)
    const rid = requestIdOf(d1)
    await openPage()
    const card = page.locator(`[data-dsh-session-mail-held="${rid}"]`)
    await card.waitFor({ timeout: 20_000 })
    assert.match(await card.innerText(), /expires in 1 min\b/)
    const expiresAt = Number(await card.locator('[data-dsh-session-mail-expires]').getAttribute('data-dsh-session-mail-expires'))
    await sleep(Math.max(0, expiresAt - Date.now()) + 500)
    await until('the card gone', async () => (await card.count()) === 0, { timeout: 30_000 })
    const row = page.locator(`[data-dsh-session-mail-message="${rid}"]`)
    await until('the row expired', async () => (await row.getAttribute('data-fate').catch(() => null)) === 'expired', { timeout: 30_000 })
    assert.match(cli(box, 'verify', rid).out, /expired/i)
    assert.equal(landed(box.home, S.C, rid), 0, 'an expired message never lands')
    await route('policy.set', { heldTtlMs: 24 * 3_600_000 })
  })

  test('the page is keyboard operable: its entry opens it with Enter, Escape closes it and focus returns to the entry', async () => {
    await closePage()
    const entry = page.locator('[data-dsh-session-mail-entry]')
    await entry.focus()
    await page.keyboard.press('Enter')
    await page.locator('[data-dsh-session-mail-page] [role="dialog"]').waitFor()
    assert.equal(await page.evaluate(() => document.activeElement?.hasAttribute('data-dsh-session-mail-search') ?? false), true, 'focus moves into the dialog, on its search box')
    await page.keyboard.press('Escape')
    await until('closed', async () => (await page.locator('[data-dsh-session-mail-page]').count()) === 0)
    const focused = await page.evaluate(() => document.activeElement?.hasAttribute('data-dsh-session-mail-entry') ?? false)
    assert.equal(focused, true)
  })

  test('zh: a browser asking for Chinese gets the page in Chinese (rc.8 packages/client/locale: navigator language when settings name none)', async () => {
    const zh = await launchBrowser({ locale: 'zh-CN' })
    try {
      const p = await zh.page(web.base + '/')
      await p.getByRole('button', { name: /继续|Continue/ }).first().click({ timeout: 8000 }).catch(() => {})
      const entry = p.locator('[data-dsh-session-mail-entry]')
      await entry.waitFor({ timeout: 30_000 })
      assert.match(await entry.innerText(), /Agent 邮件/)
      await entry.click()
      const dialog = p.locator('[data-dsh-session-mail-page] [role="dialog"]')
      await dialog.waitFor()
      await until('the list in Chinese', async () => /消息（最新在前）/.test(await dialog.innerText()) && (await p.locator('[data-dsh-session-mail-message]').count()) > 0)
      const text = await dialog.innerText()
      assert.match(text, /长期规则/)
      assert.match(text, /已送达|已拒绝|已过期/, 'fates in Chinese')
      await p.screenshot({ path: join(shots, 'page-zh.png') })
      assert.deepEqual(zh.errors.filter(e => /dsh-session-mail|dsm-/.test(e)), [])
    } finally {
      await zh.close()
    }
  })

  test('the page loaded our bundle without a console or page error', () => {
    const ours = browser.errors.filter(e => /dsh-session-mail|dsm-/.test(e))
    assert.deepEqual(ours, [])
  })
})
