#!/usr/bin/env bash
# The timing model's speed beside DRAMSim3's on the same DRAMSim3-format
# streams (DRAMSim3's stock DDR4_8Gb_x8_2400.ini; nvmos's
# ddr4-2400-dramsim3 preset), end to end: each tool reads the text trace.
#
#   DRAMSIM3_DIR=/path/to/DRAMSim3 crates/memsys/peers/dramsim3_speed.sh [STREAMS_DIR]
#
# DRAMSIM3_DIR: a checkout of umd-memsys/DRAMSim3 built with cmake (its
# build/dramsim3main is run; nothing of it is copied into nvmos).
# STREAMS_DIR: where the streams are, written there by the gen_traces
# example first if missing (default: a temporary directory).
# NVMOS: the nvmos binary (default: target/release/nvmos, built if missing).
# Prints requests per CPU-second of each and the ratio: CPU time (user +
# sys) from getrusage of the child (cpu_seconds.py: microseconds, where
# time(1)'s 10 ms steps are a tenth of an nvmos run); nvmos's is the
# median of 5 runs, DRAMSim3's one run; a run that fails stops the script
# instead of reading as a time. DRAMSim3 runs 10.1 M cycles for the
# -light streams, 4.1 M for rand-8 and 10^6 for the saturated ones, and is
# credited with the requests it completed in them.
set -euo pipefail
cd "$(dirname "$0")/../../.."
script=dramsim3_speed.sh
# shellcheck source=peer_dirs.sh
source crates/memsys/peers/peer_dirs.sh
dramsim3_dir
stream_file=rand-sat.dramsim3.trace
# shellcheck source=common.sh
source crates/memsys/peers/common.sh "${1:-}"
printf "%-12s %12s %12s %8s\n" stream "nvmos M/s" "DRAMSim3 M/s" ratio
for s in seq-light rand-light mix-light rand-8 seq-sat rand-sat mix-sat stride-sat; do
    t="$streams/$s.dramsim3.trace"
    case $s in *-light) c=10100000 ;; rand-8) c=4100000 ;; *) c=1000000 ;; esac
    n=$(wc -l < "$t")
    times=""
    for i in 1 2 3 4 5; do
        x=$(cpu "$nv" memsys run --trace "$t" --json)
        times+="$x"$'\n'
    done
    nvt=$(printf "%s" "$times" | sort -n | sed -n 3p)
    d3t=$(cpu "$d3" "$ini" -c "$c" -t "$t" -o "$out")
    d3n=$(awk '/^num_reads_done|^num_writes_done/ {s += $3} END {print s}' "$out/dramsim3.txt")
    [[ -n "$d3n" && "$d3n" -gt 0 ]] || { echo "dramsim3_speed.sh: no request counts in DRAMSim3's output for $s" >&2; exit 1; }
    awk -v s="$s" -v a="$n" -v b="$nvt" -v c="$d3n" -v d="$d3t" 'BEGIN {
        if (b <= 0 || d <= 0) { printf "%-12s no CPU time measured\n", s; exit }
        ra = a / b / 1e6; rb = c / d / 1e6
        printf "%-12s %12.2f %12.3f %7.0fx\n", s, ra, rb, ra / rb }'
done
