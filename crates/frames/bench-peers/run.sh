#!/usr/bin/env bash
# Build and run the peer benchmark against the user's LLFree checkout.
# LLFREE_DIR: a checkout of luhsra/llfree-rs (its `core` crate is used);
# it is never copied into nvmos. BIN: bench-peers (default) or lazy-reuse.
# Arguments go to the program.
set -euo pipefail
if [[ -z "${LLFREE_DIR:-}" ]]; then
    echo "run.sh: set LLFREE_DIR to a checkout of luhsra/llfree-rs" >&2
    exit 2
fi
if [[ ! -f "$LLFREE_DIR/core/Cargo.toml" ]]; then
    echo "run.sh: $LLFREE_DIR/core/Cargo.toml not found: not an llfree-rs checkout" >&2
    exit 2
fi
cd "$(dirname "$0")"
bin="${BIN:-bench-peers}"
features=()
[[ "$bin" == lazy-reuse ]] && features=(--features lazy-reuse)
exec cargo run --release --bin "$bin" "${features[@]}" --config "patch.crates-io.llfree.path=\"$LLFREE_DIR/core\"" -- "$@"
