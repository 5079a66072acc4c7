# Set-up shared by the peer speed scripts, sourced after they `cd` to the
# repository's root, with `script` naming the caller (for messages) and
# `stream_file` a stream file the caller reads. Sets:
#   nv       the nvmos binary: $NVMOS (refused, exit 2, unless an
#            executable file), else target/release/nvmos, built if missing;
#   out      a temporary directory, removed on exit;
#   streams  STREAMS_DIR (the script's first argument, passed here as
#            $1), else a directory under `out`; the streams are written
#            there by the gen_traces example when `stream_file` is missing;
# and defines `cpu`: the CPU seconds (user + sys) of a command, its output
# discarded, from getrusage (cpu_seconds.py); it fails, with the command's
# last error lines, when the command does.
if [[ -n "${NVMOS:-}" ]]; then
    nv="$NVMOS"
    [[ -f "$nv" && -x "$nv" ]] || { echo "$script: NVMOS=$nv is not an executable" >&2; exit 2; }
else
    nv=target/release/nvmos
    [[ -x "$nv" ]] || cargo build --release -p nvmos
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
streams="${1:-$out/streams}"
if [[ ! -f "$streams/$stream_file" ]]; then
    cargo run --release -q -p nvmos-memsys --example gen_traces "$streams" > /dev/null
fi
cpu() {
    python3 crates/memsys/peers/cpu_seconds.py "$out/err" "$@" || {
        echo "$script: failed: $*" >&2
        tail -5 "$out/err" >&2
        return 1
    }
}
