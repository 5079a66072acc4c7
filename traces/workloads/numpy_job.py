# Sorts, multiplies and reduces arrays of a few hundred MB for ~10 s.
import numpy as np
rng = np.random.default_rng(42)
for i in range(6):
    a = rng.random(20_000_000)
    a.sort()
    m = rng.random((1500, 1500))
    p = m @ m.T
    s = np.cumsum(a) + p.sum()
    del a, m, p, s
