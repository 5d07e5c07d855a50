#!/usr/bin/env bash
# The one test command (README "Run all tests"; .ci/run calls exactly this).
# On a fresh machine it installs what it needs: Node 22 + pnpm + the pinned real DSH 0.1.0-rc.8 host
# (test/real-host/install-host.sh, into .cache/dsh-host), Debian's chromium (apt, for test/real-host-browser.test.mjs),
# the napi CLI and playwright-core (npm ci), then builds the addon
# and runs: Rust unit tests, the node suites (unit, contract host, real host).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
t0=$(date +%s)
# The read checkpoints (crates/store/src/checkpoint.rs) of every test's reads go to a folder of this run, not
# into the user's ~/.cache/dsh-session-mail (removed at the end).
DSH_SESSION_MAIL_CACHE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/dsh-session-mail-test-cache.XXXXXX")
export DSH_SESSION_MAIL_CACHE_DIR
trap 'rm -rf "$DSH_SESSION_MAIL_CACHE_DIR"' EXIT
# No test may send a packet to a public relay: the core refuses the human's choice of Iroh's public relays
# in every process started below (crates/link/src/store.rs; docs/machines.md "Network").
export DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1
step() { echo "== $* ($(( $(date +%s) - t0 )) s)"; }

step "host toolchain: Node 22, pnpm, DSH 0.1.0-rc.8"
eval "$(bash test/real-host/install-host.sh)"
export DSH_BIN DSH_NODE
NODE22=${DSH_NODE:-$(command -v node)}
NODE22_DIR=$(dirname "$NODE22")
export PATH="$NODE22_DIR:$PATH"
node --version

step "chromium for the browser suite (Debian's package; playwright-core ships no browser)"
if ! command -v chromium >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
chromium --version 2>/dev/null || true

step "npm ci (napi CLI, playwright-core)"
npm ci --no-audit --no-fund --loglevel=error

step "cargo test"
# (no backtrace: a failing test's own message stays inside the tail)
RUST_BACKTRACE=0 cargo test --workspace --quiet 2>&1 | tail -n 30

step "fuzz/ (its own workspace): rustfmt-clean, and its lockfile in step with the core's dependencies"
# fuzz/Cargo.lock goes stale whenever crates/core's dependency set changes, and cargo would then rewrite it
# on the next `cargo test` there; --locked fails here instead (no build: metadata only).
cargo fmt --check --manifest-path fuzz/Cargo.toml
cargo metadata --locked --format-version 1 --manifest-path fuzz/Cargo.toml >/dev/null

step "build the web client (esbuild: client/ -> lib/client.js) and type-check its source"
npm run --silent build:client
npm run --silent check:client

step "build the addon (profile ci)"
npm run --silent build:test >/dev/null

step "link the host peers for the node suites"
node scripts/link-host-peers.mjs

step "node suites"
node --test --test-concurrency=1 test/*.test.js test/*.test.mjs
step "all tests passed"
