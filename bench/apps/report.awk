# bench/run-apps: the tables, from apps-summary.csv.
#   awk -F, -v table=pivot|detail -v md=0|1 -v variants="..." -f report.awk apps-summary.csv
# pivot: one row per program, one column per allocator: the median
#   per-round speed vs glibc (glibc wall / its wall) and peak memory vs glibc,
#   each with the per-round min-max.
# detail: one row per program and allocator: wall (min-max), sys, peak
#   memory (ru_maxrss + hugetlb),
#   peak AnonHugePages (+ hugetlb) sampled over the process tree, the
#   ratios, the other load, and hugezero's own account of its blocks.
function r(x) { return x == "" ? "-" : x + 0 >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }
function t(x) { return x == "" ? "-" : x + 0 >= 100 ? sprintf("%.0f", x) : x + 0 >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x) }
function ratio(m, a, b) { return m == "" ? "-" : sprintf("%s (%s-%s)", r(m), r(a), r(b)) }
function mib(x) { return x == "" ? "-" : sprintf("%.0f", x) }
function row(cells, n,   s, i) {
	if (md) {
		s = "|"
		for (i = 1; i <= n; i++) s = s " " cells[i] " |"
		return s
	}
	s = sprintf("%-*s", w[1], cells[1])
	for (i = 2; i <= n; i++) s = s "  " sprintf("%*s", w[i], cells[i])
	return s
}
function rule(n,   s, i) {
	s = "|---|"
	for (i = 2; i <= n; i++) s = s "---:|"
	return s
}
NR == 1 { next }
{
	prog = $1 " " $2
	if (!(prog in seenp)) { seenp[prog] = 1; progs[++np] = prog }
	k = prog SUBSEP $3
	have[k] = 1
	for (i = 1; i <= NF; i++) c[k, i] = $i
}
END {
	# Twice in 8 runs of the full --quick set, the tables came out empty
	# while the same summary gave rows when read again: say so and fail,
	# so bench/run-apps reads it again instead of printing no figures.
	if (np == 0) {
		printf "report.awk: no rows in %s (%d lines read)\n", FILENAME, NR > "/dev/stderr"
		exit 1
	}
	nv = split(variants, vn, " ")
	if (table == "pivot") {
		for (m = 1; m <= 2; m++) {
			h[1] = m == 1 ? "speed vs glibc" : "peak memory vs glibc"; nc = 1
			for (j = 2; j <= nv; j++) h[++nc] = vn[j]
			for (i = 1; i <= nc; i++) w[i] = i == 1 ? 30 : 17
			print row(h, nc)
			if (md) print rule(nc)
			for (p = 1; p <= np; p++) {
				cells[1] = progs[p]; nc = 1
				for (j = 2; j <= nv; j++) {
					k = progs[p] SUBSEP vn[j]
					o = m == 1 ? 13 : 16
					cells[++nc] = (k in have) ? ratio(c[k, o], c[k, o + 1], c[k, o + 2]) : "-"
				}
				print row(cells, nc)
			}
			print ""
		}
		exit
	}
	split("program|allocator|n|wall s (min-max)|sys s|peak MiB|THP MiB|speed vs glibc|memory vs glibc|others CPU|hugezero thp/4k/hugetlb MiB, hits/misses, slow", h, "|")
	nc = 11
	split("30 9 2 19 6 12 7 18 18 10 0", w, " ")
	print row(h, nc)
	if (md) print rule(nc)
	for (p = 1; p <= np; p++)
		for (j = 1; j <= nv; j++) {
			k = progs[p] SUBSEP vn[j]
			if (!(k in have)) continue
			cells[1] = progs[p]; cells[2] = vn[j]; cells[3] = c[k, 4]
			cells[4] = sprintf("%s (%s-%s)", t(c[k, 5]), t(c[k, 6]), t(c[k, 7]))
			cells[5] = t(c[k, 9])
			cells[6] = mib(c[k, 10])
			cells[7] = mib(c[k, 11]) (c[k, 12] + 0 > 0 ? " +" mib(c[k, 12]) " hugetlb" : "")
			cells[8] = vn[j] == "glibc" ? "1" : ratio(c[k, 13], c[k, 14], c[k, 15])
			cells[9] = vn[j] == "glibc" ? "1" : ratio(c[k, 16], c[k, 17], c[k, 18])
			cells[10] = r(c[k, 19])
			cells[11] = c[k, 20] == "" ? "" : sprintf("%s/%s/%s, %s/%s, %s", mib(c[k, 20]),
				    mib(c[k, 21]), mib(c[k, 22]), c[k, 23], c[k, 24], c[k, 25])
			print row(cells, nc)
		}
}
