# nodemedic images. Two targets from one build:
#   docker build --target detector -t nodemedic/detector:0.1.0 .
#   docker build --target drainer  -t nodemedic/drainer:0.1.0 .
#
# Measured sizes (2026-11-27, stripped: `strip = "symbols"` in the packages' profile overrides, checked by the
# image test; built with buildah from base images made locally from
# Debian's packages by tests/images/bases.sh, which CI builds and runs: see tests/tests/deploy/images.rs):
#   drainer binary 16.7 MB (the `drainer` profile, before PGO), image 42.4 MB (its distroless/cc-style base 25.7 MB:
#   glibc, libgcc, libstdc++, OpenSSL, CA certificates, tzdata).
#   detector binary 6.5 MB, image 106 MB: debian-slim (77.6 MB) plus systemd for journalctl (~22 MB),
#   which the journal input runs. Since 2026-12-02 the detector's image is the drainer's base (no
#   shell) plus journalctl and its libraries: 49.5 MB (the image test, 2026-12-02).
# The registry's own bases differ by a few MB (gcr.io's distroless/cc ~22 MB, debian:bookworm-slim ~75 MB).

# The base images, pinned by digest: a rebuild starts from the bytes that were reviewed, not from
# whatever a tag points at that day (the tag beside each says which it was). To move one: inspect
# the tag (`docker buildx imagetools inspect rust:1-bookworm`), review it, replace the digest. CI
# builds from bases it makes itself from Debian's packages (tests/images/bases.sh) and names them
# with these arguments (tests/tests/deploy/images.rs); tests/tests/deploy/image.rs checks each FROM
# is one of these arguments and each default is pinned.
ARG RUST_IMAGE=docker.io/library/rust:1-bookworm@sha256:93ce27a88655056a51dbdd8f5f2d7ddc071c7b0070fb288a37b5a285fc83971e
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
ARG DEBIAN_IMAGE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${RUST_IMAGE} AS build
WORKDIR /src
# Dependencies first, so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY common/Cargo.toml common/Cargo.toml
COPY detector/Cargo.toml detector/Cargo.toml
COPY drainer/Cargo.toml drainer/Cargo.toml
COPY tests/Cargo.toml tests/Cargo.toml
# Stub sources so cargo can read the manifests without the code: a src/ for every crate and a file for every
# [[bench]] each manifest declares (read from the manifests, so a new bench needs no edit here; a stub missing
# here fails `cargo fetch`, and tests/tests/deploy/image.rs runs these steps in CI). Only the platform being
# built for is fetched.
RUN for c in common detector drainer tests; do \
      mkdir -p $c/src $c/benches && echo 'fn main(){}' > $c/src/main.rs && touch $c/src/lib.rs; \
      for b in $(awk '/^\[\[bench\]\]/{s=1;next} /^\[/{s=0} s && $1=="name"{gsub(/"/,"",$3); print $3}' $c/Cargo.toml); do \
        echo 'fn main(){}' > $c/benches/$b.rs; \
      done; \
    done \
 && cargo fetch --locked --target "$(rustc -vV | sed -n 's/^host: //p')"
COPY . .
# Each binary with its own profile (Cargo.toml): the detector small (release), the drainer fast
# (`drainer`: each heartbeat it takes arrives alone, with its code cold), and built with
# profile-guided optimisation by build/pgo-drainer.sh: an instrumented build runs for about 80 s
# against a test API server on the build container's loopback, then the drainer is built again with
# that profile. It needs the toolchain's llvm-tools (added with rustup if missing, which needs the
# network); `--build-arg NODEMEDIC_PGO=off` builds the drainer without a profile (about a quarter
# more CPU per node update).
# The stage keeps the two binaries (in dist/) and not the builds' several GB of intermediate files,
# which would otherwise be one layer of each build in the builder's storage.
ARG NODEMEDIC_PGO=on
RUN cargo build --locked --release -p nodemedic-detector --bin detector \
 && NODEMEDIC_PGO=$NODEMEDIC_PGO sh build/pgo-drainer.sh \
 && t=${CARGO_TARGET_DIR:-target} && mkdir -p dist && cp $t/release/detector $t/shipped/drainer dist/ \
 && rm -rf target

FROM ${RUNTIME_IMAGE} AS drainer
COPY --from=build /src/dist/drainer /usr/local/bin/drainer
# One glibc malloc arena. The drainer runs on one runtime thread and decides a large round (the
# first, a resync) on a blocking-pool thread; a second arena there kept ~6 MiB more resident at
# 15,000 nodes (76.9 -> 70.6 MiB after sync, `scale` bench) for no gain: the threads rarely
# allocate at the same moment.
ENV MALLOC_ARENA_MAX=1
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/drainer"]
CMD ["run"]

# journalctl and the libraries it links, for the detector's journal input (it reads every journal
# file version the host writes, and needs no libsystemd in our binary); nothing else of systemd.
# And nsenter (util-linux), which the reboot and restart commands start with: it enters PID 1's
# namespaces and runs the host's own systemctl (`--reboot-command`, `--systemctl`); as uid 65534
# (the exec checks) it can enter nothing. Each library under its own name, in its directory with
# symbolic links resolved (/lib is /usr/lib in both images: a copied /lib would replace the base's link).
FROM ${DEBIAN_IMAGE} AS journalctl
RUN apt-get update \
 && apt-get install -y --no-install-recommends systemd \
 && mkdir -p /out \
 && for f in /usr/bin/journalctl /usr/bin/nsenter \
      $(for b in /usr/bin/journalctl /usr/bin/nsenter; do ldd "$b"; done \
          | awk '$3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' | sort -u); do \
      cp -L --parents "$(readlink -f "$(dirname "$f")")/$(basename "$f")" /out; \
    done

# No shell, no package manager: every shipped check is built into the detector (`detector probe`),
# so nothing in the image can run a script (an NPD custom plugin that is a shell script needs a
# shell added: docs/migrating-from-npd.md).
FROM ${RUNTIME_IMAGE} AS detector
COPY --from=journalctl /out/ /
COPY --from=build /src/dist/detector /usr/local/bin/detector
COPY config/rules /etc/nodemedic/rules
# Exec checks, off by default (config/README.md says what each needs).
COPY config/checks /etc/nodemedic/checks
# Root: /dev/kmsg, the host's journal and the checkpoint under /var/lib/nodemedic are root's; the
# checks drop to nobody (source::exec).
USER 0:0
WORKDIR /
ENTRYPOINT ["/usr/local/bin/detector"]
CMD ["run"]
