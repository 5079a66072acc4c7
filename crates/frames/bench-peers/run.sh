#!/usr/bin/env bash
# Build and run the peer benchmark against the user's LLFree checkout.
# LLFREE_DIR: a checkout of luhsra/llfree-rs (its `core` crate is used);
# it is never copied into nvmos. BIN: bench-peers (default) or lazy-reuse.
# Its commit is passed on as LLFREE_REV (bench-peers --json records it).
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
# The LLFree commit, for the --json record (empty when not a git checkout).
LLFREE_REV=$(git -C "$LLFREE_DIR" rev-parse HEAD 2>/dev/null || true)
export LLFREE_REV
# Not cd-ing there: relative paths among the arguments (--json) stay the
# caller's.
here="$(cd "$(dirname "$0")" && pwd)"
bin="${BIN:-bench-peers}"
features=()
[[ "$bin" == lazy-reuse ]] && features=(--features lazy-reuse)
exec cargo run --manifest-path "$here/Cargo.toml" --release --bin "$bin" "${features[@]}" --config "patch.crates-io.llfree.path=\"$LLFREE_DIR/core\"" -- "$@"
