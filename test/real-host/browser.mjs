// A real browser for the real host: Debian's `chromium` (installed here when missing, as root through apt;
// scripts/test.sh does the same up front) driven by playwright-core, which ships no browser of its own.
//
//   ensureChromium() -> '/usr/bin/chromium'
//   launchBrowser({ t? }) -> { browser, page(base), close() }
import { execFileSync, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export const CHROMIUM = process.env.CHROMIUM_BIN || '/usr/bin/chromium'

/** The Chromium binary; `apt-get install chromium` first when it is missing (needs root, like CI here). */
export function ensureChromium() {
  if (existsSync(CHROMIUM)) return CHROMIUM
  const opts = { stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } }
  execFileSync('apt-get', ['update', '-qq'], opts)
  execFileSync('apt-get', ['install', '-y', '-qq', 'chromium'], opts)
  if (!existsSync(CHROMIUM)) throw new Error(`chromium is not at ${CHROMIUM} after apt-get install chromium`)
  return CHROMIUM
}

/** `chromium --version`, for the test's printed conditions. */
export function chromiumVersion() {
  const r = spawnSync(CHROMIUM, ['--version'], { encoding: 'utf8' })
  return (r.stdout || '').trim()
}

/**
 * Headless Chromium with a fresh profile. `close()` ends it and removes the profile.
 * @param {{ t?: import('node:test').TestContext, locale?: string }} [options]
 */
export async function launchBrowser({ t, locale } = {}) {
  const { chromium } = await import('playwright-core')
  const userDataDir = mkdtempSync(join(tmpdir(), 'dsm-chromium-'))
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: ensureChromium(),
    headless: true,
    viewport: { width: 1280, height: 860 },
    ...(locale ? { locale } : {}), // navigator.language: rc.8's locale plugin starts in it when settings name none
    args: [
      '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  })
  const errors = []
  const b = {
    context,
    errors,
    async page(url) {
      const page = context.pages()[0] ?? await context.newPage()
      page.on('pageerror', e => errors.push(String(e?.stack ?? e)))
      page.on('console', m => { if (m.type() === 'error') errors.push(m.text()) })
      if (url) await page.goto(url, { waitUntil: 'domcontentloaded' })
      return page
    },
    async close() {
      await context.close().catch(() => {})
      rmSync(userDataDir, { recursive: true, force: true })
    },
  }
  if (t) t.after(() => b.close())
  return b
}

/**
 * A route of this plugin called from `page` as the bundle calls it (same origin, the host's Connection envelope,
 * lib/client-host.js): resolves to the route's `{ok, value}` or `{ok: false, error}`.
 */
export async function pluginRoute(page, endpoint, payload) {
  return page.evaluate(async ([endpoint, payload]) => {
    const r = await fetch('/dsh-session-mail/' + endpoint, {
      method: 'POST', credentials: 'same-origin', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'client-request', rpcId: 'test-' + Math.random(), method: endpoint, payload }),
    })
    return (await r.json()).result
  }, [endpoint, payload])
}
