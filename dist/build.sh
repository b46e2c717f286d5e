#!/usr/bin/env bash
# Release archives of gpulab for Linux, runnable on glibc 2.28 (RHEL/Rocky 8,
# Debian 10, Ubuntu 20.04) and newer, for x86_64 and aarch64 (GH200, Jetson):
#
#   dist/build.sh                       # both targets
#   dist/build.sh x86_64                # one
#
# Each is cross-linked against glibc 2.28 by cargo-zigbuild (zig's libc
# stubs), so the machine that builds them may have any newer glibc. Needs:
#   cargo install --locked cargo-zigbuild
#   pip install ziglang                 # or zig 0.13+ on PATH
#   rustup target add aarch64-unknown-linux-gnu
#
# Writes target/dist/gpulab-VERSION-ARCH-linux-gnu.tar.gz and SHA256SUMS:
#   bin/gpulab
#   share/gpulab/assets/{recordings,watch-recordings,cards}/  (found beside the binary)
#   share/gpulab/gpulab.schema.json
#   share/man/man1/gpulab.1
#   share/bash-completion/completions/gpulab, share/zsh/site-functions/_gpulab,
#   share/fish/vendor_completions.d/gpulab.fish
#   share/doc/gpulab/  README, CHANGELOG, the licences, the font's licence and
#                      THIRD-PARTY-LICENSES.md (every crate in the binary)
# Unpack it anywhere (`tar -C /usr/local --strip-components=1 -xzf …`, or ~/.local).
# Archives are reproducible: sorted, owned by root, dated by the last commit.
set -euo pipefail
cd "$(dirname "$0")/.."

GLIBC=2.28
ALL=(x86_64 aarch64)
ARCHES=("${@:-${ALL[@]}}")
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
[ -n "$VERSION" ] || { echo "no version in Cargo.toml's [workspace.package]" >&2; exit 2; }
OUT=target/dist
EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH=$EPOCH

command -v cargo-zigbuild >/dev/null 2>&1 \
  || { echo "needs cargo-zigbuild: cargo install --locked cargo-zigbuild" >&2; exit 2; }
command -v zig >/dev/null 2>&1 || python3 -m ziglang version >/dev/null 2>&1 \
  || { echo "needs zig: pip install ziglang (or zig on PATH)" >&2; exit 2; }

mkdir -p "$OUT"
# The man page and completions come from a gpulab that runs here: the first
# archive's, when it is this machine's architecture, else a plain build.
here=""
for arch in "${ARCHES[@]}"; do
  case "$arch" in
    x86_64 | aarch64) ;;
    *) echo "unknown architecture $arch (x86_64 or aarch64)" >&2; exit 2 ;;
  esac
  triple="$arch-unknown-linux-gnu"
  if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx "$triple"; then
    echo "the Rust standard library for $triple is not installed: rustup target add $triple" >&2
    exit 2
  fi
  echo "== $triple, glibc $GLIBC"
  cargo zigbuild --release --locked --target "$triple.$GLIBC"
  bin="target/$triple/release/gpulab"
  # The embedded agent is loaded into other programs: it too must ask for no
  # newer glibc than the archive promises (readelf reads any architecture).
  agent=$(find "target/$triple/gpulab-agent" -path '*release/libgpulab_agent.so' | head -n1)
  newest=$(readelf -W --dyn-syms "$bin" "$agent" | grep -o 'GLIBC_[0-9.]*' | sort -Vu | tail -n1)
  echo "newest glibc symbol of gpulab and its agent: $newest"
  [ "$(printf '%s\n' "$newest" "GLIBC_$GLIBC" | sort -V | tail -n1)" = "GLIBC_$GLIBC" ] \
    || { echo "$bin or $agent needs $newest, newer than $GLIBC" >&2; exit 1; }
  [ "$arch" = "$(uname -m)" ] && here="$bin"
  name="gpulab-$VERSION-$arch-linux-gnu"
  stage="$OUT/$name"
  # Only this architecture's: an archive built before for the other stays.
  rm -rf "$stage" "$stage.tar.gz"
  install -Dm755 "$bin" "$stage/bin/gpulab"
  mkdir -p "$stage/share/gpulab/assets" "$stage/share/doc/gpulab"
  cp -r assets/recordings assets/watch-recordings assets/cards "$stage/share/gpulab/assets/"
  cp docs/gpulab.schema.json "$stage/share/gpulab/"
  cp README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE docs/THIRD-PARTY-LICENSES.md \
    "$stage/share/doc/gpulab/"
  cp assets/fonts/DejaVuSans.LICENSE "$stage/share/doc/gpulab/"
done
if [ -z "$here" ]; then
  cargo build --release --locked
  here=target/release/gpulab
fi
for arch in "${ARCHES[@]}"; do
  stage="$OUT/gpulab-$VERSION-$arch-linux-gnu"
  "$here" man | install -Dm644 /dev/stdin "$stage/share/man/man1/gpulab.1"
  "$here" completions bash | install -Dm644 /dev/stdin "$stage/share/bash-completion/completions/gpulab"
  "$here" completions zsh | install -Dm644 /dev/stdin "$stage/share/zsh/site-functions/_gpulab"
  "$here" completions fish | install -Dm644 /dev/stdin "$stage/share/fish/vendor_completions.d/gpulab.fish"
  find "$stage" -exec touch -h -d "@$EPOCH" {} +
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$EPOCH" \
    -C "$OUT" -cf - "$(basename "$stage")" | gzip -9n >"$stage.tar.gz"
done
(cd "$OUT" && sha256sum -- *.tar.gz >SHA256SUMS)
echo "== $OUT"
cat "$OUT/SHA256SUMS"
