# bench/run-apps' plain-Python workload: what a data-munging script does.
# Deterministic (its own generator); prints a digest of what it computed.
import hashlib
import json
import sys

n = int(sys.argv[1])
x = 12345
rows = []
for i in range(n):
    x = (x * 6364136223846793005 + 1442695040888963407) & (2**64 - 1)
    rows.append({"id": i, "key": "k%07d" % (x % 1000003), "v": (x >> 20) % 100000,
                 "tags": ["t%d" % ((x >> s) & 63) for s in (8, 16, 24)]})

# Group by key, sum and collect: a dict of lists that grows by rehashing.
groups = {}
for r in rows:
    g = groups.setdefault(r["key"], [0, []])
    g[0] += r["v"]
    g[1].append(r["id"])

ordered = sorted(rows, key=lambda r: (r["v"], r["key"]))
text = json.dumps(ordered)
back = json.loads(text)
tags = {}
for r in back:
    for t in r["tags"]:
        tags[t] = tags.get(t, 0) + 1

h = hashlib.sha256()
for k in sorted(groups):
    h.update(("%s:%d:%d;" % (k, groups[k][0], len(groups[k][1]))).encode())
h.update(json.dumps(sorted(tags.items())).encode())
h.update(text[-1000:].encode())
print(len(rows), len(groups), len(text), h.hexdigest())
