# Drawn by scripts/bench-tables.pl --plots from bench/results/lookup.jsonl
# (commit bd703c3d5ddb); gnuplot bench/results/lookup-cost.gp from the top of the tree.
set terminal svg size 900,560 dynamic font 'sans,12'
set output 'bench/results/lookup-cost.svg'
set title 'ns per lookup against ranges (commit bd703c3d5ddb; red circles: flagged points)'
set logscale xy
set xrange [40:2000000]
set xlabel 'ranges in the store'
set ylabel 'ns per lookup'
set key top left
set grid
plot 'bench/results/lookup-cost.dat' index 0 using 1:2 with linespoints lw 2 title 'bare red-black walk', \
     'bench/results/lookup-cost.dat' index 0 using 1:($3 > 0.5 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 0 using 1:4 with linespoints lw 2 title 'spin:node', \
     'bench/results/lookup-cost.dat' index 0 using 1:($5 > 0.5 ? $4 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 0 using 1:6 with linespoints lw 2 title 'rwlock:node', \
     'bench/results/lookup-cost.dat' index 0 using 1:($7 > 0.5 ? $6 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 0 using 1:8 with linespoints lw 2 title 'seqlock:node', \
     'bench/results/lookup-cost.dat' index 0 using 1:($9 > 0.5 ? $8 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 0 using 1:10 with linespoints lw 2 title 'rcu:node', \
     'bench/results/lookup-cost.dat' index 0 using 1:($11 > 0.5 ? $10 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 0 using 1:12 with linespoints lw 2 title 'rcu-qsbr:node', \
     'bench/results/lookup-cost.dat' index 0 using 1:($13 > 0.5 ? $12 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 1 using 1:2 with linespoints dt 2 title 'churn: rcu, 1 reader', \
     'bench/results/lookup-cost.dat' index 1 using 1:($3 > 0.5 ? $2 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle, \
     'bench/results/lookup-cost.dat' index 1 using 1:4 with linespoints dt 2 title 'churn: sorted, 1 reader', \
     'bench/results/lookup-cost.dat' index 1 using 1:($5 > 0.5 ? $4 : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle
