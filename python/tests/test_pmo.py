"""Persistent memory objects from Python: the object as a numpy array
over its mapping, psync durability across processes, the heap, and the
errors (wrong key, live arrays at detach, heap misuse)."""

import subprocess
import sys

import numpy as np
import pytest

import nvmos

KEY = b"a long passphrase"


@pytest.fixture
def pool_path(tmp_path):
    pool = nvmos.Pool.create(tmp_path / "p.pool", 8 << 20)
    pool.pcreate("obj", 256 << 10, key=KEY, fast_kdf=True)
    del pool
    return tmp_path / "p.pool"


def test_buffer_writes_are_durable_after_psync_and_seen_by_another_process(pool_path):
    pool = nvmos.Pool.open(pool_path, write=True)
    a = pool.attach("obj", key=KEY, write=True)
    buf = a.buffer
    assert buf.dtype == np.uint8 and buf.shape == (256 << 10,) and len(a) == 256 << 10
    words = buf[4096:8192].view(np.float64)
    words[:] = np.arange(512, dtype=np.float64)
    stats = a.psync()
    assert stats["pages"] >= 1
    # Written after the psync and never synced: lost, as after a crash.
    buf[100] = 7
    del buf, words
    a.detach()  # psyncs: byte 100 is now durable too
    del pool
    code = f"""
import numpy as np, nvmos
pool = nvmos.Pool.open({str(pool_path)!r})
a = pool.attach("obj", key={KEY!r})
b = a.buffer
assert not b.flags.writeable
print(int(b[4096:8192].view(np.float64).sum()), int(b[100]))
del b
a.detach()
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(sum(range(512))), "7"]


def test_detach_refuses_while_an_array_points_into_the_mapping(pool_path):
    pool = nvmos.Pool.open(pool_path, write=True)
    a = pool.attach("obj", key=KEY, write=True)
    view = a.buffer[10:20]  # a slice keeps the base alive too
    with pytest.raises(nvmos.PmoError, match="still point into its mapping"):
        a.detach()
    view[:] = 1  # still mapped: the refusal kept the attachment
    del view
    a.detach()
    with pytest.raises(nvmos.PmoError, match="detached"):
        a.psync()


def test_wrong_key_and_bad_mode_are_refused(pool_path):
    pool = nvmos.Pool.open(pool_path)
    with pytest.raises(nvmos.PmoError, match="wrong key"):
        pool.attach("obj", key=b"the wrong passphrase")
    with pytest.raises(ValueError, match="mode"):
        pool.attach("obj", key=KEY, mode="psychic-3")
    with pytest.raises(nvmos.PmoError):
        pool.attach("missing", key=KEY)
    assert [o["name"] for o in pool.objects()] == ["obj"]


def test_heap_allocations_survive_reattach_and_iterate_by_type(pool_path):
    pool = nvmos.Pool.open(pool_path, write=True)
    with pool.attach("obj", key=KEY, write=True) as a:
        root = a.root(64)
        offs = [a.palloc(100 + i, type_num=3) for i in range(10)]
        a.buffer[offs[0] : offs[0] + 4] = [1, 2, 3, 4]
        other = a.palloc(5000, type_num=4)
        a.pfree(offs.pop())
        a.pfree(other)
        with pytest.raises(nvmos.PmoError, match="double free"):
            a.pfree(other)
        grown = a.prealloc(offs[1], 3000)
        offs[1] = grown
    with pool.attach("obj", key=KEY) as a:
        assert [b[0] for b in a.blocks(type_num=3)] == sorted(offs)
        assert a.blocks(type_num=4) == []
        assert list(a.buffer[offs[0] : offs[0] + 4]) == [1, 2, 3, 4]
        stats = a.heap_stats()
        assert stats["allocated_blocks"] == 1 + len(offs)
        assert 0.0 <= stats["fragmentation"] < 1.0
    with pool.attach("obj", key=KEY, write=True) as a:
        assert a.root(64) == root
        with pytest.raises(nvmos.PmoError, match="offset"):
            a.pfree(root + 8)


def test_psync_many_commits_several_objects_together(pool_path):
    pool = nvmos.Pool.open(pool_path, write=True)
    pool.pcreate("other", 64 << 10, key=KEY, fast_kdf=True)
    a = pool.attach("obj", key=KEY, write=True)
    b = pool.attach("other", key=KEY, write=True)
    a.buffer[0:4] = [1, 2, 3, 4]
    b.buffer[5000] = 9
    with pytest.raises(nvmos.PmoError, match='"obj" is given twice'):
        pool.psync_many([a, a])
    stats = pool.psync_many([a, b])
    assert [s["pages"] for s in stats] == [1, 1]
    assert [s["pages"] for s in pool.psync_many([b, a])] == [0, 0]
    a.detach()
    b.detach()
    epochs = {o["name"]: o["epoch"] for o in pool.objects()}
    assert epochs == {"obj": 2, "other": 2}
    r = pool.attach("other", key=KEY)
    with pytest.raises(nvmos.PmoError, match="read-only"):
        pool.psync_many([r])
    assert r.buffer[5000] == 9
    r.detach()


def test_a_protected_pool_needs_its_state_store(tmp_path):
    store = tmp_path / "state"
    path = tmp_path / "protected.pool"
    pool = nvmos.Pool.create(path, 8 << 20, state_dir=store)
    pool.pcreate("obj", 64 << 10, key=KEY, fast_kdf=True)
    del pool
    # With its store: opens, read-only and for writing.
    assert nvmos.Pool.open(path, state_dir=store).state_missing is None
    nvmos.Pool.open(path, write=True, state_dir=store)
    # Without it, or with another (empty) one: refused, naming the store.
    for other in (None, tmp_path / "elsewhere"):
        with pytest.raises(nvmos.PmoError, match="state"):
            nvmos.Pool.open(path, state_dir=other)
    # Unless asked for, and then the pool says so.
    opened = nvmos.Pool.open(path, state_dir=None, allow_missing_state=True)
    assert opened.state_missing
