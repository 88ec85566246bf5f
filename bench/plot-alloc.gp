# Draws bench/run-alloc's summary: per workload, each allocator's speed
# relative to glibc in the same phase (top, log scale, bars = per-round
# min-max) and its peak memory relative to glibc (bottom).
#   gnuplot -e "in='bench/out/alloc-summary.csv'; out='bench/out/alloc.png'" bench/plot-alloc.gp
if (!exists("in")) in = 'bench/out/alloc-summary.csv'
if (!exists("out")) out = 'bench/out/alloc.png'
if (!exists("title")) title = 'bench/run-alloc'

set datafile separator ','
set terminal pngcairo size 1600,1000 noenhanced font ",11"
set output out

# Rows prefixed with their group: one group per phase, workload and size.
data = sprintf("< awk -F, 'NR > 1 { k = $1 \" \" $2 \" \" $3; if (!(k in g)) g[k] = n++; print g[k] \",\" $0 }' '%s'", in)
ngroups = int(system(sprintf("awk -F, 'NR > 1 { g[$1 \" \" $2 \" \" $3] = 1 } END { n = 0; for (k in g) n++; print n }' '%s'", in)))
xt = system(sprintf("awk -F, 'NR > 1 { k = $1 \" \" $2 \" \" $3; if (k in g) next; g[k] = 1; \
  l = $2 \"\\\\n\" $3 ($1 == \"pool\" ? \", hugetlb pool\" : \", no pool\"); \
  s = s (n ? \", \" : \"\") \"\\\"\" l \"\\\" \" n + 0; n++ } END { print \"(\" s \")\" }' '%s'", in))
eval "set xtics " . xt

# glibc itself is the 1.0 line.
variants = "glibc-thp jemalloc mimalloc tcmalloc hugezero hugezero-thp"
colors = "0x999999 0x1b9e77 0x7570b3 0xe6ab02 0xd95f02 0xe7298a"
nv = words(variants)
bw = 0.8 / nv
xpos(g, i) = g + (i - (nv + 1) / 2.0) * bw
is(i) = strcol(5) eq word(variants, i)

set multiplot layout 2,1 title title font ",10"
set bmargin 4
set style fill solid 0.85 border -1
set boxwidth bw
set xrange [-0.6:ngroups - 0.4]
set grid ytics
set key outside right top

set title "speed vs glibc (glibc median time / allocator median time; above 1 = faster), bars: per-round min-max"
set logscale y 2
set yrange [0.125:16]
set ytics ("1/8" 0.125, "1/4" 0.25, "1/2" 0.5, "1" 1, "1.5" 1.5, "2" 2, "3" 3, "4" 4, "8" 8, "16" 16)
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):11 with boxes \
       lc rgb word(colors, i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):11:12:13 with yerrorbars \
       lc rgb "black" pt 7 ps 0.4 notitle

set title "peak memory vs glibc (max RSS + hugetlb pages in use, medians; small-churn 16x256 peaks at about 2 MiB, so its ratios are library footprints)"
unset logscale y
set yrange [0:*]
set ytics auto
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
set arrow 2 from graph 0, first 1.5 to graph 1, first 1.5 nohead dt 2 lc rgb "red" front
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):15 with boxes \
       lc rgb word(colors, i) title word(variants, i)
unset multiplot
