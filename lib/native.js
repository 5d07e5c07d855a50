// Loads the napi addon through the loader napi-rs generates (binding.cjs).
// Kept separate so a load failure becomes a readable message instead of a failed plugin row.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

let cached
/** @returns {{ core: any, error: Error | undefined }} */
export function loadCore() {
  if (cached === undefined) {
    try {
      cached = { core: require('../binding.cjs'), error: undefined }
    } catch (error) {
      cached = { core: undefined, error }
    }
  }
  return cached
}
