// The native core for the command line: the same addon the plugin loads (binding.cjs), with a
// message a person can act on when it does not load on this platform.
import { readFileSync } from 'node:fs'
import { loadCore } from '../native.js'

export const PACKAGE_DIR = new URL('../../', import.meta.url)
export const PACKAGE = JSON.parse(readFileSync(new URL('package.json', PACKAGE_DIR), 'utf8'))

export class CoreMissing extends Error {}

/** The addon, or throw CoreMissing with what to do. */
export function core() {
  const { core: c, error } = loadCore()
  if (c === undefined) {
    throw new CoreMissing(
      `the dsh-session-mail native addon does not load on this platform (${process.platform}-${process.arch}, Node ${process.version}): `
      + `${String(error?.message ?? error).split('\n')[0]}. Reinstall the package for this platform `
      + `(npm install dsh-session-mail, or npm run build in a checkout).`,
    )
  }
  return c
}
