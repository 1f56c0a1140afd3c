# syntax=docker/dockerfile:1
# Images of rmq-rs: static (musl) binaries on an empty base, running as a non-root user,
# for linux/amd64 and linux/arm64. Needs BuildKit (docker buildx; the `RUN --mount` caches
# and TARGETARCH come from it). scripts/build-images.sh checks for it, builds all four for
# your machine's platform (or --platform ...) and loads them into kind or minikube:
#   docker buildx build --target operator   -t rmq-rs/rmq-operator:0.1.0   --load .
#   docker buildx build --target nameserver -t rmq-rs/rmq-nameserver:0.1.0 --load .
#   docker buildx build --target broker     -t rmq-rs/rmq-broker:0.1.0     --load .
#   docker buildx build --target toolbox    -t rmq-rs/rmqctl:0.1.0         --load .
# Each final stage holds one binary and nothing else: no shell, no package manager.
#
# The build stage runs on the target platform itself (per-architecture build): on an
# arm64 machine (Apple Silicon, Graviton) arm64 builds natively; a foreign platform runs
# under QEMU emulation (docker's binfmt), which works but is several times slower. The
# musl target is chosen from BuildKit's TARGETARCH, so the same file serves both.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
ARG TARGETARCH
RUN case "${TARGETARCH:?TARGETARCH is unset: build with BuildKit (docker buildx build)}" in \
        amd64) echo x86_64-unknown-linux-musl ;; \
        arm64) echo aarch64-unknown-linux-musl ;; \
        *) echo "unsupported TARGETARCH=${TARGETARCH} (linux/amd64 and linux/arm64 are)" >&2; exit 1 ;; \
    esac > /rust-target \
    && apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add "$(cat /rust-target)"
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/target
# One build stage per binary, so an image only needs its own crate to compile. The caches
# are per architecture: one target dir never mixes two platforms' artifacts.
FROM build AS build-operator
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry,id=cargo-registry-${TARGETARCH} \
    --mount=type=cache,target=/target,id=rmq-target-${TARGETARCH} \
    t="$(cat /rust-target)" \
    && cargo build --release --locked --target "$t" -p operator --bin rmq-operator \
    && install -D "/target/$t/release/rmq-operator" /out/rmq-operator

FROM build AS build-nameserver
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry,id=cargo-registry-${TARGETARCH} \
    --mount=type=cache,target=/target,id=rmq-target-${TARGETARCH} \
    t="$(cat /rust-target)" \
    && cargo build --release --locked --target "$t" --bin rmq-nameserver \
    && install -D "/target/$t/release/rmq-nameserver" /out/rmq-nameserver

FROM build AS build-broker
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry,id=cargo-registry-${TARGETARCH} \
    --mount=type=cache,target=/target,id=rmq-target-${TARGETARCH} \
    t="$(cat /rust-target)" \
    && cargo build --release --locked --target "$t" --bin rmq-broker \
    && install -D "/target/$t/release/rmq-broker" /out/rmq-broker

FROM build AS build-cli
ARG TARGETARCH
RUN --mount=type=cache,target=/usr/local/cargo/registry,id=cargo-registry-${TARGETARCH} \
    --mount=type=cache,target=/target,id=rmq-target-${TARGETARCH} \
    t="$(cat /rust-target)" \
    && cargo build --release --locked --target "$t" -p rmq-cli --bin rmqctl \
    && install -D "/target/$t/release/rmqctl" /out/rmqctl

# Writable paths (/var/lib/rocketmq, /var/log/rocketmq, /tmp) are volumes mounted by the
# operator, so the root filesystem stays read-only.
FROM scratch AS operator
COPY --from=build-operator /out/rmq-operator /rmq-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/rmq-operator"]
CMD ["run"]

FROM scratch AS nameserver
COPY --from=build-nameserver /out/rmq-nameserver /usr/local/bin/rmq-nameserver
USER 65532:65532
ENV HOME=/var/lib/rocketmq
EXPOSE 9876 8080
ENTRYPOINT ["/usr/local/bin/rmq-nameserver"]

FROM scratch AS broker
COPY --from=build-broker /out/rmq-broker /usr/local/bin/rmq-broker
USER 65532:65532
ENV HOME=/var/lib/rocketmq
EXPOSE 10911 10912 8080
ENTRYPOINT ["/usr/local/bin/rmq-broker"]

# The operators' toolbox: rmqctl alone (the broker image has no shell to exec into).
#   kubectl -n $NS run rmqctl --rm -it --restart=Never --image rmq-rs/rmqctl:0.1.0 -- -n $NAMESRV cluster list
FROM scratch AS toolbox
COPY --from=build-cli /out/rmqctl /usr/local/bin/rmqctl
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/rmqctl"]
