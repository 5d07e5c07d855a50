// Card facts per request id, fetched once from the ledger through the `card` route (asked again a few times
// while the sender's line is not written yet: it is written after the outcome is known).
import { call } from './rpc'

export interface CardFacts {
  sender?: string | null
  senderTitle?: string | null
  target?: string | null
  mode?: 'queue' | 'steer'
  hop?: number
  chain?: string[]
  machine?: { id: string; name: string } | null
  unavailable?: boolean
}

export interface FactStore {
  get(id: string): CardFacts | undefined
  subscribe(id: string, fn: () => void): () => void
}

export function createCardFacts(): FactStore {
  const facts = new Map<string, CardFacts>()
  const listeners = new Map<string, Set<() => void>>()
  const inflight = new Set<string>()
  function notify(id: string) {
    const set = listeners.get(id)
    if (set) set.forEach(fn => { try { fn() } catch { /* a listener's own problem */ } })
  }
  function load(id: string, attempt: number) {
    if (inflight.has(id)) return
    inflight.add(id)
    call<CardFacts>('card', { requestId: id }).then(r => {
      inflight.delete(id)
      if (r && r.ok && r.value) {
        facts.set(id, r.value)
        notify(id)
        if (!r.value.sender && attempt < 5) setTimeout(() => { load(id, attempt + 1) }, 800 * (attempt + 1))
      } else {
        facts.set(id, { unavailable: true })
        notify(id)
      }
    })
  }
  return {
    get: id => facts.get(id),
    subscribe(id, fn) {
      let set = listeners.get(id)
      if (!set) { set = new Set(); listeners.set(id, set) }
      set.add(fn)
      if (!facts.has(id)) load(id, 0)
      return () => { set!.delete(fn) }
    },
  }
}
