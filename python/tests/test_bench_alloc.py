"""nvmos.bench_alloc: seed 000's Table 2 timed from Python. Timings are not
deterministic, so the tests compare structure, counts and the allocators'
validated state, never numbers against numbers."""

from __future__ import annotations

import math

import pytest

import nvmos

SMALL = dict(memory="16MiB", threads=[1, 2], rounds=1, repeat=500, mixed_ops=500, progress=False)


def test_rows_are_the_ones_asked_for_with_positive_timings():
    df = nvmos.bench_alloc(["buddy", "LiS-1", "bsa"], patterns=["bulk", "mixed"], **SMALL)
    assert len(df) == 3 * 2 * 2
    assert set(df["allocator"]) == {"buddy", "LiS-1", "bsa"}
    assert set(df["pattern"]) == {"bulk", "mixed"}
    assert set(df["threads"]) == {1, 2}
    assert not df.duplicated(["allocator", "pattern", "threads"]).any()
    assert df["skipped"].isna().all()
    for op in ("alloc", "free"):
        # Wall time per request is positive; a timed request faster than the
        # timer's read overhead (subtracted) reads as 0.
        assert (df[f"{op}_mean_ns_amortized"] > 0).all(), op
        assert (df[f"{op}_mean_ns"] >= 0).all(), op
        assert (df[f"{op}_requests"] > 0).all()
    bulk = df[df["pattern"] == "bulk"]
    assert (bulk["alloc_requests"] == bulk["free_requests"]).all()
    assert (bulk["alloc_failures"] == 0).all()
    # The nvmos allocators checked themselves after every pass; the peer cannot.
    assert df.loc[df["allocator"] != "bsa", "validated"].all()
    assert not df.loc[df["allocator"] == "bsa", "validated"].any()
    raw = df.attrs["result"].raw
    assert raw["options"]["frames"] == nvmos.parse_memory("16MiB")
    assert len(raw["cells"]) == len(df)


def test_single_frame_allocators_are_listed_not_timed_on_mixed():
    df = nvmos.bench_alloc(["M3", "LBS-31", "LiS-31"], patterns=["repeat", "mixed"], **SMALL)
    assert len(df) == 3 * 2 * 2
    skipped = df[df["skipped"].notna()]
    assert set(skipped["allocator"]) == {"M3"}
    assert set(skipped["pattern"]) == {"mixed"}
    assert all(math.isnan(v) for v in skipped["alloc_mean_ns"])
    checks = df.attrs["result"].raw["checks"]
    # LiS-31 against LBS-31 only: LiS-1 was not asked for, so no (c-e)/c.
    assert [c["unit"] for c in checks] == ["x"]
    assert all(isinstance(c["met"], bool) for c in checks)


def test_a_bad_allocator_name_is_refused():
    with pytest.raises(nvmos.OptionsError, match="nosuch"):
        nvmos.bench_alloc(["buddy", "nosuch"], **SMALL)
    with pytest.raises(nvmos.OptionsError, match="threads"):
        nvmos.bench_alloc(["buddy"], **{**SMALL, "threads": [0]})


def test_the_free_order_is_passed_on_and_a_bad_one_refused():
    df = nvmos.bench_alloc(["iBuddy", "LiS-31"], patterns=["rand"], free_order="per-cpu", **SMALL)
    assert df.attrs["result"].raw["options"]["free_order"] == "per-cpu"
    assert len(df) == 2 * 2
    assert df["validated"].all()
    with pytest.raises(nvmos.OptionsError, match="sideways"):
        nvmos.bench_alloc(["iBuddy"], free_order="sideways", **SMALL)
