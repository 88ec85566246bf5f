# Draws bench/run-recycle's summary: per workload, each allocator's speed
# relative to glibc (top) and to tcmalloc (bottom), log scale, medians, bars
# = per-round paired min-max.
#   gnuplot -e "in='bench/out/recycle-summary.csv'; out='bench/out/recycle.png'" bench/plot-recycle.gp
if (!exists("in")) in = 'bench/out/recycle-summary.csv'
if (!exists("out")) out = 'bench/out/recycle.png'
if (!exists("title")) title = 'bench/run-recycle'

set datafile separator ','
set terminal pngcairo size 1400,1000 noenhanced font ",11"
set output out

# Rows prefixed with their group: one group per workload and parameter.
data = sprintf("< awk -F, 'NR > 1 && $1 != \"floor\" { k = $1 \" \" $2; if (!(k in g)) g[k] = n++; print g[k] \",\" $0 }' '%s'", in)
ngroups = int(system(sprintf("awk -F, 'NR > 1 && $1 != \"floor\" { g[$1 \" \" $2] = 1 } END { n = 0; for (k in g) n++; print n }' '%s'", in)))
xt = system(sprintf("awk -F, 'NR > 1 && $1 != \"floor\" { k = $1 \" \" $2; if (k in g) next; g[k] = 1; \
  s = s (n ? \", \" : \"\") \"\\\"\" $1 \"\\\\n\" $2 \"\\\" \" n + 0; n++ } END { print \"(\" s \")\" }' '%s'", in))
eval "set xtics " . xt

variants = "glibc glibc-thp jemalloc mimalloc tcmalloc hugezero hugezero-sync"
colors = "0x444444 0x999999 0x1b9e77 0x7570b3 0xe6ab02 0xd95f02 0xe7298a"
nv = words(variants)
bw = 0.8 / nv
xpos(g, i) = g + (i - (nv + 1) / 2.0) * bw
is(i) = strcol(4) eq word(variants, i)
# Columns after the group prefix: 10-12 vs glibc, 13-15 vs tcmalloc.

set multiplot layout 2,1 title title font ",10"
set bmargin 4
set style fill solid 0.85 border -1
set boxwidth bw
set xrange [-0.6:ngroups - 0.4]
set grid ytics
set key outside right top
set logscale y 10
set format y "%g"
set yrange [*:*]

set title "speed vs glibc (glibc median time / allocator median time; above 1 = faster), bars: per-round min-max"
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):10 with boxes \
       lc rgb word(colors, i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):10:11:12 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle

set title "speed vs tcmalloc (tcmalloc median time / allocator median time), bars: per-round min-max"
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):13 with boxes \
       lc rgb word(colors, i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):13:14:15 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle
unset multiplot
