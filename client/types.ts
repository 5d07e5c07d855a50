// The route DTOs as the client reads them (the core declares them: docs/architecture.md "Machines and the
// human's overview: the shapes both share"). Optional fields are the ones a route of an older plugin half, or
// of a sibling route not built yet, may leave out.

/** One fate enum, typed end to end (verify --json `state`, mail rows, cards, the index). */
export type Fate = 'landed' | 'queued' | 'waiting' | 'held' | 'approved' | 'rejected' | 'expired' | 'refused' | 'canceled' | 'lost' | 'removed' | 'unknown'
export const FATES: Fate[] = ['landed', 'queued', 'waiting', 'held', 'approved', 'rejected', 'expired', 'refused', 'canceled', 'lost', 'removed', 'unknown']

export type Inbound = 'accept' | 'hold' | 'refuse'
export interface Machine { id: string; name: string }

export interface Policy {
  inbound: Inbound
  stopAll?: boolean
  unverified?: string | null
  senders?: Record<string, Inbound>
  machines?: Record<string, Inbound>
  heldTtlMs?: number
}

export interface HeldMessage {
  requestId: string
  sender?: string
  senderTitle?: string
  target?: string
  postedAt: number
  expiresAt?: number
  mode?: string
  text: string
  state: string
  /** The machine it came from (`{id, name}`); absent or null: this home. */
  machine?: Machine | null
}
