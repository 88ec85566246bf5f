# The limit under bench/apps/numpy-loop.py (bench/RESULTS.md, "Fifth
# session"): the same loop with np.empty for np.zeros, so no allocator
# zeroes anything, and a calloc that cost nothing could make the loop no
# faster than this. Not a bench/run-apps program (its output is garbage by
# design); time it beside numpy-loop.py, e.g. with interleaved pairs.
import sys

import numpy as np

total = 0.0
for _ in range(int(sys.argv[1])):
    a = np.empty(4 << 20)
    b = np.ones_like(a)
    c = a * b
    total += c.sum() + b[-1]
print("done")
