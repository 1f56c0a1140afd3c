# syntax=docker/dockerfile:1
# Images of rmq-rs: static (musl) binaries on an empty base, running as a non-root user.
#   docker build --target operator   -t rmq-rs/rmq-operator:0.1.0 .
#   docker build --target nameserver -t rmq-rs/rmq-nameserver:0.1.0 .
#   docker build --target broker     -t rmq-rs/rmq-broker:0.1.0 .
#   docker build --target toolbox    -t rmq-rs/rmqctl:0.1.0 .
# scripts/build-images.sh builds all four and loads them into kind or minikube.
# Each final stage holds one binary and nothing else: no shell, no package manager.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends musl-tools \
    && rm -rf /var/lib/apt/lists/* \
    && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
ENV CARGO_TARGET_DIR=/target
# One build stage per binary, so an image only needs its own crate to compile.
FROM build AS build-operator
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/target,id=rmq-target \
    cargo build --release --locked --target x86_64-unknown-linux-musl -p operator --bin rmq-operator \
    && install -D /target/x86_64-unknown-linux-musl/release/rmq-operator /out/rmq-operator

FROM build AS build-nameserver
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/target,id=rmq-target \
    cargo build --release --locked --target x86_64-unknown-linux-musl --bin rmq-nameserver \
    && install -D /target/x86_64-unknown-linux-musl/release/rmq-nameserver /out/rmq-nameserver

FROM build AS build-broker
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/target,id=rmq-target \
    cargo build --release --locked --target x86_64-unknown-linux-musl --bin rmq-broker \
    && install -D /target/x86_64-unknown-linux-musl/release/rmq-broker /out/rmq-broker

FROM build AS build-cli
RUN --mount=type=cache,target=/usr/local/cargo/registry --mount=type=cache,target=/target,id=rmq-target \
    cargo build --release --locked --target x86_64-unknown-linux-musl -p rmq-cli --bin rmqctl \
    && install -D /target/x86_64-unknown-linux-musl/release/rmqctl /out/rmqctl

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
