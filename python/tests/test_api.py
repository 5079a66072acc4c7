"""The Python API against the CLI's JSON for the same runs, the numpy
arrays against the rows, and bad input against the exceptions."""

from __future__ import annotations

import json
import shutil
import threading

import numpy as np
import pandas as pd
import pytest

import nvmos
from conftest import TRACES, run_cli

# What differs between two runs of the same replay: wall-clock time.
TIMING = {"elapsed_ns"}


def strip_timing(value):
    """`value` (results.json as Python objects) without timing fields."""
    if isinstance(value, dict):
        return {k: strip_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def test_replay_matches_the_cli_json(nvmos_bin):
    args = ["--trace", str(TRACES / "numpy.nvt"), "--alloc", "iBuddy,LiS-31,linux-pcp,M3", "--memory", "256MiB"]
    cli = json.loads(run_cli(nvmos_bin, "replay", *args, "--json"))
    df = nvmos.replay(TRACES / "numpy.nvt", ["iBuddy", "LiS-31", "linux-pcp", "M3"], memory="256MiB")
    raw = df.attrs["result"].raw
    # The same document, number for number (timing aside).
    assert strip_timing(raw) == strip_timing(cli)
    assert list(df["allocator"]) == [nvmos.AS_RECORDED, "iBuddy", "LiS-31", "linux-pcp", "M3"]
    for row, (_, r) in zip(cli["traces"][0]["rows"], df.iterrows()):
        assert r["max"] == row["wear"]["max"]
        assert r["gini"] == row["wear"]["gini"]
        assert r["lifetime_years_1e7"] == row["wear"]["lifetime_years"][1]
        assert r["allocs"] == row["stats"]["allocs"]


def test_evaluate_matches_results_json_and_summary_csv(nvmos_bin, tmp_path):
    traces = tmp_path / "traces"
    traces.mkdir()
    for name in ("numpy.nvt", "files.nvt"):
        shutil.copy(TRACES / name, traces / name)
    (traces / "README.md").write_text("not a trace\n")
    out = tmp_path / "report"
    run_cli(nvmos_bin, "evaluate", "--traces", str(traces), "--out", str(out),
            "--alloc", "buddy,iBuddy", "--memory", "1GiB", "--cpus", "4")  # fmt: skip
    cli = json.loads((out / "results.json").read_text())
    df = nvmos.evaluate(traces, ["buddy", "iBuddy"], memory="1GiB", cpus=4, progress=False)
    assert strip_timing(df.attrs["result"].raw) == strip_timing(cli)
    # The DataFrame's columns are summary.csv's, with the same values.
    csv = pd.read_csv(out / "summary.csv")
    assert len(df) == len(csv) == 2 * 3
    for col in csv.columns:
        assert col in df.columns, col
        if col in ("ns_per_event", "events_per_second"):
            continue
        if col == "flag":
            # An empty CSV field reads back as NaN.
            assert list(df[col]) == ["" if pd.isna(v) else v for v in csv[col]], col
        elif not (pd.api.types.is_numeric_dtype(df[col]) and pd.api.types.is_numeric_dtype(csv[col])):
            assert list(df[col]) == list(csv[col]), col
        else:
            # summary.csv prints floats with Rust's shortest round-trip
            # formatting: parsing it back gives the same double.
            np.testing.assert_array_equal(df[col].to_numpy(dtype=float), csv[col].to_numpy(dtype=float), err_msg=col)


def test_open_trace_header_and_events():
    trace = nvmos.open_trace(TRACES / "numpy.nvt", scan=True)
    assert trace.format == "nvt"
    assert trace.machine["cpus"] >= 1 and trace.machine["zones"]
    events = trace.events()
    assert len(events) == trace.header["events"] == trace.info["events"]
    assert list(events.columns) == ["time_ns", "cpu", "op", "migratetype", "pfn", "order"]
    assert (events["op"] == "alloc").sum() == trace.info["allocs"]
    assert (events["op"] == "free").sum() == trace.info["frees"]
    assert events["migratetype"].isna().sum() == trace.info["frees"]
    assert events["time_ns"].is_monotonic_increasing or trace.info["time_reversals"] > 0
    assert int(events["time_ns"].iloc[-1] - events["time_ns"].iloc[0]) == trace.info["duration_ns"]
    # Batches are the same events, cut.
    batches = list(trace.batches(batch_size=10_000))
    assert [len(b) for b in batches[:-1]] == [10_000] * (len(batches) - 1)
    pd.testing.assert_frame_equal(pd.concat(batches, ignore_index=True), events)
    cols = next(trace.arrays(batch_size=5))
    assert cols["pfn"].dtype == np.uint64 and len(cols["pfn"]) == 5


def test_per_frame_wear_arrays_match_the_row():
    w = nvmos.wear(TRACES / "numpy.nvt", "LiS-31", memory="256MiB", heat_buckets=64)
    df = nvmos.replay(TRACES / "numpy.nvt", ["LiS-31"], memory="256MiB", heat_buckets=64, as_recorded=False)
    row = df.attrs["result"].raw["traces"][0]["rows"][0]
    assert w.writes.dtype == np.uint32 and len(w.writes) == 65536
    assert int(w.writes.sum(dtype=np.uint64)) == row["wear"]["total_writes"]
    assert int(w.writes.max()) == row["wear"]["max"]
    counts, frames = np.unique(w.writes, return_counts=True)
    np.testing.assert_array_equal(np.column_stack([counts, frames]), w.histogram)
    np.testing.assert_array_equal(w.histogram, df.attrs["result"].histogram("numpy", "LiS-31"))
    np.testing.assert_array_equal(w.heat_map(64), df.attrs["result"].heat("numpy", "LiS-31"))
    assert strip_timing(w.row) == strip_timing(row)
    # The 2-d heat map is a view of the engine's array, not a copy.
    image = w.image(256)
    assert image.shape == (256, 256) and np.shares_memory(image, w.writes)
    # The recorded placement's per-frame counts too.
    linux = nvmos.wear(TRACES / "numpy.nvt", nvmos.AS_RECORDED)
    assert int(linux.writes.max()) == nvmos.replay(TRACES / "numpy.nvt", [])["max"].iloc[0]


def test_trace_from_memory_is_the_same_as_from_the_file():
    data = (TRACES / "numpy.nvt").read_bytes()
    a = nvmos.replay(("numpy.nvt", data), ["iBuddy"], memory="256MiB")
    b = nvmos.replay(TRACES / "numpy.nvt", ["iBuddy"], memory="256MiB")
    pd.testing.assert_frame_equal(
        a.drop(columns=["source", *nvmos.TIMING_COLUMNS[:3]]), b.drop(columns=["source", *nvmos.TIMING_COLUMNS[:3]])
    )


def test_banks_matches_the_cli_json(nvmos_bin):
    cli = json.loads(run_cli(nvmos_bin, "study", "banks", "--quick", "--cores", "1,2", "--no-analyse", "--json"))
    df = nvmos.banks(cores=[1, 2], quick=True, analyse=False, progress=False)
    raw = df.attrs["result"].raw
    assert raw["study"] == cli["study"]
    assert len(df) == len(cli["study"]["rows"]) == 2 * 2 * 3
    assert list(df["run_ns"]) == [r["run_ns"] for r in cli["study"]["rows"]]


def test_power_matches_the_cli_json(nvmos_bin, tmp_path):
    numpy = str(TRACES / "numpy.nvt")
    cli = json.loads(
        run_cli(nvmos_bin, "study", "power", "--quick", "--epochs", "12", "--traces", numpy,
                "--no-latency", "--json", "--out", str(tmp_path))
    )  # fmt: skip
    seen = []
    df = nvmos.power(quick=True, epochs=12, traces=numpy, latency=False,
                     progress=lambda done, total, step: seen.append((done, total)))  # fmt: skip
    raw = df.attrs["result"].raw
    # The deterministic parts to the bit; the checks derive from them.
    assert raw["options"] == cli["options"]
    assert raw["synthetic"] == cli["synthetic"]
    assert raw["traces"] == cli["traces"]
    assert raw["checks"] == cli["checks"]
    assert raw["latency"] is None
    # One row per allocator x (workload, machine), then per allocator x trace.
    n_synthetic = sum(len(s["rows"]) for s in cli["synthetic"])
    n_trace = sum(len(t["rows"]) for t in cli["traces"])
    assert len(df) == n_synthetic + n_trace == 4 * 8 + 9
    assert list(df["offline_percent"]) == [r["offline_percent"] for s in cli["synthetic"] for r in s["rows"]] + [
        r["offline_percent"] for t in cli["traces"] for r in t["rows"]
    ]
    assert set(df["trace"].dropna()) == {"numpy"}
    energy = cli["synthetic"][0]["rows"][0]["energy"][0]
    assert df.iloc[0][f"energy_{energy['model']}"] == energy["report"]["total"]
    assert seen and seen[-1] == (len(df) - 1, len(df))  # every run a step, the recorded placement too
    with pytest.raises(nvmos.OptionsError, match="does not divide the machine size"):
        nvmos.power(sizes=["1GiB"], bank="96MiB", traces=None, latency=False, progress=False)


def test_progress_is_reported_and_an_exception_in_it_stops_the_run():
    seen = []
    nvmos.replay(TRACES / "numpy.nvt", ["buddy", "iBuddy"], memory="256MiB",
                 progress=lambda done, total, msg: seen.append((done, total, msg)))  # fmt: skip
    assert seen[-1][0] == seen[-1][1] == 3
    assert any("iBuddy" in m for _, _, m in seen)

    class Stop(Exception):
        pass

    def stop(done, total, msg):
        if done == 1:
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        nvmos.replay(TRACES / "numpy.nvt", ["buddy", "iBuddy"], memory="256MiB", progress=stop)


def test_replays_release_the_gil():
    # Two replays in two threads finish, and Python code runs meanwhile:
    # a thread holding the GIL for the whole replay would starve `ticks`.
    results = {}
    ticks = []

    def work(name):
        results[name] = nvmos.replay(TRACES / "files.nvt", ["iBuddy"], memory="1GiB", as_recorded=False)

    threads = [threading.Thread(target=work, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        ticks.append(1)
        threading.Event().wait(0.001)
    for t in threads:
        t.join()
    assert results["a"]["max"].iloc[0] == results["b"]["max"].iloc[0]
    assert len(ticks) > 10


# ---------------------------------------------------------------------------
# Bad input raises the right exception, with the Rust error's message.


def test_missing_trace_names_the_file(tmp_path):
    missing = tmp_path / "nope.nvt"
    with pytest.raises(nvmos.TraceFileError) as e:
        nvmos.replay(missing, ["iBuddy"])
    assert str(missing) in str(e.value) and e.value.path == str(missing)
    assert isinstance(e.value, nvmos.NvmosError)


def test_corrupt_nvt_names_the_offset(tmp_path):
    data = bytearray((TRACES / "numpy.nvt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad = tmp_path / "bad.nvt"
    bad.write_bytes(bytes(data))
    with pytest.raises(nvmos.TraceFileError) as e:
        nvmos.replay(bad, ["iBuddy"], memory="256MiB")
    assert e.value.path == str(bad) and e.value.offset is not None
    assert "checksum" in str(e.value) or "corrupt" in str(e.value)
    with pytest.raises(nvmos.TraceFileError):
        nvmos.open_trace(bad).events()


def test_bad_text_line_names_the_line(tmp_path):
    bad = tmp_path / "bad.trace"
    bad.write_text(
        "# tracer: nop\n"
        "  bash-1 [000] ..... 1.000000: mm_page_alloc: page=0000000000000001 pfn=0x10 order=0 migratetype=1 gfp_flags=GFP_KERNEL\n"
        "  bash-1 [000] ..... 1.000001: mm_page_alloc: page=0000000000000001 pfn=0xZZ order=0 migratetype=1 gfp_flags=GFP_KERNEL\n"
    )
    with pytest.raises(nvmos.TraceFileError) as e:
        nvmos.replay(bad, ["iBuddy"], memory="16MiB")
    assert e.value.line == 3 and f"{bad}:3" in str(e.value)


def test_text_trace_without_machine_gets_it_inferred_or_checked(tmp_path):
    t = tmp_path / "ok.trace"
    t.write_text(
        "  bash-1 [001] ..... 1.000000: mm_page_alloc: page=0000000000000001 pfn=0x10 order=0 migratetype=1 gfp_flags=GFP_KERNEL\n"
    )
    # No machine in a text trace: memory and CPUs come from its events
    # (highest pfn + block, highest CPU + 1), and the result says so.
    df = nvmos.replay(t, ["iBuddy"])
    assert df["allocs"].tolist() == [1, 1]
    trace = df.attrs["result"].raw["traces"][0]
    assert trace["inferred"] is True
    assert trace["machine"]["cpus"] == 2 and trace["machine"]["zones"][0]["spanned"] == 0x11
    assert nvmos.replay(t, ["iBuddy"], memory="16MiB")["allocs"].tolist() == [1, 1]
    # A memory the recorded placement cannot hold is refused, naming pfn and line.
    with pytest.raises(nvmos.TraceFileError, match="pfn 0x10") as e:
        nvmos.replay(t, ["iBuddy"], memory="8frames")
    assert e.value.line == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"allocators": ["iBudy"]}, 'unknown allocator "iBudy"'),
        ({"memory": "4XB"}, "unknown unit"),
        ({"memory": "4097B"}, "not a whole number"),
        ({"memory": 0}, "no unit"),
        ({"memory": 4}, "4frames"),
        ({"memory": "4"}, "no unit"),
        ({"cpus": 0}, "at least one CPU"),
        ({"writes_per_alloc": 0}, "writes_per_alloc"),
        ({"writes_per_alloc": 4294967295}, "1 to 256"),
    ],
)
def test_bad_options_raise_options_error(kwargs, message):
    kwargs.setdefault("allocators", ["iBuddy"])
    with pytest.raises(nvmos.OptionsError, match=message):
        nvmos.replay(TRACES / "numpy.nvt", **kwargs)


def test_bad_study_options():
    with pytest.raises(nvmos.OptionsError, match="neither a preset"):
        nvmos.banks(machine="no-such-machine")
    with pytest.raises(nvmos.OptionsError, match="kernel"):
        nvmos.banks(kernel="stream")
    with pytest.raises(nvmos.OptionsError, match="pc_scale"):
        nvmos.swap(pc_scale=9)
    # serde's message names the field.
    with pytest.raises(nvmos.OptionsError, match="missing field `model`"):
        nvmos._nvmos.evaluate([], ["iBuddy"], '{"memory_frames": 1}')
    with pytest.raises(nvmos.OptionsError, match="invalid type"):
        nvmos._nvmos.banks("xeon-3ch", '{"cores": "four"}')
