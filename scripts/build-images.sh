#!/usr/bin/env bash
# Builds the four images with the names the chart and the operator default to
# (rmq-rs/rmq-operator, rmq-rs/rmq-nameserver, rmq-rs/rmq-broker, plus the rmq-rs/rmqctl
# toolbox), tagged with the workspace version, then pushes or loads them:
#
#   scripts/build-images.sh                       # build only
#   scripts/build-images.sh --kind [cluster]      # kind load docker-image
#   scripts/build-images.sh --minikube            # minikube image load
#   REGISTRY=registry.example:5000 scripts/build-images.sh --push
#
# With REGISTRY set, images are named $REGISTRY/rmq-rs/...; install the chart with
# --set image.repository=$REGISTRY/rmq-rs/rmq-operator and set the Broker/NameServer
# `image` fields to match.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)"
PREFIX="${REGISTRY:+$REGISTRY/}rmq-rs"
TARGETS=(operator:rmq-operator nameserver:rmq-nameserver broker:rmq-broker toolbox:rmqctl)

images=()
for t in "${TARGETS[@]}"; do
  target="${t%%:*}" name="${t#*:}"
  image="$PREFIX/$name:$VERSION"
  docker build --target "$target" -t "$image" "$ROOT"
  images+=("$image")
done

case "${1:-}" in
  --kind) for i in "${images[@]}"; do kind load docker-image "$i" --name "${2:-kind}"; done ;;
  --minikube) for i in "${images[@]}"; do minikube image load "$i"; done ;;
  --push) for i in "${images[@]}"; do docker push "$i"; done ;;
  "") ;;
  *) echo "unknown option $1 (--kind [cluster], --minikube, --push)" >&2; exit 2 ;;
esac
printf '%s\n' "${images[@]}"
