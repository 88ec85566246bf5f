# A data-frame workload outside bench/run-apps: frames of N rows (default
# 3 M) built, grouped, merged, sorted and derived, three times. Its arrays
# are 2.9-23 MiB, of many sizes, so hugezero keeps freed blocks of sizes
# the next frame may not ask for (bench/RESULTS.md, "pandas: peak memory").
# Needs python3-pandas. The printed values double as a check.
import sys

import numpy as np
import pandas as pd

rng = np.random.default_rng(1)
n = int(sys.argv[1]) if len(sys.argv) > 1 else 3_000_000
for it in range(3):
    df = pd.DataFrame({"k": rng.integers(0, 50000, n), "a": rng.random(n),
                       "b": rng.random(n), "s": rng.integers(0, 100, n)})
    g = df.groupby("k").agg({"a": "sum", "b": "mean", "s": "max"})
    m = df.merge(g, left_on="k", right_index=True, suffixes=("", "_g"))
    m = m.sort_values(["s", "a"])
    m["c"] = m["a"] * m["b_g"] + m["s"]
    print(it, len(m), round(float(m["c"].sum()) % 1, 6))
