// The slice of the rc.8 web client's plugin context this bundle uses, typed as far as we rely on it. Every
// member is optional: a shell without one of them skips what needs it (nothing throws at the page).
// Sources: packages/client/ui-slots/src/index.ts (slots), packages/client/runtime (sessions),
// packages/client/locale (locale), packages/client/ui-input-trigger (inputTriggers).

export interface SessionRow {
  id: string
  title?: string
  displayTitle?: string
  running?: boolean
  blank?: boolean
  origin?: string
  parentId?: string
  pendingInteraction?: unknown
  updatedAt?: number
}

export interface SessionSnapshot { ids: string[]; byId: Record<string, SessionRow | undefined>; current?: string }

export interface SlotEntry { options?: { key?: string; name?: string; id?: string }; component?: unknown }

export interface HostContext {
  effect?: (fn: () => (() => void) | void, label?: string) => void
  slots?: {
    inject: (name: string, fn: () => (() => void) | void) => void
    register: (options: Record<string, unknown>, component: unknown) => () => void
    entries?: (name: string) => SlotEntry[]
  }
  sessions?: {
    list: { getSnapshot: () => SessionSnapshot; subscribe: (fn: () => void) => () => void }
    open?: (id: string) => void
  }
  locale?: {
    register: (ns: string, dicts: Record<string, Record<string, string>>) => () => void
    bind: (ns: string) => (key: string, params?: Record<string, unknown>) => string
  }
  inputTriggers?: { registerSource: (source: unknown) => () => void }
  get?: (name: string) => any
}

export function sessionRow(ctx: HostContext, id: string | null | undefined): SessionRow | undefined {
  if (!id) return undefined
  try { return ctx.sessions!.list.getSnapshot().byId[id] } catch { return undefined }
}

export function titleOf(row: SessionRow | undefined, fallback?: string | null): string {
  return String((row && (row.displayTitle || row.title)) || fallback || '')
}

export function openSession(ctx: HostContext, id: string | null | undefined): void {
  try { if (id && ctx.sessions && typeof ctx.sessions.open === 'function') ctx.sessions.open(id) } catch { /* the list moved on */ }
}
