# bench/run-apps: per program and allocator, from apps.csv (one row per
# run) to apps-summary.csv. Ratios are paired per round, as the runs were
# interleaved: speed = glibc's wall time / this allocator's in the same
# round (above 1: faster), rss = this allocator's peak memory / glibc's in
# the same round (below 1: leaner); the median of those per-round ratios,
# with their min and max. Times and sizes are medians over the rounds.
# Peak memory is ru_maxrss plus the sampled peak of hugetlb pages, which
# RSS does not count: an allocator that takes pages from a hugetlb pool
# (hugezero's default when the pool has free pages) must not look leaner
# for it.
#   awk -F, -v OFS=, -v variants="glibc jemalloc ..." -f summary.awk apps.csv
function sort(a, n,   i, j, t) {
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
}
# Median of the space-separated numbers in s; sets lo and hi.
function median(s,   a, n) {
	n = split(s, a, " ")
	if (n == 0) { lo = hi = ""; return "" }
	sort(a, n)
	lo = a[1]; hi = a[n]
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# The median (and lo, hi) of the per-round ratios of column c between k
# and the baseline b: b / k when inv is 0 (speed), k / b when 1 (memory).
function paired(k, b, c, inv,   j, nr, rr, s, x, y) {
	s = ""
	nr = split(rounds[k], rr, " ")
	for (j = 1; j <= nr; j++) {
		if (!((b, rr[j], c) in byround))
			continue
		x = byround[k, rr[j], c]; y = byround[b, rr[j], c]
		if (x <= 0 || y <= 0)
			continue
		s = s " " (inv ? x / y : y / x)
	}
	return median(s)
}
/^#/ || $1 == "app" { next }
{
	# Columns: app,param,variant,round,seq,wall_s,user_s,sys_s,maxrss_kib,
	# rss_peak_kib,thp_peak_kib,hugetlb_peak_kib,samples,digest,load1,
	# others_cpus,nr_hugepages, then hz_procs .. hz_mmaps_aligned (18-27).
	k = $1 SUBSEP $2 SUBSEP $3
	g = $1 SUBSEP $2
	if (!(g in seen)) { seen[g] = 1; groups[++ng] = g }
	n[k]++
	wall[k] = wall[k] " " $6; user[k] = user[k] " " $7; sys[k] = sys[k] " " $8
	rss[k] = rss[k] " " ($9 + $12); thp[k] = thp[k] " " $11; htlb[k] = htlb[k] " " $12
	others[k] = others[k] " " $16
	if ($18 != "") {
		hzthp[k] = hzthp[k] " " $20; hz4k[k] = hz4k[k] " " $21; hzht[k] = hzht[k] " " $22
		hzhit[k] = hzhit[k] " " $23; hzmiss[k] = hzmiss[k] " " $24
		hzslow[k] = hzslow[k] " " $25; hzaligned[k] = hzaligned[k] " " $27
	}
	byround[k, $4, 6] = $6
	byround[k, $4, 9] = $9 + $12
	rounds[k] = rounds[k] " " $4
}
END {
	print "app,param,variant,n,wall_s,wall_min,wall_max,user_s,sys_s,peak_mem_mib,thp_peak_mib," \
	      "hugetlb_peak_mib,speed_vs_glibc,speed_min,speed_max,rss_vs_glibc,rss_min,rss_max," \
	      "others_cpus,hz_thp_mib,hz_4k_mib,hz_hugetlb_mib,hz_cache_hits,hz_cache_misses," \
	      "hz_fresh_thp_slow,hz_mmaps_aligned"
	nv = split(variants, vn, " ")
	for (i = 1; i <= ng; i++)
		for (j = 1; j <= nv; j++) {
			k = groups[i] SUBSEP vn[j]
			if (!(k in n))
				continue
			split(k, f, SUBSEP)
			b = groups[i] SUBSEP "glibc"
			w = median(wall[k]); wlo = lo; whi = hi
			sp = paired(k, b, 6, 0); splo = lo; sphi = hi
			rr = paired(k, b, 9, 1); rrlo = lo; rrhi = hi
			line = f[1] OFS f[2] OFS f[3] OFS n[k] OFS w OFS wlo OFS whi
			line = line OFS median(user[k]) OFS median(sys[k])
			line = line OFS sprintf("%.1f,%.1f,%.1f", median(rss[k]) / 1024,
						median(thp[k]) / 1024, median(htlb[k]) / 1024)
			line = line OFS sp OFS splo OFS sphi OFS rr OFS rrlo OFS rrhi
			line = line OFS median(others[k])
			line = line OFS median(hzthp[k]) OFS median(hz4k[k]) OFS median(hzht[k])
			line = line OFS median(hzhit[k]) OFS median(hzmiss[k]) OFS median(hzslow[k])
			line = line OFS median(hzaligned[k])
			print line
		}
}
