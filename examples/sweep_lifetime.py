# %% [markdown]
# # Lifetime against memory size, per allocator
#
# Loads the Parquet file of a sweep (`examples/lifetime.toml`:
#
#     cargo run --release -p nvmos -- sweep examples/lifetime.toml
#
# ) and plots, per trace, the lifetime of storage-class memory (years until
# the most written frame reaches 10^7 writes, the workload repeated)
# against the memory size each allocator managed. Runs as a script
# (`python examples/sweep_lifetime.py [SWEEP.parquet] [OUT.png]`) or cell
# by cell as a notebook (`# %%` cells: VS Code, Jupytext).

# %%
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed
import matplotlib.pyplot as plt
import pandas as pd

here = Path(__file__).resolve().parent if "__file__" in globals() else Path("examples").resolve()
args = [a for a in sys.argv[1:] if not a.startswith("-")] if "__file__" in globals() else []
parquet = Path(args[0]) if args else here.parent / "sweep-out/lifetime/sweep.parquet"
png = Path(args[1]) if len(args) > 1 else here / "sweep_lifetime.png"

# %%
df = pd.read_parquet(parquet)
failed = df[df["status"] != "ok"]
if len(failed):
    print(f"{len(failed)} failed cells left out:", *failed["error"].unique(), sep="\n  ")
df = df[df["status"] == "ok"].copy()
df["memory_gib"] = df["frames"] * 4096 / 2**30
print(df.groupby(["trace", "allocator"])["lifetime_years"].describe()[["min", "max"]])

# %%
traces = sorted(df["trace"].unique())
allocators = list(dict.fromkeys(df["allocator"]))
fig, axes = plt.subplots(1, len(traces), figsize=(3.2 * len(traces), 3.4), sharey=False, squeeze=False)
for ax, trace in zip(axes[0], traces):
    part = df[df["trace"] == trace]
    for allocator in allocators:
        line = part[part["allocator"] == allocator].sort_values("memory_gib")
        ax.plot(line["memory_gib"], line["lifetime_years"], marker="o", label=allocator)
    ax.set_xscale("log", base=2)
    sizes = sorted(part["memory_gib"].unique())
    ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_title(trace)
    ax.set_xlabel("memory (GiB)")
    ax.grid(True, which="both", alpha=0.3)
axes[0][0].set_ylabel("lifetime at 10^7 writes (years)")
axes[0][-1].legend(fontsize=8)
fig.suptitle("SCM lifetime against memory size (nvmos sweep, shipped traces)", fontsize=10)
fig.tight_layout()
fig.savefig(png, dpi=80)
print(f"wrote {png}")
