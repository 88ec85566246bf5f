# Draws bench/run-threads' summary: per thread count, each allocator's
# aggregate bandwidth (top: GB/s written by all threads together, log
# scale) and its speed relative to glibc (bottom: glibc time / its time,
# per round; above 1 = faster); boxes are the medians over the rounds,
# bars their min-max.
#   gnuplot -e "in='bench/out/threads-summary.csv'; out='bench/out/threads.png'" bench/plot-threads.gp
# (optionally variants='glibc tcmalloc hugezero hugezero-b')
if (!exists("in")) in = 'bench/out/threads-summary.csv'
if (!exists("out")) out = 'bench/out/threads.png'
if (!exists("title")) title = 'bench/run-threads'

set datafile separator ','
set terminal pngcairo size 1400,900 noenhanced font ",11"
set output out

# Rows prefixed with their group: one group per thread count and size.
data = sprintf("< awk -F, 'NR > 1 { k = $1 \" \" $2; if (!(k in g)) g[k] = n++; print g[k] \",\" $0 }' '%s'", in)
ngroups = int(system(sprintf("awk -F, 'NR > 1 { g[$1 \" \" $2] = 1 } END { n = 0; for (k in g) n++; print n }' '%s'", in)))
xt = system(sprintf("awk -F, 'NR > 1 { k = $1 \" \" $2; if (k in g) next; g[k] = 1; \
  s = s (n ? \", \" : \"\") \"\\\"\" \"N = \" $1 \"\\\\n\" $2 \" each\\\" \" n + 0; n++ } END { print \"(\" s \")\" }' '%s'", in))
eval "set xtics " . xt

if (!exists("variants")) variants = "glibc tcmalloc hugezero"
known = "glibc tcmalloc hugezero hugezero-b"
palette = "0x444444 0xe6ab02 0xd95f02 0xe7298a"
slot(v, i) = i > words(known) ? words(known) : word(known, i) eq v ? i : slot(v, i + 1)
color(i) = word(palette, slot(word(variants, i), 1))
nv = words(variants)
bw = 0.8 / nv
xpos(g, i) = g + (i - (nv + 1) / 2.0) * bw
is(i) = strcol(4) eq word(variants, i)
# Columns after the group prefix: 9-11 GB/s, 12-14 vs glibc.

set multiplot layout 2,1 title title font ",10"
set bmargin 4
set style fill solid 0.85 border -1
set boxwidth bw
set xrange [-0.6:ngroups - 0.4]
set grid ytics
set key outside right top
set logscale y 2
set format y "%g"

set title "GB/s written by all threads together (median over the rounds), bars: min-max"
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):9 with boxes \
       lc rgb color(i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):9:10:11 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle

set title "speed vs glibc (glibc time / allocator time, per round; above 1 = faster), bars: min-max of the rounds"
set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb "black" front
plot for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):12 with boxes \
       lc rgb color(i) title word(variants, i), \
     for [i = 1:nv] data using (is(i) ? xpos($1, i) : NaN):12:13:14 with yerrorbars \
       lc rgb "black" pt 0 ps 0 notitle
unset multiplot
