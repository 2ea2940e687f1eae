#!/bin/sh
# Usage: build/pgo-drainer.sh          (from the workspace root; the Dockerfile runs it)
# Builds the drainer as the image ships it, into $CARGO_TARGET_DIR/shipped/drainer (target/ by
# default), with profile-guided optimisation:
#   1. the `drainer` profile with -Cprofile-generate (target/pgo/gen),
#   2. `pgo-train` (tests/src/bin/pgo-train.rs) runs that drainer for about 80 s on the test API
#      server (127.0.0.1 only): a fleet's status updates one at a time and in bursts, cordons, drains,
#      metrics scrapes, a periodic resync; then SIGTERM, which writes the profile,
#   3. llvm-profdata merges it (target/pgo/drainer.profdata),
#   4. the `drainer` profile again with -Cprofile-use (target/pgo/use).
# Why: each kubelet status update reaches the drainer alone and finds the code of the HTTP client,
# kube's watch and the decoder cold; the profile packs that path into fewer cache lines and pages.
# At 500 and 5,000 nodes the scale bench's CPU per update went from medians of 121 and 122 us to
# 93 and 87 us (2026-11-26; docs/benchmarks.md has the shipped figures).
#
# Needs llvm-profdata of the LLVM rustc uses: the toolchain's llvm-tools component (added with rustup
# when it is missing and rustup is there), or LLVM_PROFDATA naming one of the same major version.
# NODEMEDIC_PGO=off builds without a profile (plain `cargo build --profile drainer`): about a quarter
# more CPU per update, for a machine without llvm-tools. Steps 1 and 2 are skipped when the
# instrumented drainer has not changed since its profile was made.
set -eu

target=${CARGO_TARGET_DIR:-target}
mkdir -p "$target/shipped"
out=$target/shipped/drainer

if [ "${NODEMEDIC_PGO:-on}" = off ]; then
  echo "pgo-drainer: NODEMEDIC_PGO=off: the drainer is built without a profile" >&2
  cargo build --locked --profile drainer -p nodemedic-drainer --bin drainer
  cp "$target/drainer/drainer" "$out"
  exit 0
fi

host=$(rustc -vV | sed -n 's/^host: //p')
llvm=$(rustc -vV | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
profdata=${LLVM_PROFDATA:-$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata}
if [ -z "${LLVM_PROFDATA:-}" ] && ! [ -x "$profdata" ] && command -v rustup >/dev/null 2>&1; then
  rustup component add llvm-tools >&2 || true
fi
if ! [ -x "$profdata" ]; then
  echo "pgo-drainer: error: no llvm-profdata at $profdata. Add the toolchain's: rustup component add llvm-tools;" >&2
  echo "  or name one of LLVM $llvm with LLVM_PROFDATA=...; or build without a profile: NODEMEDIC_PGO=off" >&2
  exit 1
fi
# A profile written by another LLVM cannot be read, and the error says little; say it here.
if ! "$profdata" --version | grep -q "LLVM version $llvm\."; then
  echo "pgo-drainer: error: $profdata is not LLVM $llvm (rustc's): $("$profdata" --version | grep 'LLVM version')" >&2
  exit 1
fi

# --target: the flags then reach the drainer's code and its dependencies, not build scripts and
# proc macros (which would write profiles of their own as the build runs them).
pgo=$(mkdir -p "$target/pgo" && cd "$target/pgo" && pwd)
build() { # target dir, rustflags
  RUSTFLAGS="${RUSTFLAGS:-} $2" cargo build --locked --profile drainer -p nodemedic-drainer \
    --bin drainer --target "$host" --target-dir "$1"
}

build "$pgo/gen" "-Cprofile-generate=$pgo/raw"
gen=$pgo/gen/$host/drainer/drainer
if ! [ -s "$pgo/drainer.profdata" ] || [ "$gen" -nt "$pgo/drainer.profdata" ]; then
  cargo build --locked -p nodemedic-tests --bin pgo-train
  rm -rf "$pgo/raw"
  "$target/debug/pgo-train" "$gen" "$pgo/raw"
  "$profdata" merge -o "$pgo/drainer.profdata" "$pgo/raw"
fi
build "$pgo/use" "-Cprofile-use=$pgo/drainer.profdata"
cp "$pgo/use/$host/drainer/drainer" "$out"
echo "pgo-drainer: $out built with the profile $pgo/drainer.profdata" >&2
