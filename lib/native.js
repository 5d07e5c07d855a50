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

/**
 * The readable refusal of a call that failed inside the plugin (a thrown error, never a tool outcome).
 * Whether trying again can help is keyed on the error's typed `code` (crates/core/src/error.rs: the core
 * throws `E_BAD_REQUEST` for a request it cannot take, the same way every time), never on its words.
 * @param {string} tool
 * @param {unknown} e
 */
export function internalFailure(tool, e) {
  const again = e?.code === 'E_BAD_REQUEST'
    ? 'retrying the same call will fail the same way; tell the user'
    : 'it is safe to try again'
  return `refused (internal): ${tool} failed inside the plugin: ${String(e?.message ?? e)}. Nothing was delivered by this call; ${again}.`
}
