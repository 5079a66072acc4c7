"""Run one Ramulator 2 configuration (ramulator2-*.yaml) on one
LoadStoreTrace file through Ramulator 2.1's Python bindings and print one
JSON line: the controller's statistics that ramulator2_speed.sh reads and
the CPU seconds of building the simulation (which reads the trace) and
running it.

  PYTHONPATH=$RAMULATOR2_DIR/python python3 ramulator2_run.py CONFIG.yaml TRACE [CYCLES]

CYCLES (default 1): memory cycles between two requests the front end
offers (each waits until the controller takes it). Ramulator 2.1's
Simulation.run ticks the front end once per memory_system.clock_ratio
steps and the memory once per frontend.clock_ratio steps, so CYCLES is
set as the memory system's clock_ratio, the front end's left at 1.

Exits non-zero with a message, and prints nothing on stdout, when the
statistics are not what a single-controller run gives.
"""

import json
import sys
import time

import yaml

import ramulator


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: ramulator2_run.py CONFIG.yaml TRACE [CYCLES]")
    with open(sys.argv[1]) as f:
        config = yaml.safe_load(f)
    config["frontend"]["path"] = sys.argv[2]
    if len(sys.argv) == 4:
        cycles = int(sys.argv[3])
        if cycles < 1:
            sys.exit("ramulator2_run.py: CYCLES must be at least 1")
        if config["frontend"]["clock_ratio"] != 1:
            sys.exit("ramulator2_run.py: CYCLES needs the front end's clock_ratio at 1")
        config["memory_system"]["clock_ratio"] = cycles
    dram = config["memory_system"]["controllers"][0]["dram"]
    tck_ps = dram["timing"][-1]  # DDR4's timing list ends with tCK_ps
    start = time.process_time()
    sim = ramulator.Simulation(config["frontend"], config["memory_system"])
    sim.run()
    cpu = time.process_time() - start
    ctrl = sim.stats["memory_system"]["controller"]
    if not isinstance(ctrl, dict):
        sys.exit("ramulator2_run.py: expected one controller's statistics")
    keys = [
        "cycles",
        "num_read_reqs",
        "num_write_reqs",
        "num_read_reqs_served",
        "num_write_reqs_served",
        "num_read_reqs_forwarded",
        "num_write_reqs_coalesced",
        "row_hits",
        "row_misses",
        "row_conflicts",
        "total_throughput_MBps",
        "avg_read_latency",
    ]
    missing = [k for k in keys if k not in ctrl]
    if missing:
        sys.exit(f"ramulator2_run.py: no {missing} in Ramulator's statistics")
    out = {k: ctrl[k] for k in keys}
    out["tCK_ps"] = tck_ps
    out["cpu_s"] = cpu
    print(json.dumps(out))


if __name__ == "__main__":
    main()
