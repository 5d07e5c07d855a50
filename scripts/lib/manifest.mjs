// In-place edits of a profile's package.json: the installer owns two places in it — one key of
// `dependencies` and one item of `dsh.profile.bundles` (and each container when it created it) — and
// changes nothing else, byte for byte. The text is parsed by jsonc-parser (its node offsets tell where a
// member starts and ends); an edit is a splice that copies the layout of the neighbours, so that removing
// what was added gives the original bytes back. A UTF-8 BOM (Node's package.json reader accepts one) is
// kept. A place the installer edits that holds a duplicate key is refused: which copy a reader takes differs
// (JSON.parse keeps the last, others the first), so no edit of it can be right.

import { findNodeAtLocation, parseTree } from 'jsonc-parser'

const BOM = '\uFEFF'

export class ManifestShapeError extends Error {}

/** Split off a BOM; parse the body strictly (JSON.parse) and into a tree with offsets. */
export function parseManifest(text) {
  const bom = text.startsWith(BOM) ? BOM : ''
  const body = text.slice(bom.length)
  const value = JSON.parse(body) // throws SyntaxError on anything that is not plain JSON
  const errors = []
  const tree = parseTree(body, errors, { disallowComments: true, allowTrailingComma: false })
  if (tree === undefined || errors.length > 0) throw new SyntaxError('not plain JSON')
  return { bom, body, value, tree }
}

function duplicateCheck(node, where) {
  if (node?.type !== 'object') return
  const seen = new Set()
  for (const property of node.children ?? []) {
    const key = property.children[0].value
    if (seen.has(key)) throw new ManifestShapeError(`${JSON.stringify(key)} appears twice in ${where}`)
    seen.add(key)
  }
}

/** Refuse a duplicate key on the way to the places the installer edits (root, dsh, dsh.profile, dependencies). */
export function checkOwnedPlaces(parsed) {
  const { tree } = parsed
  duplicateCheck(tree, 'the top level')
  duplicateCheck(findNodeAtLocation(tree, ['dsh']), '"dsh"')
  duplicateCheck(findNodeAtLocation(tree, ['dsh', 'profile']), '"dsh.profile"')
  duplicateCheck(findNodeAtLocation(tree, ['dependencies']), '"dependencies"')
}

/** The indentation unit of the document (the first indented line), for a container the installer creates. */
function indentUnit(body) {
  const match = /\n([ \t]+)\S/.exec(body)
  return match ? match[1] : '  '
}

const eolOf = body => (body.includes('\r\n') ? '\r\n' : '\n')

/** The indentation of the line `offset` is on. */
function lineIndent(body, offset) {
  const start = body.lastIndexOf('\n', offset - 1) + 1
  return /^[ \t]*/.exec(body.slice(start))[0]
}

const splice = (body, from, to, insert) => body.slice(0, from) + insert + body.slice(to)

/** The text of a new value, laid out like a member at `childIndent` (multi-line when the neighbours are). */
function valueText(value, multiLine, childIndent, unit, eol) {
  if (!multiLine) return JSON.stringify(value).replace(/":/g, '": ').replace(/,"/g, ', "')
  return JSON.stringify(value, undefined, unit).replace(/\n/g, eol + childIndent)
}

/**
 * Append a member (`key` set: an object property; else an array item) as the last child of the container at
 * `path`, laid out like its siblings.
 */
function append(body, tree, path, key, value) {
  const container = path.length === 0 ? tree : findNodeAtLocation(tree, path)
  const children = container.children ?? []
  const unit = indentUnit(body)
  const eol = eolOf(body)
  let separator
  let at
  let closing = ''
  if (children.length >= 2) {
    const [prev, last] = children.slice(-2)
    separator = body.slice(prev.offset + prev.length, last.offset)
    at = last.offset + last.length
  } else if (children.length === 1) {
    const only = children[0]
    separator = ',' + body.slice(container.offset + 1, only.offset)
    at = only.offset + only.length
  } else {
    // An empty container: lay the member out as JSON.stringify would at this depth; `{}` / `[]` again when removed.
    const outer = lineIndent(body, container.offset)
    separator = eol + outer + unit
    closing = eol + outer
    at = container.offset + 1
    body = splice(body, at, container.offset + container.length - 1, '') // drop whitespace inside `{ }`
  }
  const multiLine = separator.includes('\n')
  const childIndent = multiLine ? separator.slice(separator.lastIndexOf('\n') + 1) : ''
  const text = valueText(value, multiLine, childIndent, unit, eol)
  const member = key === undefined ? text : `${JSON.stringify(key)}: ${text}`
  return splice(body, at, at, separator + member + closing)
}

/** Remove the child `index` of the container at `path`: the inverse of `append` when it was the last. */
function remove(body, tree, path, index) {
  const container = path.length === 0 ? tree : findNodeAtLocation(tree, path)
  const children = container.children
  const child = children[index]
  if (children.length === 1) return splice(body, container.offset + 1, container.offset + container.length - 1, '')
  if (index === children.length - 1) {
    const prev = children[index - 1]
    return splice(body, prev.offset + prev.length, child.offset + child.length, '')
  }
  return splice(body, child.offset, children[index + 1].offset, '')
}

const propertyIndex = (container, key) => (container?.children ?? []).findIndex(p => p.children[0].value === key)

/** Re-parse after each edit: offsets move. */
function edit(parsed, fn) {
  const body = fn(parsed.body, parsed.tree)
  return parseManifest(parsed.bom + body)
}

/** Set `dependencies[name] = spec`: replace the value in place, or append the key, or create `dependencies`. */
export function setDependency(parsed, name, spec) {
  const deps = findNodeAtLocation(parsed.tree, ['dependencies'])
  if (deps === undefined) return edit(parsed, (body, tree) => append(body, tree, [], 'dependencies', { [name]: spec }))
  const index = propertyIndex(deps, name)
  if (index === -1) return edit(parsed, (body, tree) => append(body, tree, ['dependencies'], name, spec))
  const valueNode = deps.children[index].children[1]
  return edit(parsed, body => splice(body, valueNode.offset, valueNode.offset + valueNode.length, JSON.stringify(spec)))
}

/** Remove `dependencies[name]`; the whole `dependencies` when `dropEmpty` and nothing else is left in it. */
export function removeDependency(parsed, name, dropEmpty) {
  const deps = findNodeAtLocation(parsed.tree, ['dependencies'])
  const index = propertyIndex(deps, name)
  if (index === -1) return parsed
  if (dropEmpty && deps.children.length === 1) {
    return edit(parsed, (body, tree) => remove(body, tree, [], propertyIndex(tree, 'dependencies')))
  }
  return edit(parsed, (body, tree) => remove(body, tree, ['dependencies'], index))
}

/** Append `name` to `dsh.profile.bundles`, creating the list when it is missing. */
export function appendBundle(parsed, name) {
  const bundles = findNodeAtLocation(parsed.tree, ['dsh', 'profile', 'bundles'])
  if (bundles === undefined) return edit(parsed, (body, tree) => append(body, tree, ['dsh', 'profile'], 'bundles', [name]))
  return edit(parsed, (body, tree) => append(body, tree, ['dsh', 'profile', 'bundles'], undefined, name))
}

/** Remove every `name` item from `dsh.profile.bundles`; the list itself when `dropEmpty` and it is left empty. */
export function removeBundle(parsed, name, dropEmpty) {
  let current = parsed
  for (;;) {
    const bundles = findNodeAtLocation(current.tree, ['dsh', 'profile', 'bundles'])
    const index = (bundles?.children ?? []).findIndex(item => item.value === name)
    if (index === -1) break
    if (dropEmpty && bundles.children.length === 1) {
      return edit(current, (body, tree) => remove(body, tree, ['dsh', 'profile'], propertyIndex(findNodeAtLocation(tree, ['dsh', 'profile']), 'bundles')))
    }
    current = edit(current, (body, tree) => remove(body, tree, ['dsh', 'profile', 'bundles'], index))
  }
  return current
}

export const textOf = parsed => parsed.bom + parsed.body
