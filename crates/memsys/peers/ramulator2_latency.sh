#!/usr/bin/env bash
# The timing model's read latency below saturation beside Ramulator 2's,
# on the same streams (seq-light, rand-light, mix-light: a request offered
# every 20 memory cycles; rand-8: every 8), in both configurations:
#
#   RAMULATOR2_DIR=/path/to/ramulator2 crates/memsys/peers/ramulator2_latency.sh [STREAMS_DIR]
#
# Both tools run the same LoadStoreTrace file with its front end offering
# one request every N memory cycles and holding it until the controller
# takes it (Ramulator: ramulator2_run.py's CYCLES; nvmos: --format
# ramulator --offer-every N), nvmos on ramulator2-ddr4-2400.toml (stock,
# against ramulator2-stock.yaml) and with --no-refresh --no-bank-groups
# (matched, against ramulator2-matched.yaml).
#
# Per stream and configuration: the mean read latency of each tool in
# memory cycles (Ramulator's avg_read_latency, from a request entering
# the controller to its data; nvmos's read_latency, counted the same
# way), nvmos's difference in per cent, and whether it is within
# TOLERANCE_PCT (default 4.5). Ramulator stops when its front end has
# handed over the last request, so the few reads still inside then are
# not in its mean. The script stops when Ramulator did not take every
# request; exits 1 when a row is outside the tolerance, after printing
# them all. RAMULATOR2_DIR, RAMULATOR2_PYTHON, STREAMS_DIR and NVMOS as
# for ramulator2_speed.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
peers=crates/memsys/peers
script=ramulator2_latency.sh
# shellcheck source=peer_dirs.sh
source "$peers/peer_dirs.sh"
ramulator2_dir
machine="$peers/ramulator2-ddr4-2400.toml"
stream_file=rand-8.ramulator.trace
tolerance="${TOLERANCE_PCT:-4.5}"
# shellcheck source=common.sh
source "$peers/common.sh" "${1:-}"
printf "%-8s %-11s %12s %12s %8s\n" config stream "nvmos cyc" "Ram2 cyc" "diff %"
outside=0
for config in stock matched; do
    flags=()
    [[ $config == matched ]] && flags=(--no-refresh --no-bank-groups)
    for s in seq-light rand-light mix-light rand-8; do
        t="$streams/$s.ramulator.trace"
        [[ -f "$t" ]] || { echo "$script: $t not found" >&2; exit 1; }
        case $s in rand-8) every=8 ;; *) every=20 ;; esac
        "$nv" memsys run --trace "$t" --format ramulator --offer-every "$every" --machine "$machine" "${flags[@]}" --json > "$out/nvmos.json" || {
            echo "$script: nvmos failed on $s ($config)" >&2
            exit 1
        }
        PYTHONPATH="$RAMULATOR2_DIR/python" "$py" "$peers/ramulator2_run.py" "$peers/ramulator2-$config.yaml" "$t" "$every" > "$out/ram2.json" 2> "$out/ram2.err" || {
            echo "$script: Ramulator 2 failed on $s ($config):" >&2
            tail -5 "$out/ram2.err" >&2
            exit 1
        }
        # Exit 3: outside the tolerance (noted, the rest still run); any
        # other failure: a figure missing or inconsistent, which stops.
        rc=0
        python3 - "$config" "$s" "$(wc -l < "$t")" "$tolerance" "$out/nvmos.json" "$out/ram2.json" << 'PY' || rc=$?
import json, sys
config, s, n, tol = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
def fail(msg):
    print(f"ramulator2_latency.sh: {s} ({config}): {msg}", file=sys.stderr)
    sys.exit(2)
try:
    nv = json.load(open(sys.argv[5]))
    r = json.loads(open(sys.argv[6]).read().strip().splitlines()[-1])
except (ValueError, IndexError, OSError) as e:
    fail(f"cannot parse a tool's output: {e}")
if nv.get("requests") != n:
    fail(f"nvmos served {nv.get('requests')} requests of the trace's {n}")
if r["num_read_reqs"] + r["num_write_reqs"] != n:
    fail(f"Ramulator 2 took {r['num_read_reqs'] + r['num_write_reqs']} requests of the trace's {n}")
a, b = nv["read_latency"]["mean"], r["avg_read_latency"]
if not b > 0:
    fail(f"Ramulator 2's mean read latency is {b}")
d = 100 * (a - b) / b
ok = -tol <= d <= tol
print(f"{config:<8} {s:<11} {a:12.2f} {b:12.2f} {d:+7.2f}{'' if ok else '  outside'}")
sys.exit(0 if ok else 3)
PY
        case $rc in 0) ;; 3) outside=1 ;; *) exit 1 ;; esac
    done
done
echo "tolerance: ${tolerance} % of Ramulator 2's latency"
exit "$outside"
