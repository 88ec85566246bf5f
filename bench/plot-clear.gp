# Draws bench-clear's bandwidth rows: GB/s against extent (log x), one line
# per method; hz_clear and memset carry min-max bars.
#   gnuplot -e "in='bench/out/clear.csv'; out='bench/out/clear.png'" bench/plot-clear.gp
if (!exists("in")) in = 'bench/out/clear.csv'
if (!exists("out")) out = 'bench/out/clear.png'

set datafile separator ','
set terminal pngcairo size 1280,800 noenhanced font ",11"
set output out

# Methods in the order the CSV lists them: hz_clear and memset with min-max
# bars, the single kernels as plain lines. Machine and setup from its header.
awk_methods = "awk -F, '$1 == \"bandwidth\" && ($2 ~ /^kernel:/) == %d && !seen[$2]++ { printf \"%%s \", $2 }' '%s'"
main = system(sprintf(awk_methods, 0, in))
kernels = system(sprintf(awk_methods, 1, in))
cpu = system(sprintf("sed -n 's/^# cpu: //p' '%s' | head -n 1", in))
setup = system(sprintf("sed -n 's/^# \\(buffer .*\\)/\\1/p' '%s' | head -n 1", in))
when = system(sprintf("sed -n 's/^# bench-clear \\(.*\\)/\\1/p' '%s' | head -n 1", in))

set title sprintf("hz_clear bandwidth on pre-faulted THP memory, consecutive extents of a big buffer\n%s\n%s\n%s", when, cpu, setup)
set xlabel "extent (bytes cleared per call)"
set ylabel "GB/s (10^9 bytes/s), median; bars min-max"
set logscale x 2
set xtics ("4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576, \
           "2M" 2097152, "8M" 8388608, "32M" 33554432, "128M" 134217728, \
           "512M" 536870912, "1G" 1073741824)
set grid xtics ytics
set yrange [0:*]
set key outside right top

main_lc(m) = m eq "hz_clear" ? 0x000000 : m eq "hz_clear_hint" ? 0x1b9e77 : 0x808080
main_dt(m) = m eq "memset" ? 2 : 1
kernel_lc(i) = word("0xd95f02 0x7570b3 0xe7298a 0x66a61e 0xe6ab02 0xa6761d 0x1f78b4 0xb2df8a", (i - 1) % 8 + 1) + 0
kernel_dt(m) = strstrt(m, "_nt") > 0 ? 1 : 3

plot for [i = 1:words(main)] in \
       using (strcol(1) eq "bandwidth" && strcol(2) eq word(main, i) ? $3 : NaN):7:8:9 \
       with yerrorlines lw 3.5 dt main_dt(word(main, i)) lc rgb main_lc(word(main, i)) \
       pt 7 ps 0.9 title word(main, i), \
     for [i = 1:words(kernels)] in \
       using (strcol(1) eq "bandwidth" && strcol(2) eq word(kernels, i) ? $3 : NaN):7 \
       with linespoints lw 1.5 dt kernel_dt(word(kernels, i)) lc rgb kernel_lc(i) \
       pt 6 ps 0.7 title word(kernels, i)
