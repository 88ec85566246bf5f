# bench/run-apps: sum the HUGEZERO_STATS_FILE reports of one run (one JSON
# file per process of the program's tree) into the CSV's hz_* columns:
#   procs,large_requests,thp_mib,4k_mib,hugetlb_mib,cache_hits,cache_misses,
#   fresh_thp_slow,thp_demoted,mmaps_aligned
# Keys a report lacks count as 0, so a newer or older library still reads.
import json
import sys

tot = dict.fromkeys(["procs", "large_requests", "thp", "4k", "hugetlb", "cache_hits",
                     "cache_misses", "fresh_thp_slow", "thp_demoted", "mmaps_aligned"], 0)
for path in sys.argv[1:]:
    try:
        with open(path) as f:
            s = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit("hzstats: %s: %s" % (path, e))
    tot["procs"] += 1
    blocks = s.get("blocks", {})
    tot["thp"] += blocks.get("thp", {}).get("bytes", 0)
    tot["4k"] += blocks.get("4k", {}).get("bytes", 0)
    tot["hugetlb"] += sum(blocks.get(k, {}).get("bytes", 0) for k in ("hugetlb2m", "hugetlb1g"))
    tot["fresh_thp_slow"] += s.get("fallbacks", {}).get("fresh_thp_slow", 0)
    for k in ("large_requests", "cache_hits", "cache_misses", "thp_demoted", "mmaps_aligned"):
        tot[k] += s.get(k, 0)
mib = lambda b: "%.1f" % (b / 1048576)
print(",".join([str(tot["procs"]), str(tot["large_requests"]), mib(tot["thp"]), mib(tot["4k"]),
                mib(tot["hugetlb"]), str(tot["cache_hits"]), str(tot["cache_misses"]),
                str(tot["fresh_thp_slow"]), str(tot["thp_demoted"]), str(tot["mmaps_aligned"])]))
