"""Checks `hugezero stats --openmetrics` or `--textfile` output with the
prometheus_client parsers (tests/cli/openmetrics.sh): every family that
src/stats.def implies, no other, each with its type, unit and HELP, and for
each process given the labels and the values of its `--json` report.

usage: metrics_check.py openmetrics|prometheus FILE STATS_DEF VERSION
                        only|among PID:JSON:COMM [PID:JSON:COMM...]

only: FILE has exactly these processes (an explicit PID); among: these and
perhaps others (no PID: every hugezero process on the machine). Prints one
line per failed check and exits 1 if any failed."""
import json
import re
import sys

GROUP_PREFIX = {"CORE": "", "EXEC": "exec_", "JEMALLOC": "jemalloc_"}
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def table(path):
    """The rows of stats.def: (group, key, type, unit, doc), and the
    BACKINGS and FALLBACKS rows: (key, doc)."""
    text = open(path).read()
    string = r'"((?:[^"\\]|\\.)*)"'
    stats = re.findall(r'HZ_STAT\(\s*(CORE|EXEC|JEMALLOC),\s*\w+,\s*' + string +
                       r',\s*(\w+),\s*(\w+),\s*(?:NULL|' + string + r'),\s*' +
                       string + r'\s*\)', text)
    backings = re.findall(r'HZ_STAT_BACKINGS\(\s*\w+,\s*\w+,\s*' + string + r',\s*' +
                          string + r'\s*\)', text)
    fallbacks = re.findall(r'HZ_STAT_FALLBACKS\(\s*\w+,\s*' + string + r',\s*' +
                           string + r'\s*\)', text)
    check(len(stats) > 50 and len(backings) == 1 and len(fallbacks) == 1,
          "stats.def parsed: %d counters, %d backings rows, %d fallbacks rows" %
          (len(stats), len(backings), len(fallbacks)))
    return ([(g, k, t, u, doc) for g, k, t, u, _, doc in stats], backings, fallbacks)


def expected(path, version, procs):
    """family name -> (type, unit, help, {(pid, extra labels): value})."""
    stats, backings, fallbacks = table(path)
    fams = {"hugezero_info": ("info", "", None, {})}
    for pid, report, _ in procs:
        exec_mode = report["exec"]["mode"]
        fams["hugezero_info"][3][(pid, (("exec_mode", exec_mode), ("version", version)))] = 1
    for group, key, typ, unit, doc in stats:
        name, seconds = key, unit == "NS"
        if seconds:
            name, unit_name = re.sub(r"_ns$", "", key) + "_seconds", "seconds"
        elif unit == "BYTES":
            name, unit_name = key if key.endswith("_bytes") else key + "_bytes", "bytes"
        else:
            unit_name = ""
        values = {}
        for pid, report, _ in procs:
            obj = report if group == "CORE" else report[GROUP_PREFIX[group][:-1]]
            values[(pid, ())] = obj[key] / 1e9 if seconds else obj[key]
        fams["hugezero_" + GROUP_PREFIX[group] + name] = (
            "counter" if typ == "COUNTER" else "gauge", unit_name, doc, values)
    for key, doc in backings:
        count, size = {}, {}
        for pid, report, _ in procs:
            for backing, v in report[key].items():
                count[(pid, (("backing", backing),))] = v["count"]
                size[(pid, (("backing", backing),))] = v["bytes"]
        fams["hugezero_" + key] = ("counter", "", doc, count)
        fams["hugezero_" + key + "_bytes"] = ("counter", "bytes", "bytes of the " + doc, size)
    for key, doc in fallbacks:
        fams["hugezero_" + key] = ("counter", "", doc, {
            (pid, (("reason", r),)): v for pid, report, _ in procs
            for r, v in report[key].items()})
    return fams


def parse(form, text):
    if form == "openmetrics":
        from prometheus_client.openmetrics.parser import text_string_to_metric_families
    else:
        from prometheus_client.parser import text_string_to_metric_families
    return list(text_string_to_metric_families(text))


def family_name(form, name, typ):
    """How the parser names our family: the 0.0.4 info is a gauge
    hugezero_info, the OpenMetrics one the info family hugezero."""
    return "hugezero" if (form == "openmetrics" and typ == "info") else name


def check_family(form, fam, want, procs, only, pids_seen):
    typ, unit, doc, values = want
    suffix = {"counter": "_total", "info": "_info"}.get(typ, "")
    want_type = "gauge" if (typ == "info" and form != "openmetrics") else typ
    check(fam.type == want_type, "%s: type %s, not %s" % (fam.name, fam.type, want_type))
    if form == "openmetrics":
        check(fam.unit == unit, "%s: unit '%s', not '%s'" % (fam.name, fam.unit, unit))
    if doc is not None:
        check(fam.documentation == doc, "%s: HELP '%s', not stats.def's '%s'" %
              (fam.name, fam.documentation, doc))
    else:
        check(fam.documentation != "", "%s: no HELP" % fam.name)
    comms = {pid: comm for pid, _, comm in procs}
    seen = set()
    for s in fam.samples:
        labels = dict(s.labels)
        pid = labels.pop("pid", None)
        comm = labels.pop("comm", None)
        labels.pop("cgroup", None)
        key = (pid, tuple(sorted(labels.items())))
        check(s.name == fam.name + suffix if typ != "info" else s.name == "hugezero_info",
              "%s: sample named %s" % (fam.name, s.name))
        check(pid is not None and comm is not None, "%s: sample without pid or comm: %s" %
              (fam.name, s.labels))
        check(key not in seen, "%s: a second sample %s" % (fam.name, s.labels))
        seen.add(key)
        pids_seen.setdefault(pid, set()).add(fam.name)
        if pid not in comms:
            check(not only, "%s: a process not asked for: %s" % (fam.name, s.labels))
            continue
        check(comm == comms[pid], "%s: comm '%s', not '%s'" % (fam.name, comm, comms[pid]))
        check(s.labels.get("cgroup", "") == cgroup_of(pid), "%s: cgroup '%s', not '%s'" %
              (fam.name, s.labels.get("cgroup"), cgroup_of(pid)))
        check(key in values and s.value == values[key], "%s%s: %s, the JSON says %s" %
              (fam.name, s.labels, s.value, values.get(key)))
    for key in values:
        check(key in seen, "%s: no sample for %s" % (fam.name, key))


def cgroup_of(pid):
    """The rule of tools/openmetrics.c: the v2 path, else name=systemd's."""
    lines = open("/proc/%s/cgroup" % pid).read().splitlines()
    for line in lines:
        if line.startswith("0::"):
            return line[3:]
    for line in lines:
        if ":name=systemd:" in line:
            return line.split(":", 2)[2]
    return ""


def main():
    form, path, stats_def, version, mode = sys.argv[1:6]
    procs = []
    for spec in sys.argv[6:]:
        pid, report, comm = spec.split(":", 2)
        procs.append((pid, json.load(open(report)), comm))
        check(procs[-1][1]["pid"] == int(pid), "the JSON of %s is another process's" % pid)
    text = open(path, encoding="utf-8").read()
    if form == "openmetrics":
        check(text.endswith("\n# EOF\n"), "OpenMetrics output does not end with # EOF")
    else:
        check("# EOF" not in text and "# UNIT" not in text and " info\n" not in text,
              "the Prometheus 0.0.4 file has OpenMetrics-only lines (# EOF, # UNIT, info)")
    want = expected(stats_def, version, procs)
    by_name = {family_name(form, n, w[0]): (n, w) for n, w in want.items()}
    pids_seen = {}
    names = [f.name for f in parse(form, text)]
    check(len(names) == len(set(names)), "a family appears twice: %s" % names)
    for fam in parse(form, text):
        if check(fam.name in by_name, "a family stats.def does not imply: %s (%s)" %
                 (fam.name, fam.type)):
            check_family(form, fam, by_name[fam.name][1], procs, mode == "only", pids_seen)
    for name in by_name:
        check(name in names, "family %s missing" % name)
    for pid, fams in pids_seen.items():
        check(len(fams) == len(want), "process %s is in %d families of %d" %
              (pid, len(fams), len(want)))
    kinds = {n: w[0] for n, w in want.items()}
    check(kinds.get("hugezero_live_bytes") == "gauge" and
          kinds.get("hugezero_cache_bytes") == "gauge" and
          kinds.get("hugezero_large_requests") == "counter" and
          want.get("hugezero_clear_seconds", ("",))[0] == "counter",
          "stats.def's kinds as expected: live and cache bytes gauges, requests and "
          "calloc's clearing time counters")
    for line in failures:
        print("FAIL:", line)
    print("%d families, %d processes, %d failures" % (len(names), len(pids_seen),
                                                      len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
