// The JS modules of the product (not the tests): index.js and every .js/.mjs/.cjs under lib/, scripts/, bin/.
import { readdirSync } from 'node:fs'
import { join } from 'node:path'

/** Absolute paths. */
export function productModules(root) {
  const files = [join(root, 'index.js')]
  const walk = dir => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name)
      if (e.isDirectory()) walk(p)
      else if (/\.(?:m|c)?js$/.test(e.name)) files.push(p)
    }
  }
  for (const dir of ['lib', 'scripts', 'bin']) walk(join(root, dir))
  return files
}
