# bench/run-apps' numpy workload. c = a * b is all zeros when np.zeros really
# was zero, so the printed sum (0.0) doubles as a check of calloc.
import sys

import numpy as np

total = 0.0
for _ in range(int(sys.argv[1])):
    a = np.zeros(4 << 20)
    b = np.ones_like(a)
    c = a * b
    total += c.sum() + b[-1]
print("sum %r" % total)
