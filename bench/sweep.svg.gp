set terminal svg size 1200,900 dynamic font 'sans,11'
set output 'bench/sweep.svg'
set termoption noenhanced
set multiplot layout 2,2
set logscale x 2
set grid
set key outside right top font ',9'
set xlabel 'ranks (threads) on 2 CPUs'
titles = "unsync unsync:noref pthread_mutex pthread_rwlock spin spin:noref rwlock rwlock:noref seqlock seqlock:noref rcu rcu:noref rcu-qsbr rcu-qsbr:noref "
set title 'shared-text: lookups/s'
set logscale y
set ylabel 'lookups/s'
plot for [i=0:13] 'bench/sweep.svg.dat' index (i+0) using 1:2 with linespoints title word(titles, i+1)
set title 'shared-text: efficiency'
unset logscale y
set ylabel 'efficiency'
set yrange [0:*]
plot for [i=0:13] 'bench/sweep.svg.dat' index (i+0) using 1:3 with linespoints title word(titles, i+1)
set autoscale y
titles = "unsync unsync:noref pthread_mutex pthread_rwlock spin spin:noref rwlock rwlock:noref seqlock seqlock:noref rcu rcu:noref rcu-qsbr rcu-qsbr:noref "
set title 'hot-policy: lookups/s'
set logscale y
set ylabel 'lookups/s'
plot for [i=0:13] 'bench/sweep.svg.dat' index (i+14) using 1:2 with linespoints title word(titles, i+1)
set title 'hot-policy: efficiency'
unset logscale y
set ylabel 'efficiency'
set yrange [0:*]
plot for [i=0:13] 'bench/sweep.svg.dat' index (i+14) using 1:3 with linespoints title word(titles, i+1)
set autoscale y
unset multiplot
