# Lookup cost against the number of ranges: bench/plots/lookup-cost.dat
set terminal svg size 720,460 dynamic font "sans,11"
set output "bench/plots/lookup-cost.svg"
set title "lookup-cost: one rank, no writer, counted lookups (median of 5, bars: fastest-slowest)"
set xlabel "ranges in the store"
set ylabel "ns per lookup"
set logscale xy
set key top left
set grid
plot "bench/plots/lookup-cost.dat" using 1:2:3:4 with yerrorlines title "unsync (red-black walk)", \
     "" using 1:5:6:7 with yerrorlines title "spin (red-black walk, lock)", \
     "" using 1:8:9:10 with yerrorlines title "rcu (index)", \
     "" using 1:11:12:13 with yerrorlines title "rcu-qsbr (index)"
