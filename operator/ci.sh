#!/usr/bin/env bash
# Operator checks for CI (called by .ci/run). Idempotent; `--update` rewrites the generated
# files instead of failing on drift.
#  (a) crds/ and the chart's crds/ must equal `rmq-operator crd`; manifests/install.yaml
#      must equal the chart rendered with default values;
#  (b) a Python venv (default $HOME/.cache/rmq-operator-venv, override with
#      RMQ_OPERATOR_VENV) gets the pinned tools of operator/ci/requirements.txt, reinstalled
#      only when that file changes;
#  (c) operator/ci/validate.py lints and renders the chart with Helm v4's SDK and validates
#      every rendered object, every object in manifests/ and the builders' output for the
#      examples against the Kubernetes OpenAPI schemas and the generated CRD schemas, and
#      checks that NOTES.txt agrees with the docs on CRD upgrades;
#  (d) operator/ci/build_images_check.sh tests scripts/build-images.sh's prerequisite check
#      (the cluster-less steps of docs/kubernetes-quickstart.md: (c) and (d)).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
update=0
[[ "${1:-}" == "--update" ]] && update=1

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "== building rmq-operator"
cargo build -q -p operator --bin rmq-operator
target_dir="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')}"
bin="$target_dir/debug/rmq-operator"

drift=0
check() { # check <generated> <checked-in>
    if ! cmp -s "$1" "$2"; then
        if [[ $update == 1 ]]; then
            mkdir -p "$(dirname "$2")" && cp "$1" "$2" && echo "updated $2"
        else
            echo "FAIL $2 is stale (run operator/ci.sh --update):"
            diff -u "$2" "$1" | head -40 || true
            drift=1
        fi
    fi
}

echo "== (a) generated CRDs"
"$bin" crd > "$work/crds.yaml"
check "$work/crds.yaml" crds/rmq-rs.dev.yaml
check "$work/crds.yaml" charts/rmq-operator/crds/rmq-rs.dev.yaml

echo "== (b) Python tools"
venv="${RMQ_OPERATOR_VENV:-$HOME/.cache/rmq-operator-venv}"
req="operator/ci/requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum "$req" | cut -d' ' -f1)"
if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$want" ]]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    echo "$want" > "$stamp"
fi

echo "== (c) chart, manifests and builder output"
rendered=()
for example in manifests/examples/*.yaml; do
    out="$work/rendered-$(basename "$example")"
    "$bin" render "$example" > "$out"
    # Files with only Topics render nothing; validate.py needs objects.
    [[ -s "$out" ]] && rendered+=("$out")
done
"$venv/bin/python" operator/ci/validate.py \
    --chart charts/rmq-operator \
    --crds crds/rmq-rs.dev.yaml \
    --manifests manifests \
    --install-out "$work/install.yaml" \
    --rendered "${rendered[@]}"
check "$work/install.yaml" manifests/install.yaml

echo "== (d) image build script: prerequisite check"
operator/ci/build_images_check.sh || drift=1

if [[ $drift == 1 ]]; then
    exit 1
fi
echo "operator checks passed"
