// What the home-wide page reads from the routes, normalised once (docs/architecture.md "Machines and the
// human's overview"; the DTOs are the core's: crates/core human.rs for rules/held/sendMany, the index's row
// for mail.list / mail.thread). The normalisers accept only what they understand and drop the rest: a
// field of the wrong type reads as absent, never as something else.
import { FATES, type Fate, type Inbound, type Machine } from './types'

export interface MailRow {
  requestId: string
  time: number
  sender: string | null
  senderTitle: string | null
  senderMachine: Machine | null
  target: string | null
  targetTitle: string | null
  targetMachine: Machine | null
  tool: string | null
  mode: string | null
  hop: number | null
  chain: string | null
  fate: Fate
  /** A message sent to a linked machine: the remembered answer its fate comes from (when, and whether the far
   * side or this home's outbox gave it). `null`: the fate is read here, now. */
  answered: { at: number; source: string } | null
  text: string
  expiresAt: number | null
}

const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)
const num = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null)

/**
 * A machine as a route names it: `{id, name}`, or a bare id. The links list's name wins (the human's name for
 * it now, a rename included); else the route's, else the id's start.
 */
export function machineOf(v: unknown, names?: Record<string, string>): Machine | null {
  if (typeof v === 'string' && v !== '') return { id: v, name: (names && names[v]) || v.slice(0, 8) }
  if (v && typeof v === 'object' && typeof (v as Machine).id === 'string') {
    const m = v as Machine
    return { id: m.id, name: (names && names[m.id]) || (typeof m.name === 'string' && m.name !== '' ? m.name : m.id.slice(0, 8)) }
  }
  return null
}

export function fateOf(v: unknown): Fate {
  return typeof v === 'string' && (FATES as string[]).indexOf(v) >= 0 ? (v as Fate) : 'unknown'
}

export function mailRow(r: any, names?: Record<string, string>): MailRow | null {
  if (!r || typeof r !== 'object' || typeof r.requestId !== 'string') return null
  return {
    requestId: r.requestId,
    time: num(r.time) ?? num(r.timeMs) ?? 0,
    sender: str(r.sender),
    senderTitle: str(r.senderTitle),
    senderMachine: machineOf(r.senderMachine ?? r.fromMachine, names),
    target: str(r.target),
    targetTitle: str(r.targetTitle),
    targetMachine: machineOf(r.targetMachine ?? r.toMachine, names),
    tool: str(r.tool),
    mode: str(r.mode),
    hop: num(r.hop),
    chain: str(r.chain),
    fate: fateOf(r.fate),
    answered: r.answered && typeof r.answered === 'object' && num(r.answered.at) !== null && typeof r.answered.source === 'string'
      ? { at: r.answered.at, source: r.answered.source } : null,
    text: typeof r.text === 'string' ? r.text : '',
    expiresAt: num(r.expiresAt),
  }
}

/** A rebuild of the index under way (crates/core/src/mailindex `IndexStatus.building`): messages written of how many (`total` 0: reading the ledger). */
export interface Building { done: number; total: number }
export interface Page { rows: MailRow[]; next: string | null; building: Building | null }

export function buildingOf(index: any): Building | null {
  const b = index?.building
  if (!b || typeof b !== 'object') return null
  const done = num(b.done) ?? 0
  const total = num(b.total) ?? 0
  return { done: Math.max(0, done), total: Math.max(0, total, done) }
}

export function pageOf(v: any, names?: Record<string, string>): Page {
  const list: unknown[] = Array.isArray(v) ? v : Array.isArray(v?.rows) ? v.rows : []
  const rows = list.map(r => mailRow(r, names)).filter((r): r is MailRow => r !== null)
  const next = typeof v?.next === 'string' ? v.next : typeof v?.next === 'number' ? String(v.next) : null
  return { rows, next, building: buildingOf(v?.index) }
}

/** A thread (crates/core/src/mailindex `MailThread {requestId, found, chain, rows, truncated}`), oldest first (the route's order; sorted again by time so a reply never shows above its question). */
export function threadOf(v: any, names?: Record<string, string>): { rows: MailRow[]; root: string | null; truncated: boolean } {
  const rows = pageOf(v, names).rows.slice().sort((a, b) => a.time - b.time)
  return { rows, root: typeof v?.requestId === 'string' ? v.requestId : null, truncated: v?.truncated === true }
}

export interface HeldCounts { bySession: Record<string, number>; total: number; nextExpiresAt: number | null }

export function countsOf(v: any): HeldCounts {
  const bySession: Record<string, number> = {}
  let total = 0
  let nextExpiresAt: number | null = null
  const list: any[] = Array.isArray(v?.sessions) ? v.sessions : []
  for (const c of list) {
    if (!c || typeof c.sessionId !== 'string' || typeof c.held !== 'number' || !(c.held > 0)) continue
    bySession[c.sessionId] = (bySession[c.sessionId] || 0) + c.held
    total += c.held
    const e = num(c.nextExpiresAt)
    if (e !== null && (nextExpiresAt === null || e < nextExpiresAt)) nextExpiresAt = e
  }
  if (typeof v?.total === 'number' && v.total >= total) total = v.total
  return { bySession, total, nextExpiresAt }
}

export type By = 'stop-all' | 'sender' | 'machine' | 'session' | 'default'
export const ORDER: By[] = ['stop-all', 'sender', 'machine', 'session', 'default']

export interface Rules {
  order: By[]
  stopAll: boolean
  senders: Record<string, Inbound>
  machines: Record<string, Inbound>
  sessions: Record<string, Inbound>
  heldTtlMs: number | null
  unverified: string | null
}

const INBOUND = ['accept', 'hold', 'refuse']
function inboundMap(v: unknown): Record<string, Inbound> {
  const out: Record<string, Inbound> = {}
  if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) if (INBOUND.indexOf(x as string) >= 0) out[k] = x as Inbound
  return out
}

export function rulesOf(v: any): Rules {
  const order = Array.isArray(v?.order) ? (v.order as unknown[]).filter((b): b is By => (ORDER as unknown[]).indexOf(b) >= 0) : []
  return {
    order: order.length > 0 ? order : ORDER,
    stopAll: v?.stopAll === true,
    senders: inboundMap(v?.senders),
    machines: inboundMap(v?.machines),
    sessions: inboundMap(v?.sessions),
    heldTtlMs: num(v?.heldTtlMs),
    unverified: str(v?.unverified),
  }
}

/** Time left before a held message expires, for its card: `null` when it carries no expiry. */
export function timeLeft(expiresAt: number | null, now: number): { expired: boolean; h: number; m: number } | null {
  if (expiresAt === null) return null
  const ms = expiresAt - now
  if (ms <= 0) return { expired: true, h: 0, m: 0 }
  const minutes = Math.ceil(ms / 60_000)
  return { expired: false, h: Math.floor(minutes / 60), m: minutes % 60 }
}

export interface Filters { session: string; fate: string; held: boolean; since: string; query: string }
export const SINCE: Record<string, number> = { '1h': 3600_000, '24h': 86_400_000, '7d': 7 * 86_400_000 }

/** The `mail.list` payload for the page's filters (crates/core/src/mailindex `MailListArgs`; an empty field filters nothing). */
export function listPayload(f: Filters, now: number, before: string | null, limit: number) {
  const filter: Record<string, unknown> = {}
  if (f.session) filter.session = f.session
  if (f.fate) filter.fate = [f.fate]
  if (f.held) filter.held = true
  if (f.since && SINCE[f.since]) filter.since = now - SINCE[f.since]
  const p: Record<string, unknown> = { filter, limit }
  if (f.query.trim() !== '') p.query = f.query.trim()
  if (before !== null) p.before = before
  return p
}

export interface MachineLink {
  id: string; name: string; relay: string | null; linkedAt: number | null; inbound: Inbound | null
  online: boolean | null; rttMs: number | null; lastSeen: number | null; error: string | null
}

/** The links as `machines.list` gives them (the link crate's `links`: `{links: [{id, name, relay, addrs, linkedAt, online, lastSeen, rttMs, error}]}`). */
export function machinesOf(v: any): MachineLink[] {
  const list: any[] = Array.isArray(v) ? v : Array.isArray(v?.links) ? v.links : Array.isArray(v?.machines) ? v.machines : []
  return list.filter(m => m && typeof m.id === 'string').map(m => ({
    id: m.id,
    name: typeof m.name === 'string' ? m.name : m.id.slice(0, 8),
    relay: str(m.relay),
    linkedAt: num(m.linkedAt),
    inbound: INBOUND.indexOf(m.inbound) >= 0 ? m.inbound : null,
    online: typeof m.online === 'boolean' ? m.online : null,
    rttMs: num(m.rttMs),
    lastSeen: num(m.lastSeen),
    error: str(m.error),
  }))
}
