import { useEffect, useState } from './react'
import type { HostContext } from './host'
import type { FactStore } from './facts'

export function useFacts(store: FactStore, id: string) {
  const [, bump] = useState(0)
  useEffect(() => store.subscribe(id, () => { bump(n => n + 1) }), [id])
  return store.get(id)
}

/** Re-render when the runtime's session list changes (titles, running state). */
export function useSessionList(ctx: HostContext): void {
  const [, bump] = useState(0)
  useEffect(() => {
    try { return ctx.sessions!.list.subscribe(() => { bump(n => n + 1) }) } catch { return undefined }
  }, [])
}
