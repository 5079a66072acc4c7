#!/usr/bin/env bash
# The timing model's read latency below saturation beside DRAMSim3's, on
# the same DRAMSim3-format streams (seq-light, rand-light, mix-light: one
# request every 20 cycles; rand-8: one every 8), in both configurations:
#
#   DRAMSIM3_DIR=/path/to/DRAMSim3 crates/memsys/peers/dramsim3_latency.sh [STREAMS_DIR]
#
# stock: DRAMSim3's DDR4_8Gb_x8_2400.ini as shipped against nvmos's
# ddr4-2400-dramsim3 preset; matched: the same ini with refresh pushed
# past the run (tREFI 10^9) and one tCCD/tRRD/tWTR for all bank groups
# (tCCD_L = tCCD_S, tRRD_L = tRRD_S, tWTR_S = tWTR_L), against nvmos
# with --no-refresh --no-bank-groups. The matched ini is written into a
# temporary directory, never into the checkout.
#
# Per stream and configuration: the mean read latency of each tool in
# memory cycles (DRAMSim3's average_read_latency; nvmos's read_latency,
# counted the same way, from entering the controller's queue to the end
# of the data), nvmos's difference in per cent, and whether it is within
# TOLERANCE_PCT (default 4.5). DRAMSim3 must complete every read of the
# stream in its cycles (its reader adds the file's last line twice, so
# one more is allowed), else the script stops. Exits 1 when a row is
# outside the tolerance, after printing them all.
# DRAMSIM3_DIR, STREAMS_DIR and NVMOS as for dramsim3_speed.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
script=dramsim3_latency.sh
# shellcheck source=peer_dirs.sh
source crates/memsys/peers/peer_dirs.sh
dramsim3_dir
stream_file=rand-8.dramsim3.trace
tolerance="${TOLERANCE_PCT:-4.5}"
# shellcheck source=common.sh
source crates/memsys/peers/common.sh "${1:-}"
matched="$out/matched.ini"
awk -F' = ' '
    $1 == "tCCD_S" { ccd = $2 } $1 == "tRRD_S" { rrd = $2 } $1 == "tWTR_L" { wtr = $2 }
    { line[NR] = $0; key[NR] = $1 }
    END {
        for (i = 1; i <= NR; i++) {
            if (key[i] == "tREFI") print "tREFI = 1000000000"
            else if (key[i] == "tCCD_L") print "tCCD_L = " ccd
            else if (key[i] == "tRRD_L") print "tRRD_L = " rrd
            else if (key[i] == "tWTR_S") print "tWTR_S = " wtr
            else print line[i]
        }
    }' "$ini" > "$matched"
for k in "tREFI = 1000000000" "tCCD_L = " "tRRD_L = " "tWTR_S = "; do
    grep -q "^$k" "$matched" || { echo "$script: $ini has no ${k%% =*} line to match" >&2; exit 2; }
done
printf "%-8s %-11s %12s %12s %8s\n" config stream "nvmos cyc" "DRAMSim3 cyc" "diff %"
outside=0
for config in stock matched; do
    if [[ $config == stock ]]; then cfg="$ini"; flags=(); else cfg="$matched"; flags=(--no-refresh --no-bank-groups); fi
    for s in seq-light rand-light mix-light rand-8; do
        t="$streams/$s.dramsim3.trace"
        case $s in *-light) c=10100000 ;; rand-8) c=4100000 ;; esac
        reads=$(grep -c " READ " "$t")
        nvl=$("$nv" memsys run --trace "$t" "${flags[@]}" --json |
            python3 -c 'import json, sys; print(json.load(sys.stdin)["read_latency"]["mean"])')
        rm -rf "$out/d3" && mkdir "$out/d3"
        "$d3" "$cfg" -c "$c" -t "$t" -o "$out/d3" > "$out/err" 2>&1 || {
            echo "$script: DRAMSim3 failed on $s ($config)" >&2; tail -5 "$out/err" >&2; exit 1; }
        done_reads=$(awk '/^num_reads_done/ {s += $3} END {print s + 0}' "$out/d3/dramsim3.txt")
        # DRAMSim3's trace reader tests eof before reading, so it adds
        # the last line twice: one read more than the file holds.
        [[ "$done_reads" -eq "$reads" || "$done_reads" -eq $((reads + 1)) ]] || {
            echo "$script: DRAMSim3 completed $done_reads of $reads reads of $s ($config) in $c cycles" >&2; exit 1; }
        d3l=$(awk '/^average_read_latency/ {print $3; exit}' "$out/d3/dramsim3.txt")
        row=$(awk -v c="$config" -v s="$s" -v a="$nvl" -v b="$d3l" -v tol="$tolerance" 'BEGIN {
            d = 100 * (a - b) / b; ok = (d <= tol && d >= -tol)
            printf "%-8s %-11s %12.2f %12.2f %+7.2f%s\n", c, s, a, b, d, ok ? "" : "  outside"
            exit ok ? 0 : 3 }') || outside=1
        echo "$row"
    done
done
echo "tolerance: ${tolerance} % of DRAMSim3's latency"
exit "$outside"
