#!/usr/bin/env bash
# The README's first command: build the plugin and run the demo in the real DSH host: one home, two sessions
# (scripts/demo.mjs), then two homes linked across "machines" on loopback (scripts/demo-machines.mjs).
# On a fresh machine it installs what it needs (Node 22, pnpm, DSH 0.1.0-rc.8 pinned; .cache/dsh-host).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
# the demo links on loopback only: the core refuses Iroh's public relays in every process it starts
export DSH_SESSION_MAIL_NO_PUBLIC_NETWORK=1
eval "$(bash test/real-host/install-host.sh)"
export PATH="$(dirname "$DSH_NODE"):$PATH"
npm ci --no-audit --no-fund --loglevel=error
npx napi build --platform --profile ci --js binding.cjs --dts binding.d.ts
npm run --silent build:client
node scripts/link-host-peers.mjs >/dev/null
node scripts/demo.mjs
exec node scripts/demo-machines.mjs
