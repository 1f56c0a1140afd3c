#!/usr/bin/env bash
# Regenerates grpc-api/src/generated/ from the vendored protos in grpc-api/proto/.
# The generator is an excluded crate (grpc-api/codegen) so protox stays out of the normal build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cargo run --quiet --manifest-path "$root/grpc-api/codegen/Cargo.toml" -- "$root/grpc-api"
rustfmt --edition 2024 "$root"/grpc-api/src/generated/*.rs
