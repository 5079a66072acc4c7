"""Write the Ramulator 2 configurations ramulator2_speed.sh runs, fully
expanded as Ramulator 2.1's `python -m ramulator export` writes them:

  ramulator2-stock.yaml    DDR4_8Gb_x8 x 2 ranks, DDR4_2400U timings with
                           the secondary timings Ramulator derives (nRRDS 4,
                           nRRDL 6, nFAW 26, nRFC 433, nREFI 9364), AllBank
                           refresh
  ramulator2-matched.yaml  the same with NoRefresh and nCCDL = nCCDS 4,
                           nRRDL = nRRDS 4, nWTRS = nWTRL 9 (nvmos's
                           --no-refresh --no-bank-groups; DRAMSim3's
                           matched .ini)

Both: LoadStoreTrace front end (one request offered per memory cycle:
both clock ratios 1), GenericDDR controller with its default 32-entry read
and write buffers and 0.2 / 0.8 write watermarks, FRFCFS scheduler, Open
row policy, RoBaRaCoCh mapping, one channel. The trace path is a
placeholder (TRACE) that ramulator2_run.py replaces.

  PYTHONPATH=$RAMULATOR2_DIR/python python3 ramulator2_configs.py [OUT_DIR]

Needs Ramulator 2.1's Python package (CMU-SAFARI/ramulator2 built with its
Python bindings); nothing of Ramulator is copied here.
"""

import os
import sys

import ramulator
from ramulator.export import dict_to_yaml


def config(matched):
    overrides = {"rank": 2}
    if matched:
        overrides.update(nCCDL=4, nRRDL=4, nWTRS=9)
    dram = ramulator.dram.DDR4(
        org_preset="DDR4_8Gb_x8", timing_preset="DDR4_2400U", **overrides
    )
    refresh = (
        ramulator.refresh_manager.NoRefresh()
        if matched
        else ramulator.refresh_manager.AllBank()
    )
    ctrl = ramulator.controller.GenericDDR(
        dram=dram,
        scheduler=ramulator.scheduler.FRFCFS(),
        refresh_manager=refresh,
        row_policy=ramulator.row_policy.Open(),
        addr_mapper=ramulator.addr_mapper.RoBaRaCoCh(),
    )
    mem = ramulator.memory_system.GenericDRAM(
        clock_ratio=1,
        controllers=[ctrl],
        channel_mapper=ramulator.channel_mapper.CacheLineInterleave(),
    )
    fe = ramulator.frontend.LoadStoreTrace(clock_ratio=1, path="TRACE")
    return {"frontend": fe.to_config(), "memory_system": mem.to_config()}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, matched in [("stock", False), ("matched", True)]:
        path = os.path.join(out, f"ramulator2-{name}.yaml")
        # Whole or not at all: written beside, then renamed over.
        with open(path + ".tmp", "w") as f:
            f.write(f"# Written by ramulator2_configs.py ({name}); see there.\n")
            f.write(dict_to_yaml(config(matched)))
        os.replace(path + ".tmp", path)
        print(path)


if __name__ == "__main__":
    main()
