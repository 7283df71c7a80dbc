set terminal svg size 1600,520 dynamic font 'sans,11'
set output 'bench/plots/sweep.svg'
set termoption noenhanced
set datafile missing 'nan'
set multiplot layout 1,4
set logscale x 2
set grid
set key outside bottom center horizontal font ',9'
set xlabel 'ranks (reader threads) on 2 CPUs'
set xtics 2 format '%g'
titles = "unsync unsync:noref spin rwlock:noref seqlock:noref rcu rcu:noref rcu-qsbr:noref "
set title 'shared-text: lookups/s, all ranks'
set ylabel 'lookups/s'
set format y '%.0s%c'
set logscale y
plot for [i=0:7] 'bench/plots/sweep.dat' index (i+0) using 1:2 with linespoints title word(titles, i+1)
set autoscale y
set title 'shared-text: efficiency (1 = linear scaling)'
set ylabel 'lookups/s / (ranks x 1-rank walk)'
set format y '%.2f'
unset logscale y
set yrange [0:*]
plot for [i=0:7] 'bench/plots/sweep.dat' index (i+0) using 1:3 with linespoints title word(titles, i+1)
set autoscale y
set title 'shared-text: longest writer wait'
set ylabel 'longest ps_store_set() (us)'
set format y '%g'
set logscale y
plot for [i=0:7] 'bench/plots/sweep.dat' index (i+0) using 1:4 with linespoints title word(titles, i+1)
set autoscale y
set title 'shared-text: p99 lookup latency'
set ylabel 'p99 of 1 lookup in 32 (ns)'
set format y '%g'
set logscale y
plot for [i=0:7] 'bench/plots/sweep.dat' index (i+0) using 1:5 with linespoints title word(titles, i+1)
set autoscale y
unset multiplot
