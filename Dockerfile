# The cftunnel operator image, for docker/podman users:
#
#   docker build -t ghcr.io/cftunnel/cftunnel:0.1.0 .
#
# The final image holds one statically linked binary and nothing else: no shell, no libc, no CA
# bundle (the Cloudflare client carries its trust roots compiled in). It runs as a numeric
# non-root user, so `runAsNonRoot: true` and a read-only root filesystem work unchanged.
#
# scripts/build-image.sh builds the same image (same binary path, user, entrypoint) without a
# registry or a container daemon; tests/image.rs checks that both agree.

FROM docker.io/library/rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY crates crates
COPY manifests manifests
# glibc linked statically (`crt-static`): the scratch image has no loader and no libraries.
# --target keeps these flags off build scripts and proc macros.
RUN triple="$(uname -m)-unknown-linux-gnu" \
    && RUSTFLAGS="-C target-feature=+crt-static" \
       cargo build --release --locked --target "$triple" -p cftunnel --bin cftunnel \
    && install -D -m 0755 "target/$triple/release/cftunnel" /out/usr/local/bin/cftunnel

FROM scratch
COPY --from=build /out/usr/local/bin/cftunnel /usr/local/bin/cftunnel
LABEL org.opencontainers.image.title="cftunnel" \
      org.opencontainers.image.source="https://github.com/cftunnel/cftunnel" \
      org.opencontainers.image.licenses="Apache-2.0"
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/cftunnel"]
