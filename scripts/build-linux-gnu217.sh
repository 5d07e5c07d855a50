#!/usr/bin/env bash
# Build the Linux glibc addon with a glibc 2.17 floor (the same floor napi-rs' --use-napi-cross gives),
# through zig: `cargo zigbuild --target <triple>.2.17`. For a machine where the napi cross toolchain
# is not usable (the napi CLI's --use-napi-cross needs Node >= 22.20). CI's release workflow uses
# --use-napi-cross instead; both give the same floor.
#
#   bash scripts/build-linux-gnu217.sh [x64|arm64] [OUT_DIR]
#
# Writes OUT_DIR/dsh-session-mail.linux-<arch>-gnu.node (OUT_DIR defaults to the repository root) and
# fails unless the highest GLIBC_* symbol version it needs is <= 2.17.
#
# Needs: cargo, python3 (for zig from PyPI `ziglang`), objdump (binutils). Installs, when missing:
#   zig           into a venv at $ZIG_VENV (default <repo>/.cache/zig-venv, gitignored)
#   cargo-zigbuild with `cargo install` (about 3 minutes, once)
#   the rustup target for arm64
# Respects CARGO_TARGET_DIR (default <repo>/target).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
ARCH=${1:-x64}
OUT_DIR=${2:-$ROOT}
GLIBC_FLOOR=2.17
BINARY_NAME=$(node -p "require('$ROOT/package.json').napi.binaryName")
LIB_NAME=$(awk '/^\[/{lib=($0=="[lib]")} lib && /^name *=/{gsub(/^name *= *"|".*$/,""); print}' "$ROOT/Cargo.toml")
case "$ARCH" in
  x64) TRIPLE=x86_64-unknown-linux-gnu ;;
  arm64) TRIPLE=aarch64-unknown-linux-gnu ;;
  *) echo "build-linux-gnu217: unknown arch '$ARCH' (x64 or arm64)" >&2; exit 2 ;;
esac
[ -n "$LIB_NAME" ] || { echo "build-linux-gnu217: no [lib] name in Cargo.toml" >&2; exit 1; }
say() { echo "build-linux-gnu217: $*" >&2; }

# zig: on PATH, or from PyPI `ziglang` in a venv (cargo-zigbuild also finds `python3 -m ziglang`).
if ! command -v zig >/dev/null 2>&1; then
  ZIG_VENV=${ZIG_VENV:-$ROOT/.cache/zig-venv}
  if [ ! -x "$ZIG_VENV/bin/python3" ] || ! "$ZIG_VENV/bin/python3" -c 'import ziglang' 2>/dev/null; then
    say "installing zig (PyPI ziglang) into $ZIG_VENV"
    python3 -m venv "$ZIG_VENV"
    "$ZIG_VENV/bin/pip" install --quiet --disable-pip-version-check ziglang
  fi
  mkdir -p "$ZIG_VENV/zig-bin"
  printf '#!/bin/sh\nexec "%s" -m ziglang "$@"\n' "$ZIG_VENV/bin/python3" > "$ZIG_VENV/zig-bin/zig"
  chmod +x "$ZIG_VENV/zig-bin/zig"
  export PATH="$ZIG_VENV/zig-bin:$PATH"
fi
say "zig $(zig version)"

if ! cargo zigbuild --help >/dev/null 2>&1; then
  say "installing cargo-zigbuild (cargo install, a few minutes)"
  cargo install --locked cargo-zigbuild
fi
if ! rustup target list --installed 2>/dev/null | grep -qx "$TRIPLE"; then
  rustup target add "$TRIPLE"
fi

cd "$ROOT"
cargo zigbuild --release --target "$TRIPLE.$GLIBC_FLOOR"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
SO="$TARGET_DIR/$TRIPLE/release/lib$LIB_NAME.so"
OUT="$OUT_DIR/$BINARY_NAME.linux-$ARCH-gnu.node"
mkdir -p "$OUT_DIR"
cp "$SO" "$OUT"

# The proof: the highest versioned glibc symbol the addon needs.
# objdump -T as in the docs; readelf reads any ELF machine (a host objdump may not know aarch64).
symbols=$(objdump -T "$OUT" 2>/dev/null || readelf -W --dyn-syms "$OUT")
highest=$(printf '%s\n' "$symbols" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
say "$OUT: $(du -h "$OUT" | cut -f1), highest required ${highest:-none}"
if [ -n "$highest" ] && [ "$(printf '%s\n%s\n' "${highest#GLIBC_}" "$GLIBC_FLOOR" | sort -V | tail -1)" != "$GLIBC_FLOOR" ]; then
  echo "build-linux-gnu217: $OUT needs $highest, above the $GLIBC_FLOOR floor" >&2
  exit 1
fi
echo "$OUT"
