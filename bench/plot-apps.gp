# Draws bench/run-apps' summary: per program, each allocator's speed
# relative to glibc (top: glibc wall / its wall, above 1 = faster) and its
# peak memory (ru_maxrss + hugetlb pages) relative to glibc (bottom: below
# 1 = leaner), log scale; boxes are
# the medians of the per-round ratios, bars their min-max.
#   gnuplot -e "in='bench/out/apps-summary.csv'; out='bench/out/apps.png'" bench/plot-apps.gp
# (optionally variants='glibc-always tcmalloc hugezero': which bars to draw)
if (!exists("in")) in = 'bench/out/apps-summary.csv'
if (!exists("out")) out = 'bench/out/apps.png'
if (!exists("title")) title = 'bench/run-apps'

set datafile separator ','
set terminal pngcairo size 1600,1000 noenhanced font ",11"
set output out

# Rows prefixed with their group: one group per program and input.
data = sprintf("< awk -F, 'NR > 1 { k = $1 \" \" $2; if (!(k in g)) g[k] = n++; print g[k] \",\" $0 }' '%s'", in)
ngroups = int(system(sprintf("awk -F, 'NR > 1 { g[$1 \" \" $2] = 1 } END { n = 0; for (k in g) n++; print n }' '%s'", in)))
xt = system(sprintf("awk -F, 'NR > 1 { k = $1 \" \" $2; if (k in g) next; g[k] = 1; \
  s = s (n ? \", \" : \"\") \"\\\"\" $1 \"\\\\n\" $2 \"\\\" \" n + 0; n++ } END { print \"(\" s \")\" }' '%s'", in))
eval "set xtics " . xt
set xtics font ",9"

# glibc itself is the 1.0 line. variants: the ones to draw (bench/run-apps
# passes those in the summary), each in its own colour whatever the subset.
if (!exists("variants")) variants = "glibc-always glibc-hugetlb jemalloc mimalloc tcmalloc hugezero"
known = "glibc-always glibc-hugetlb jemalloc mimalloc tcmalloc hugezero hugezero-b"
palette = "0x999999 0x555555 0x1b9e77 0x7570b3 0xe6ab02 0xd95f02 0xe7298a"
slot(v, i) = i > words(known) ? words(known) : word(known, i) eq v ? i : slot(v, i + 1)
color(i) = word(palette, slot(word(variants, i), 1))
nv = words(variants)
bw = 0.8 / nv
xpos(g, i) = g + (i - (nv + 1) / 2.0) * bw
is(i) = strcol(4) eq word(variants, i)
# Columns after the group prefix: 14-16 speed vs glibc, 17-19 memory vs glibc.

set multiplot layout 2,1 title title font ",10"
set bmargin 4
set style fill solid 0.85 border -1
set boxwidth bw
set xrange [-0.6:ngroups - 0.4]
set grid ytics
set key outside right top
set logscale y 2
set format y "%g"
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front

set title "speed vs glibc (glibc wall time / allocator wall time, per round; above 1 = faster), bars: min-max of the rounds"
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):14 with boxes \
       lc rgb color(i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):14:15:16 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle

set title "peak memory vs glibc (allocator ru_maxrss + hugetlb / glibc's, per round; below 1 = leaner), bars: min-max of the rounds"
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):17 with boxes \
       lc rgb color(i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):17:18:19 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle
unset multiplot
