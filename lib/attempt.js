// The one guard for reading host objects: a missing or changed host API yields a fallback, never a throw.
// A leaf: lib/host.js and lib/observe.js both read host objects through it, and neither imports the other
// for it.

/** `fn()`, or `fallback` when it throws or yields undefined: every read of a host object goes through it. */
export function attempt(fn, fallback) {
  try {
    const v = fn()
    return v === undefined ? fallback : v
  } catch {
    return fallback
  }
}
