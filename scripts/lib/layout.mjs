// The install layout of a DSH profile: where the installer writes the plugin and where the doctor looks for it
// (one description for both). DSH 0.1.0-rc.8 packages/boot/app-boot/src/profile.ts: a profile is
// `<DSH_HOME>/profiles/<name>/` holding package.json `{ dependencies, dsh: { profile: { bundles } } }`; at start the
// host resolves every `dsh.profile.bundles` name from the profile's node_modules.
import { join } from 'node:path'

/** `<DSH_HOME>/profiles`. */
export function profilesDir(home) {
  return join(home, 'profiles')
}

/** The directory of the profile named `name`. */
export function profileDir(home, name) {
  return join(profilesDir(home), name)
}

/** A profile's manifest (package.json). */
export function manifestPath(profile) {
  return join(profile, 'package.json')
}

/** Where package `name` is installed in a profile (`node_modules/<name>`, scoped names nested). */
export function packageDir(profile, name) {
  return join(profile, 'node_modules', ...name.split('/'))
}

/** How a profile manifest lists package `name`: its dependency spec (or undefined) and whether it is a bundle. */
export function listedIn(manifest, name) {
  const bundles = manifest?.dsh?.profile?.bundles
  return { dependency: manifest?.dependencies?.[name], bundled: Array.isArray(bundles) && bundles.includes(name) }
}
