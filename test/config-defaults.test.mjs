// Config defaults are declared once, in Rust (crates/core/src/config.rs, exported as configDefaults());
// index.js's Schemastery Config, its CORE_CONFIG_KEYS and index.d.ts must agree with them.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { Config, CORE_CONFIG_KEYS } from '../index.js'

const require = createRequire(import.meta.url)
const core = require('../binding.cjs')

test('index.js Schemastery defaults equal the core defaults, key for key', () => {
  const rust = core.configDefaults()
  const js = Config({})
  assert.ok(Object.keys(rust).length >= 16, JSON.stringify(rust))
  for (const [key, value] of Object.entries(rust)) {
    assert.deepEqual(js[key], value, `index.js default of ${key}`)
  }
})

test('CORE_CONFIG_KEYS is exactly the set of core config keys', () => {
  assert.deepEqual([...CORE_CONFIG_KEYS].sort(), Object.keys(core.configDefaults()).sort())
})

test('index.d.ts declares every core config key, and every declared key has a Schemastery default', () => {
  const dts = readFileSync(new URL('../index.d.ts', import.meta.url), 'utf8')
  const body = dts.match(/export interface Config \{([^}]*)\}/)?.[1]
  assert.ok(body, 'index.d.ts has an interface Config')
  const declared = [...body.matchAll(/^\s*(\w+)\s*:/gm)].map(m => m[1])
  for (const key of Object.keys(core.configDefaults())) assert.ok(declared.includes(key), `index.d.ts lacks ${key}`)
  const js = Config({})
  for (const key of declared) assert.notEqual(js[key], undefined, `index.js has no default for ${key}`)
})
