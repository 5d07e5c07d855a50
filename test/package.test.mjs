// Packaging tests: what the published package contains, the peer ranges the DSH host checks, the bundle
// patch, the display metadata (locale + icon), the marketplace entry, the napi config and the CI workflows.
//
//   node --test test/package.test.mjs        (the addon for this platform must be built: npm run build)
//
// semver and js-yaml come from this checkout's node_modules (both arrive with the napi CLI) or, failing that,
// from the installed DSH host (test/real-host/install-host.sh: $DSH_HOST_DIR or .cache/dsh-host).
import { test, describe } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from 'node:fs'
import { builtinModules, createRequire } from 'node:module'
import { basename, dirname, extname, join, posix, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const requireHere = createRequire(join(ROOT, 'package.json'))
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'))

/** A CommonJS dev tool: from node_modules, else from the installed host's pnpm store. */
function requireTool(name) {
  try {
    return requireHere(name)
  } catch { /* fall through to the host */ }
  const hostDir = resolve(process.env.DSH_HOST_DIR ?? join(ROOT, '.cache', 'dsh-host'))
  const store = join(hostDir, 'host', 'node_modules', '.pnpm')
  const match = existsSync(store) ? readdirSync(store).filter(e => e.startsWith(`${name}@`)).sort().pop() : undefined
  if (match === undefined) throw new Error(`${name} is neither in node_modules (npm ci) nor in an installed DSH host at ${hostDir}`)
  return createRequire(join(store, match, 'node_modules', name, 'package.json'))(name)
}
const semver = requireTool('semver')
const yaml = requireTool('js-yaml')

// ---------------------------------------------------------------------------------------------------------
// peers

/** The 0.1.7 host's rule (packages/boot/app-boot/src/plugin-compatibility.ts `evaluatePluginCompatibility`). */
function incompatibleDshPeers(manifest, runtimeVersion, { includePrerelease = true } = {}) {
  const out = {}
  for (const [name, range] of Object.entries(manifest.peerDependencies ?? {})) {
    if (typeof range !== 'string') throw new Error(`peerDependencies[${JSON.stringify(name)}] must be a string`)
    if (name !== '@deepseek-ai/dsh' && !name.startsWith('@deepseek-ai/dsh-')) continue
    const requirement = ['workspace:^', 'workspace:~', 'workspace:*'].includes(range) ? runtimeVersion : range
    if (requirement.trim() === '' || !semver.satisfies(runtimeVersion, requirement, { includePrerelease })) out[name] = range
  }
  return out
}

// The DSH runtimes the plugin supports: rc.8 (tested here for real), 0.1.5, 0.1.7 (enforces peers), 0.2.
const RUNTIMES = ['0.1.0-rc.8', '0.1.5-rc.2', '0.1.7-rc.2', '0.2.0-rc.2']

describe('peer dependencies', () => {
  const dshPeers = Object.keys(pkg.peerDependencies ?? {}).filter(n => n === '@deepseek-ai/dsh' || n.startsWith('@deepseek-ai/dsh-'))

  test('the plugin declares its DSH peers, never as dependencies, with valid ranges', () => {
    assert.ok(dshPeers.includes('@deepseek-ai/dsh-tools'), 'index.js imports @deepseek-ai/dsh-tools: it must be a peer')
    for (const name of Object.keys(pkg.peerDependencies)) {
      assert.equal(pkg.dependencies?.[name], undefined, `${name} must not also be a dependency (the host provides it)`)
      assert.notEqual(semver.validRange(pkg.peerDependencies[name]), null, `${name}: ${pkg.peerDependencies[name]} is not a semver range`)
    }
  })

  for (const runtime of RUNTIMES) {
    test(`DSH ${runtime} accepts the plugin (host rule: includePrerelease)`, () => {
      assert.deepEqual(incompatibleDshPeers(pkg, runtime), {})
    })
    test(`DSH ${runtime} satisfies every dsh peer without includePrerelease (pnpm's peer check)`, () => {
      assert.deepEqual(incompatibleDshPeers(pkg, runtime, { includePrerelease: false }), {})
    })
  }

  test('the ranges are not blanket ranges: runtimes before rc.8 and from 0.3 on are refused', () => {
    for (const runtime of ['0.0.1-rc.1', '0.1.0-rc.7', '0.3.0-rc.1', '1.0.0']) {
      assert.deepEqual(Object.keys(incompatibleDshPeers(pkg, runtime)), dshPeers, `${runtime} must be refused`)
    }
  })
})

// ---------------------------------------------------------------------------------------------------------
// what npm packs

function npmPackFiles() {
  const res = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: ROOT, encoding: 'utf8', shell: process.platform === 'win32', maxBuffer: 64 * 1024 * 1024,
  })
  assert.equal(res.status, 0, `npm pack --dry-run failed: ${res.stderr}`)
  const [report] = JSON.parse(res.stdout)
  return report.files.map(f => f.path).sort()
}

/** The specifiers a module loads: static import/export-from, literal dynamic import(), require(). */
function specifiers(source) {
  const found = new Set()
  const patterns = [
    /\b(?:import|export)\s[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*['"]([^'"]+)['"]/g,
    /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g,
    /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g,
  ]
  const code = source.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1')
  for (const re of patterns) for (const m of code.matchAll(re)) found.add(m[1])
  return [...found]
}
const relativeSpecifiers = source => specifiers(source).filter(spec => spec.startsWith('.'))
const bareSpecifiers = source => specifiers(source).filter(spec => !spec.startsWith('.') && !spec.startsWith('/'))

/** Every file reachable from `entries` through relative imports (package-root-relative posix paths). */
function importClosure(entries) {
  const seen = new Set()
  const queue = [...entries]
  while (queue.length > 0) {
    const file = queue.shift()
    if (seen.has(file)) continue
    const abs = join(ROOT, file)
    assert.ok(existsSync(abs), `${file} is imported but does not exist`)
    seen.add(file)
    if (!/\.(?:m|c)?js$/.test(file)) continue
    for (const spec of relativeSpecifiers(readFileSync(abs, 'utf8'))) {
      // The napi loader's per-platform candidates (`./<binaryName>.<platform>.node`, `.wasi.cjs`): all optional,
      // tried in turn; the addon for this platform is checked on its own.
      if (posix.basename(spec).startsWith(`${pkg.napi.binaryName}.`)) continue
      // The web client's build script: scripts/install.mjs imports it only in a clone (when client/ is there);
      // a package from npm ships the built lib/client.js instead (docs/client.md "Source and build").
      if (file === 'scripts/install.mjs' && spec === './build-client.mjs') continue
      queue.push(posix.normalize(posix.join(posix.dirname(file), spec)))
    }
  }
  return seen
}

/** `<platform>-<arch>[-<abi>]` as napi names it for this machine. */
function platformArchAbi() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform === 'linux') {
    const musl = !process.report?.getReport()?.header?.glibcVersionRuntime
    return `linux-${arch}-${musl ? 'musl' : 'gnu'}`
  }
  return `${platform}-${arch}`
}

const NEVER_SHIPPED = [/^src\//, /^client\//, /^scripts\/build-client\.mjs$/, /^test\//, /^target\//, /^bench\//, /^fuzz\//, /^\.cache\//, /^docs\//, /^npm\//,
  /^\.github\//, /^\.ci\//, /^market\//, /^node_modules\//, /^Cargo\.(?:toml|lock)$/, /^build\.rs$/, /\.tgz$/, /^artifacts\//]

/** What the host and the installer need, derived from the manifest and the import graphs: path -> why. */
function neededFiles() {
  const norm = p => posix.normalize(p.replace(/^\.\//, ''))
  const needed = new Map()
  const need = (path, why) => { if (!needed.has(norm(path))) needed.set(norm(path), why) }
  need('package.json', 'the manifest')
  need('LICENSE', 'the license')
  need('README.md', 'the readme')
  need(pkg.main, 'main')
  for (const file of importClosure([norm(pkg.main)])) need(file, `imported from ${pkg.main}`)
  need(pkg.dsh.bundle.patch, 'dsh.bundle.patch')
  need(pkg.icon, 'the top-level icon')
  for (const [key, target] of Object.entries(pkg.exports)) {
    if (!target.includes('*')) { need(target, `exports["${key}"]`); continue }
    const [dir, pattern] = [posix.dirname(norm(target)), basename(target)]
    const re = new RegExp(`^${pattern.replace(/[.+?^${}()|[\]\\]/g, '\\$&').replace('*', '[^/]+')}$`)
    const matched = readdirSync(join(ROOT, dir)).filter(f => re.test(f))
    assert.ok(matched.length > 0, `exports["${key}"] matches no file`)
    for (const f of matched) need(`${dir}/${f}`, `exports["${key}"]`)
  }
  for (const file of importClosure(['scripts/install.mjs'])) need(file, 'scripts/install.mjs and what it imports')
  const bins = typeof pkg.bin === 'string' ? [pkg.bin] : Object.values(pkg.bin ?? {})
  for (const file of importClosure(bins.map(norm))) need(file, 'a bin and what it imports')
  return needed
}

describe('npm pack', () => {
  const addon = `${pkg.napi.binaryName}.${platformArchAbi()}.node`
  let packed
  const packedFiles = () => (packed ??= npmPackFiles())

  test('the addon for this platform is built', () => {
    assert.ok(existsSync(join(ROOT, addon)), `${addon} is missing: build it first (npm run build)`)
  })

  test('every file the host and the installer need is packed', () => {
    const needed = neededFiles()
    assert.ok(needed.has('binding.cjs') && needed.has('lib/native.js'), 'the import walk reaches the napi loader')
    needed.set(addon, 'the addon for this platform')
    const missing = [...needed].filter(([path]) => !packedFiles().includes(path)).map(([path, why]) => `${path} (${why})`)
    assert.deepEqual(missing, [], `not packed: ${missing.join(', ')}`)
  })

  test('nothing else is packed: no sources, tests, build output or docs', () => {
    const files = packedFiles()
    const needed = neededFiles()
    assert.deepEqual(files.filter(p => NEVER_SHIPPED.some(re => re.test(p))), [])
    // Besides what is needed: type declarations of shipped modules, READMEs, and the built addons.
    const extra = files.filter(p => !needed.has(p)
      && !(/\.d\.ts$/.test(p) && files.some(js => /\.(?:c|m)?js$/.test(js) && js.replace(/\.(?:c|m)?js$/, '') === p.replace(/\.d\.ts$/, '')))
      && !/^readme(?:\.[^/]*)?$/i.test(p)
      && !new RegExp(`^${pkg.napi.binaryName}\\.[a-z0-9-]+\\.node$`).test(p))
    assert.deepEqual(extra, [], `packed but not needed: ${extra.join(', ')}`)
  })

  test('the installer installs exactly what npm pack packs (scripts/lib/package.mjs reads the tarball with tar)', async () => {
    const { loadPackage } = await import('../scripts/lib/package.mjs')
    const described = loadPackage(ROOT, { kind: 'dir', buildHint: 'npm run build', exitCodeForBadPackage: 2 })
    assert.deepEqual(described.entries.map(e => e.path).sort(), packedFiles())
    for (const entry of described.entries) {
      assert.deepEqual(entry.data, readFileSync(join(ROOT, entry.path)), `${entry.path}: the installed bytes are the checkout's`)
    }
    // The packed manifest carries the runtime dependencies: a registry or `dsh plugin` install fetches them.
    assert.deepEqual(described.manifest.dependencies, pkg.dependencies)
  })

  const BROWSER_PLATFORM = new Set(['react', 'react/jsx-runtime', 'react-dom', 'react-dom/client', '@deepseek-ai/cordis', '@deepseek-ai/dsh-client-ui-slots', '@deepseek-ai/dsh-client-ui-primitives'])
  test('runtime dependencies are honest: every bare import of shipped code is a built-in, a peer or a dependency, and every dependency is imported', () => {
    const builtins = new Set(builtinModules)
    const declared = new Set([...Object.keys(pkg.dependencies ?? {}), ...Object.keys(pkg.peerDependencies ?? {})])
    const used = new Set()
    const undeclared = []
    for (const file of packedFiles().filter(f => /\.(?:m|c)?js$/.test(f))) {
      for (const spec of bareSpecifiers(readFileSync(join(ROOT, file), 'utf8'))) {
        if (spec.startsWith('node:') || builtins.has(spec)) continue
        // the napi loader's per-platform packages (optional, published by the release workflow)
        if (spec.startsWith(`${pkg.name}-`) || spec.startsWith('@napi-rs/') || spec.startsWith('@emnapi/')) continue
        // the web client half runs in the browser: what it requires is the shell's module table (rc.8
        // packages/client/web/src/platform.ts PLATFORM_MODULES), never an npm install
        if (file === 'lib/client.js' && BROWSER_PLATFORM.has(spec)) continue
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0]
        used.add(name)
        if (!declared.has(name)) undeclared.push(`${file}: ${spec}`)
      }
    }
    assert.deepEqual(undeclared, [], 'imported but not declared')
    assert.deepEqual(Object.keys(pkg.dependencies ?? {}).filter(d => !used.has(d)), [], 'declared but not imported by shipped code')
    assert.ok(used.has('tar'), 'the installer reads tarballs with tar')
})
})

// ---------------------------------------------------------------------------------------------------------
// the bundle patch

describe('cordis.patch.yml', () => {
  const file = join(ROOT, pkg.dsh.bundle.patch)
  const text = readFileSync(file, 'utf8')

  test('has no tab characters', () => {
    const lines = text.split('\n').map((l, i) => (l.includes('\t') ? i + 1 : 0)).filter(Boolean)
    assert.deepEqual(lines, [], `tabs on lines ${lines.join(', ')}`)
  })

  test('is a top-level insert list whose row is named by the package name', () => {
    // The host's dialect: js-yaml JSON_SCHEMA (cordis-plugin-include `entryListSchema`).
    const doc = yaml.load(text, { schema: yaml.JSON_SCHEMA })
    assert.ok(Array.isArray(doc), 'a top-level YAML array of patch entries')
    const inserts = doc.filter(e => Array.isArray(e?.insert))
    assert.equal(inserts.length, 1, 'one insert entry')
    assert.equal(inserts[0].id, undefined, 'an insert without id appends at the root')
    const rows = inserts[0].insert.filter(r => r.name === pkg.name)
    assert.equal(rows.length, 1, `one inserted row with name: ${pkg.name}`)
    assert.equal(typeof rows[0].id, 'string')
    assert.notEqual(rows[0].disabled, true, 'shipped enabled')
  })
})

// ---------------------------------------------------------------------------------------------------------
// display metadata (DSH 0.1.7: docs/cookbook/adding-a-package.md §5; 0.2: an exported ./icon)

describe('display metadata', () => {
  const localeDir = join(ROOT, 'locale')
  const locales = readdirSync(localeDir).filter(f => f.endsWith('.json'))

  test('locale/en.json is the discovery entry; every locale has non-empty meta.title and meta.description', () => {
    assert.ok(locales.includes('en.json'))
    assert.ok(locales.includes('zh.json'))
    for (const file of locales) {
      const { meta } = JSON.parse(readFileSync(join(localeDir, file), 'utf8'))
      for (const field of ['title', 'description']) {
        assert.equal(typeof meta?.[field], 'string', `${file}: meta.${field}`)
        assert.ok(meta[field].trim().length > 0, `${file}: meta.${field} is empty`)
        assert.ok(!meta[field].includes('\n'), `${file}: meta.${field} is one line`)
      }
    }
  })

  test('the locale files, the manifest and the icon resolve through the package exports', () => {
    assert.equal(realpathSync(requireHere.resolve(`${pkg.name}/package.json`)), realpathSync(join(ROOT, 'package.json')))
    for (const file of locales) {
      assert.equal(realpathSync(requireHere.resolve(`${pkg.name}/locale/${file}`)), realpathSync(join(localeDir, file)))
    }
    assert.equal(realpathSync(requireHere.resolve(`${pkg.name}/icon`)), realpathSync(join(ROOT, pkg.icon)))
  })

  test('the icon: relative, inside the package, SVG/PNG/JPEG/WebP, at most 256 KiB, self-contained', () => {
    assert.equal(typeof pkg.icon, 'string')
    assert.ok(pkg.icon.startsWith('./') && !pkg.icon.includes('..'), 'relative to the manifest, inside the package')
    const file = join(ROOT, pkg.icon)
    assert.ok(['.svg', '.png', '.jpg', '.jpeg', '.webp'].includes(extname(file)))
    assert.ok(statSync(file).size <= 256 * 1024)
    if (extname(file) === '.svg') {
      const svg = readFileSync(file, 'utf8')
      assert.match(svg, /^<svg[\s>]/)
      assert.doesNotMatch(svg, /\b(?:href|src)\s*=\s*["'](?!#)/, 'no external references: rendered as an image')
      assert.doesNotMatch(svg, /<script/i)
    }
  })
})

// ---------------------------------------------------------------------------------------------------------
// the awesome-dsh-plugin entry (awesome-dsh-plugin scripts/lib/entries.mjs `validateEntries`, `slugFor`)

const CAT_IDS = ['agi', 'ui', 'usage', 'theme', 'model', 'identity', 'session', 'memory', 'tools', 'wsl', 'browser', 'vision',
  'creative', 'voice', 'docs', 'skill', 'workflow', 'git', 'notify', 'dev', 'security', 'remote', 'market', 'fun']
function slugFor(url) {
  const p = url.replace(/^https:\/\/github\.com\//, '').replace(/\/+$/, '')
  const repo = p.split('/').slice(0, 2).join('/')
  const sub = p.includes('/tree/') ? p.split('/tree/')[1].replace(/^[^/]+\//, '') : null
  const base = repo.replaceAll('/', '__')
  return sub ? `${base}--${sub.replaceAll('/', '-')}` : base
}

describe('marketplace entry', () => {
  const files = readdirSync(join(ROOT, 'market'))

  test('one entry file, valid for the list, pointing at this package\'s repository', () => {
    assert.deepEqual(files.filter(f => !f.endsWith('.yml')), [], 'every entry ends .yml')
    assert.equal(files.length, 1)
    const entry = yaml.load(readFileSync(join(ROOT, 'market', files[0]), 'utf8'))
    assert.deepEqual(Object.keys(entry).filter(k => !['url', 'name', 'category', 'description', 'tarball'].includes(k)), [])
    assert.match(entry.url, /^https:\/\/github\.com\/[^/]+\/[^/]+$/)
    assert.equal(files[0], `${slugFor(entry.url)}.yml`, 'the filename is slugFor(url)')
    assert.equal(entry.name, entry.url.replace('https://github.com/', ''))
    assert.equal(entry.category, 'session')
    assert.ok(CAT_IDS.includes(entry.category))
    assert.deepEqual(Object.keys(entry.description).filter(k => !['en', 'zh'].includes(k)), [])
    for (const loc of ['en', 'zh']) {
      assert.equal(typeof entry.description[loc], 'string', `description.${loc}`)
      assert.ok(entry.description[loc].trim() && !entry.description[loc].includes('\n'), `description.${loc}: one non-empty line`)
    }
    assert.equal(entry.tarball, undefined)

    // The list links an npm package only when its repository points back at the listed repo.
    const repoUrl = (typeof pkg.repository === 'string' ? pkg.repository : pkg.repository.url)
      .replace(/^git\+/, '').replace(/\.git$/, '')
    assert.equal(repoUrl, entry.url)
    assert.equal(pkg.homepage.replace(/#.*$/, ''), entry.url)
    assert.equal(pkg.bugs.url, `${entry.url}/issues`)
    assert.ok(pkg.keywords.includes('dsh-plugin'))
  })
})

// ---------------------------------------------------------------------------------------------------------
// napi config and the loader

describe('napi config', () => {
  test('CLI v3 keys; binaryName and packageName agree with the generated loader for every target', async () => {
    const { readNapiConfig, parseTriple } = await import('@napi-rs/cli')
    for (const legacy of ['name', 'triples']) assert.equal(pkg.napi[legacy], undefined, `napi.${legacy} is a v2 key`)
    const config = await readNapiConfig(join(ROOT, 'package.json'))
    assert.equal(config.binaryName, pkg.name)
    assert.equal(config.packageName, pkg.name)
    const loader = readFileSync(join(ROOT, 'binding.cjs'), 'utf8')
    const expected = ['linux-x64-gnu', 'linux-arm64-gnu', 'darwin-x64', 'darwin-arm64', 'win32-x64-msvc']
    assert.deepEqual(pkg.napi.targets.map(t => parseTriple(t).platformArchABI).sort(), expected.sort())
    for (const p of expected) {
      assert.ok(loader.includes(`require('./${config.binaryName}.${p}.node')`), `loader loads the local ${p} addon`)
      assert.ok(loader.includes(`require('${config.packageName}-${p}')`), `loader falls back to the ${p} package`)
    }
  })
})

// ---------------------------------------------------------------------------------------------------------
// workflows

describe('GitHub workflows', () => {
  const load = name => yaml.load(readFileSync(join(ROOT, '.github', 'workflows', name), 'utf8'))
  const ci = load('ci.yml')
  const release = load('release.yml')

  test('ci.yml builds exactly napi.targets and tests each on Node 22 and 24', () => {
    const built = ci.jobs.build.strategy.matrix.include.map(e => e.target)
    assert.deepEqual([...built].sort(), [...pkg.napi.targets].sort(), '`napi artifacts` needs an artifact per target')
    const linux = ci.jobs.build.strategy.matrix.include.filter(e => e.target.includes('linux-gnu'))
    for (const e of linux) assert.match(e.flags, /--use-napi-cross/, `${e.target}: glibc 2.17 floor`)
    // What ships (bindings-*) is the binary the suites test: one napi build, no test-only features.
    const steps = ci.jobs.build.steps
    const builds = steps.filter(s => /napi build/.test(s.run ?? ''))
    assert.equal(builds.length, 1, 'one build: the tested binary is the shipped one')
    assert.doesNotMatch(builds[0].run, /--features/, 'no test-only exports')
    const uploads = steps.filter(s => String(s.uses).startsWith('actions/upload-artifact'))
    const shipped = uploads.find(s => s.with.name === 'bindings-${{ matrix.target }}')
    const tested = uploads.find(s => s.with.name === 'test-bindings-${{ matrix.target }}')
    assert.ok(shipped && tested, 'artifacts bindings-<target> (napi artifacts) and test-bindings-<target>')
    assert.equal(shipped.with.path, tested.with.path, 'the same file')
    assert.ok(steps.indexOf(shipped) > steps.indexOf(builds[0]))
    const downloaded = ci.jobs.test.steps.find(s => String(s.uses).startsWith('actions/download-artifact'))
    assert.equal(downloaded.with.name, 'test-bindings-${{ matrix.settings.target }}')
    const testedTargets = ci.jobs.test.strategy.matrix.settings.map(s => s.target)
    assert.deepEqual([...testedTargets].sort(), [...pkg.napi.targets].sort())
    assert.deepEqual(ci.jobs.test.strategy.matrix.node.map(String), ['22', '24'])
    assert.ok(ci.on.workflow_call !== undefined, 'release.yml reuses it')
  })

  test('release.yml: create-npm-dirs -> artifacts -> pre-publish -> npm publish --provenance', () => {
    assert.equal(release.jobs.ci.uses, './.github/workflows/ci.yml')
    const job = release.jobs.publish
    assert.deepEqual(job.needs, 'ci')
    assert.equal(job.permissions['id-token'], 'write')
    const runs = job.steps.map(s => s.run ?? '').join('\n')
    const order = ['napi create-npm-dirs', 'napi artifacts', 'napi pre-publish', 'npm publish']
    const at = order.map(cmd => runs.indexOf(cmd))
    assert.ok(at.every(i => i >= 0), `all of ${order.join(', ')}`)
    assert.deepEqual([...at].sort((a, b) => a - b), at, 'in this order')
    assert.match(runs, /pre-publish \$flags/)
    assert.match(runs, /flags="-t npm/)
    assert.match(runs, /--provenance/)
    const removal = runs.indexOf('rm -f ./*.node')
    assert.ok(removal > runs.indexOf('napi artifacts') && removal < runs.indexOf('npm publish'),
      'the root copies napi artifacts leaves must be removed before the root package is packed')
    const download = job.steps.find(s => String(s.uses).startsWith('actions/download-artifact'))
    assert.equal(download.with.pattern, 'bindings-*')
    assert.equal(download.with.path, 'artifacts')
  })

  test('no machine paths in the workflows, scripts or metadata', () => {
    const files = ['.github/workflows/ci.yml', '.github/workflows/release.yml', 'scripts/build-linux-gnu217.sh',
      'locale/en.json', 'locale/zh.json', 'package.json', ...readdirSync(join(ROOT, 'market')).map(f => `market/${f}`)]
    for (const f of files) assert.doesNotMatch(readFileSync(join(ROOT, f), 'utf8'), /\/work\/|\/tmp\/|\/root\//, f)
  })
})
