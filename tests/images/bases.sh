#!/usr/bin/env bash
# Usage: tests/images/bases.sh
# Makes, in buildah's local storage, the three base images the Dockerfile names, from Debian's packages
# and the Rust toolchain already on this machine (no registry is needed, only Debian's mirror):
#   docker.io/library/debian:bookworm-slim      mmdebstrap minbase, slimmed as the official image is
#                                              (no docs, man pages, locales; apt cleans its caches)
#   gcr.io/distroless/cc-debian12:nonroot       what distroless cc is made of: base-files, netbase,
#                                              tzdata, libc6, libgcc-s1, libstdc++6, libgomp1, libssl3,
#                                              CA certificates; user nonroot (65532); no shell
#   docker.io/library/rust:1-bookworm           the slim base plus gcc and libc6-dev, with this machine's
#                                              `rustc --print sysroot` (docs left out; llvm-tools
#                                              in it if installed) in /usr/local/rust
#                                              and its cargo registry cache, so `cargo fetch` needs no
#                                              download for what the workspace's tests already fetched
#                                              (remade when that cache changes; see below)
# An image that is already there is kept (labelled nodemedic.local-base with the Debian release and,
# for rust, the toolchain's version), so later runs on one machine start at the project's own build.
# Needs root (mmdebstrap, buildah), mmdebstrap, buildah, and network access to Debian's mirror.
set -euo pipefail

mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=bookworm
work=$(mktemp -d "${TMPDIR:-/tmp}/nodemedic-bases.XXXXXX")
trap 'rm -rf "$work"' EXIT

# What the official debian:*-slim images exclude and configure (debuerreotype --slimify, docker-*
# files in /etc/apt/apt.conf.d): keeps the detector's `apt-get install systemd` layer as small there.
slim=(
  --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/groff/*'
  --dpkgopt='path-exclude=/usr/share/info/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/linda/*' --dpkgopt='path-exclude=/usr/share/locale/*'
  --aptopt='Acquire::Languages "none"'
  --aptopt='APT::AutoRemove::SuggestsImportant "false"'
  --aptopt='Dir::Cache::pkgcache ""' --aptopt='Dir::Cache::srcpkgcache ""'
  --aptopt='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
  --aptopt='APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
)

have() { # image, label value
  [ "$(buildah inspect --type image --format '{{index .ImageAnnotations "nodemedic.local-base"}}' "$1" 2>/dev/null)" = "$2" ]
}

commit() { # directory or tarball, image, label, buildah config args...
  local from=$1 image=$2 label=$3; shift 3
  local c
  c=$(buildah from scratch)
  if [ -d "$from" ]; then buildah copy --quiet "$c" "$from" / >/dev/null; else buildah add --quiet "$c" "$from" / >/dev/null; fi
  buildah config --annotation "nodemedic.local-base=$label" "$@" "$c"
  buildah commit --quiet --rm "$c" "$image" >/dev/null
  echo "bases: made $image"
}

path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

if ! have docker.io/library/debian:bookworm-slim "$suite"; then
  mmdebstrap --quiet --variant=minbase --format=tar "${slim[@]}" "$suite" "$work/slim.tar" "$mirror"
  commit "$work/slim.tar" docker.io/library/debian:bookworm-slim "$suite" --env PATH=$path --cmd bash
fi

if ! have gcr.io/distroless/cc-debian12:nonroot "$suite"; then
  # extract: the packages' files only, no maintainer scripts, no shell; what their scripts would
  # have made (the CA bundle, the users) is written here, as distroless does.
  mmdebstrap --quiet --variant=extract --format=directory "${slim[@]:0:8}" \
    --include=base-files,netbase,tzdata,libc6,libgcc-s1,libstdc++6,libgomp1,libssl3,ca-certificates \
    "$suite" "$work/distroless" "$mirror"
  d=$work/distroless
  rm -rf "$d/var/cache/apt" "$d/var/lib/apt" "$d/etc/apt" "$d/usr/share/debconf" "$d/var/cache/debconf" \
    "$d/usr/bin/debconf"* "$d/usr/share/perl5"
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' > "$d/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' > "$d/etc/group"
  install -d -m 0700 -o 65532 -g 65532 "$d/home/nonroot"
  cat "$d"/usr/share/ca-certificates/mozilla/*.crt > "$d/etc/ssl/certs/ca-certificates.crt"
  commit "$d" gcr.io/distroless/cc-debian12:nonroot "$suite" --user 65532:65532 \
    --workingdir /home/nonroot --env PATH=$path --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
fi

sysroot=$(rustc --print sysroot)
toolchain=$(rustc -V | cut -d' ' -f2)
# The toolchain image (slow to make: Debian's minbase, gcc, the sysroot) is kept under a local name;
# the rust image is that plus the host's cargo registry (crate archives and index entries only, not
# the unpacked sources cargo re-creates), remade whenever the host's cache holds a different set of
# crates. So a dependency added to Cargo.lock, fetched on the host by the workspace's own build, is
# in the next image build too: the build container cannot download it (this machine reaches
# crates.io through a proxy only the host's CA bundle trusts).
tools=localhost/nodemedic/rust-toolchain:bookworm
# The drainer's build needs the toolchain's llvm-profdata (build/pgo-drainer.sh): a sysroot with the
# llvm-tools component makes another image.
tools_label=$suite-$toolchain
if [ -x "$sysroot/lib/rustlib/$(rustc -vV | sed -n 's/^host: //p')/bin/llvm-profdata" ]; then
  tools_label=$tools_label+llvm-tools
fi
if ! have "$tools" "$tools_label"; then
  mmdebstrap --quiet --variant=minbase --format=directory "${slim[@]}" --include=gcc,libc6-dev,ca-certificates \
    "$suite" "$work/rust" "$mirror"
  mkdir -p "$work/rust/usr/local/rust" "$work/rust/usr/local/cargo"
  tar -C "$sysroot" --exclude=./share/doc -cf - . | tar -C "$work/rust/usr/local/rust" -xf -
  commit "$work/rust" "$tools" "$tools_label" \
    --env PATH=/usr/local/cargo/bin:/usr/local/rust/bin:$path --env CARGO_HOME=/usr/local/cargo --cmd bash
fi

registry=${CARGO_HOME:-$HOME/.cargo}/registry
crates=none
if [ -d "$registry/cache" ]; then
  crates=$(cd "$registry/cache" && find . -name '*.crate' | LC_ALL=C sort | sha256sum | cut -c1-16)
fi
if ! have docker.io/library/rust:1-bookworm "$tools_label-$crates"; then
  c=$(buildah from --pull-never "$tools")
  if [ "$crates" != none ]; then
    mnt=$(buildah mount "$c")
    mkdir -p "$mnt/usr/local/cargo/registry"
    cp -a "$registry/cache" "$mnt/usr/local/cargo/registry/"
    [ -d "$registry/index" ] && cp -a "$registry/index" "$mnt/usr/local/cargo/registry/"
    buildah umount "$c" >/dev/null
  fi
  buildah config --annotation "nodemedic.local-base=$tools_label-$crates" "$c"
  buildah commit --quiet --rm "$c" docker.io/library/rust:1-bookworm >/dev/null
  echo "bases: made docker.io/library/rust:1-bookworm (crates $crates)"
fi
