#!/usr/bin/env bash
# The timing model beside Ramulator 2 on the same saturated Ramulator-format
# streams (seq-sat, rand-sat, mix-sat, stride-sat from gen_traces), both
# configurations, end to end: each tool reads the LoadStoreTrace text file.
#
#   RAMULATOR2_DIR=/path/to/ramulator2 crates/memsys/peers/ramulator2_speed.sh [STREAMS_DIR]
#
# RAMULATOR2_DIR: a checkout of CMU-SAFARI/ramulator2 (2.1) built with cmake
# and its Python bindings (python/ramulator/_ramulator*.so); it is run
# through its Python package, nothing of it is copied into nvmos.
# RAMULATOR2_PYTHON: the Python that imports it (default python3; needs
# PyYAML).
# STREAMS_DIR: where the streams are, written there by the gen_traces
# example first if missing (default: a temporary directory).
# NVMOS: the nvmos binary (default: target/release/nvmos, built if missing).
#
# Configurations (this folder; ramulator2_configs.py writes the YAML):
# stock = ramulator2-stock.yaml (DDR4_8Gb_x8 x 2 ranks, DDR4_2400U,
# GenericDDR + FRFCFS, Open rows, RoBaRaCoCh, AllBank refresh as shipped:
# both ranks at once every nREFI) against nvmos on
# ramulator2-ddr4-2400.toml (the same mapping and timings, tRFC 433 /
# tREFI 9364, its refreshes staggered over the ranks); matched =
# ramulator2-matched.yaml (NoRefresh, nCCDL = nCCDS, nRRDL = nRRDS,
# nWTRS = nWTRL) against nvmos with --no-refresh --no-bank-groups.
#
# Per stream and configuration: GB/s of each and the ratio (nvmos:
# bandwidth_gbs, first arrival to last data; Ramulator: requests served
# (column command issued) x 64 B over its controller cycles x tCK,
# checked against its own total_throughput_MBps); row hits % of each (row
# hits over column commands; Ramulator: row_hits over hits + misses +
# conflicts); million requests per CPU-second of each and the ratio.
# nvmos's CPU time (user + sys from getrusage, process start and parsing
# the trace included) is the median of 5 runs; Ramulator's is one run's
# CPU time of building the simulation (which reads the trace) and running
# it (Python start and imports excluded), credited with the requests it
# served. Ramulator stops when its front end has handed over the last
# request, with up to 96 (its read, write and active buffers) still in
# the controller; nvmos runs every request to the end of its data.
set -euo pipefail
cd "$(dirname "$0")/../../.."
peers=crates/memsys/peers
script=ramulator2_speed.sh
# shellcheck source=peer_dirs.sh
source "$peers/peer_dirs.sh"
ramulator2_dir
machine="$peers/ramulator2-ddr4-2400.toml"
stream_file=stride-sat.ramulator.trace
# shellcheck source=common.sh
source "$peers/common.sh" "${1:-}"
printf "%-8s %-11s %20s %16s %24s\n" config stream "GB/s nvmos / Ram2" "hits % nv / Ram2" "M req/CPU-s nv / Ram2"
for config in matched stock; do
    flags=()
    [[ $config == matched ]] && flags=(--no-refresh --no-bank-groups)
    for s in seq-sat rand-sat mix-sat stride-sat; do
        t="$streams/$s.ramulator.trace"
        [[ -f "$t" ]] || { echo "ramulator2_speed.sh: $t not found" >&2; exit 1; }
        n=$(wc -l < "$t")
        "$nv" memsys run --trace "$t" --format ramulator --machine "$machine" "${flags[@]}" --json > "$out/nvmos.json" || {
            echo "ramulator2_speed.sh: nvmos failed on $s ($config)" >&2
            exit 1
        }
        times=""
        for i in 1 2 3 4 5; do
            x=$(cpu "$nv" memsys run --trace "$t" --format ramulator --machine "$machine" "${flags[@]}" --json)
            times+="$x"$'\n'
        done
        nvt=$(printf "%s" "$times" | sort -n | sed -n 3p)
        PYTHONPATH="$RAMULATOR2_DIR/python" "$py" "$peers/ramulator2_run.py" "$peers/ramulator2-$config.yaml" "$t" > "$out/ram2.json" 2> "$out/ram2.err" || {
            echo "ramulator2_speed.sh: Ramulator 2 failed on $s ($config):" >&2
            tail -5 "$out/ram2.err" >&2
            exit 1
        }
        # Both outputs checked and the row printed by one parser: any
        # missing or inconsistent figure stops the script instead of
        # printing a wrong row.
        python3 - "$config" "$s" "$n" "$nvt" "$out/nvmos.json" "$out/ram2.json" << 'EOF'
import json, sys
config, s, n, nvt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def fail(msg):
    sys.exit(f"ramulator2_speed.sh: {s} ({config}): {msg}")
try:
    nv = json.load(open(sys.argv[5]))
    r = json.loads(open(sys.argv[6]).read().strip().splitlines()[-1])
except (ValueError, IndexError, OSError) as e:
    fail(f"cannot parse a tool's output: {e}")
try:
    nvt = float(nvt)
except ValueError:
    fail(f"no CPU time for nvmos ({nvt!r})")
for k in ("requests", "bandwidth_gbs", "row_hit_rate"):
    if not isinstance(nv.get(k), (int, float)):
        fail(f"no {k} in nvmos's JSON")
if nv["requests"] != n:
    fail(f"nvmos served {nv['requests']} requests of the trace's {n}")
sent = r["num_read_reqs"] + r["num_write_reqs"]
served = r["num_read_reqs_served"] + r["num_write_reqs_served"]
if sent != n:
    fail(f"Ramulator 2 took {sent} requests of the trace's {n}")
if r["num_read_reqs_forwarded"] or r["num_write_reqs_coalesced"]:
    fail("Ramulator 2 forwarded or coalesced requests: not the same work as nvmos")
# Still in the controller at the end: at most its 32-entry read and write
# buffers and its active buffer (one request per bank, 32 banks).
if not 0 < served <= n or n - served > 96 or r["cycles"] <= 0:
    fail(f"Ramulator 2 served {served} of {n} requests in {r['cycles']} cycles")
ram_gbs = served * 64 / (r["cycles"] * r["tCK_ps"] * 1e-3)
if abs(ram_gbs * 1e3 - r["total_throughput_MBps"]) > 1e-3 * ram_gbs * 1e3:
    fail(f"{ram_gbs:.3f} GB/s computed against Ramulator's own {r['total_throughput_MBps']} MB/s")
rows = r["row_hits"] + r["row_misses"] + r["row_conflicts"]
# Ramulator counts a request's row outcome at its first command, and
# serves it at its column command.
if not served <= rows <= sent:
    fail(f"Ramulator 2 counted {rows} row outcomes for {served} requests served of {sent}")
if nvt <= 0 or r["cpu_s"] <= 0:
    fail("a CPU time of zero")
nvs = n / nvt / 1e6
rs = served / r["cpu_s"] / 1e6
print(f"{config:<8} {s:<11} {nv['bandwidth_gbs']:6.2f} / {ram_gbs:5.2f} ({nv['bandwidth_gbs'] / ram_gbs:5.3f}) "
      f"{100 * nv['row_hit_rate']:6.2f} / {100 * r['row_hits'] / rows:6.2f} "
      f"{nvs:7.2f} / {rs:6.3f} ({nvs / rs:4.0f}x)")
EOF
    done
done
