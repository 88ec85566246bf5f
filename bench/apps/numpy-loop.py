# bench/run-apps' numpy workload. c = a * b is all zeros when np.zeros really
# was zero, so the printed sum (0.0) doubles as a check of calloc.
#
# numpy-loop.py N empty: the same loop with np.empty for np.zeros, so no
# allocator zeroes anything: the limit a calloc that cost nothing would
# reach (bench/RESULTS.md, "numpy against tcmalloc: the bound"). Its sum is garbage by design.
import sys

import numpy as np

make = np.empty if sys.argv[2:] == ["empty"] else np.zeros
total = 0.0
for _ in range(int(sys.argv[1])):
    a = make(4 << 20)
    b = np.ones_like(a)
    c = a * b
    total += c.sum() + b[-1]
print("sum %r" % total)
