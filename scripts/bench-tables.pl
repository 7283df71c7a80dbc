#!/usr/bin/perl
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The tables of BENCHMARKS.md and README.md, and the plots beside the
# results, made from the result files of scripts/bench.sh --results
# (bench/results/NAME.jsonl: a header record naming the commit, the
# machine and the command, then polstore-stress --json records).
#
# Each table sits between "<!-- generated: NAME -->" and "<!-- end -->" in
# the Markdown files; everything between them is this script's.  Every
# table begins with the line naming its result file, the commit, the
# machine and the command, and ends with the spread of its repetitions.
# A figure quoted in prose sits between "<!-- figure: NAME -->" and
# "<!-- /figure -->" on one line, and is this script's too.
#
# Every other figure of a measured kind (a time in ns or us, a ratio such
# as 1.2x, a size in B) in README.md, BENCHMARKS.md and docs/*.md must
# stand in a paragraph that names the commit it was measured at
# (docs/benchmark-history.md, the record of earlier runs, does so
# throughout): --check fails on one that does not.
#
# Usage: scripts/bench-tables.pl [--check] [--plots] [--root DIR]
#   (none)    rewrite the generated tables and figures in place
#   --check   change nothing; exit 1 naming each table or figure that
#             differs from what the result files give, and each figure in
#             prose that names no commit (CI: the docs label)
#   --plots   also draw bench/results/*.svg with gnuplot (the .dat and .gp
#             files stay beside them)
use strict;
use warnings;
use JSON::PP;

my ($check, $plots, $root) = (0, 0, undef);
while (@ARGV) {
	my $a = shift @ARGV;
	if ($a eq '--check') { $check = 1 }
	elsif ($a eq '--plots') { $plots = 1 }
	elsif ($a eq '--root') { $root = shift @ARGV }
	else { die "bench-tables.pl: unknown option $a\n" }
}
unless (defined $root) {
	($root = $0) =~ s{/?scripts/[^/]+$}{};
	$root = '.' if $root eq '';
}
chdir $root or die "bench-tables.pl: $root: $!\n";
my $results = 'bench/results';
my @files = ('BENCHMARKS.md', 'README.md', sort glob('docs/*.md'));
my $history = 'docs/benchmark-history.md';

# ---- reading the result files ------------------------------------------------------------

my %runs; # name -> { header => {...}, points => [...], end => {...} }

sub run {
	my ($name) = @_;
	return $runs{$name} if $runs{$name};
	my $f = "$results/$name.jsonl";
	open my $fh, '<', $f or die "bench-tables.pl: $f: $!\n";
	my $r = { file => $f, points => [] };
	my $json = JSON::PP->new;
	while (my $line = <$fh>) {
		next unless $line =~ /\S/;
		my $o = eval { $json->decode($line) };
		die "bench-tables.pl: $f:$.: not JSON\n" unless $o;
		if ($o->{header}) { $r->{header} = $o }
		elsif ($o->{end}) { $r->{end} = $o }
		else { push @{$r->{points}}, $o }
	}
	die "bench-tables.pl: $f: no header record (commit, machine, command)\n"
		unless $r->{header} && $r->{header}{commit};
	return $runs{$name} = $r;
}

# The points of @run that match every key => value of %want.
sub pts {
	my ($r, %want) = @_;
	return grep {
		my $p = $_;
		!grep { !defined $p->{$_} || $p->{$_} ne $want{$_} } keys %want
	} @{$r->{points}};
}

sub pt {
	my @p = pts(@_);
	return $p[0];
}

# ---- formatting --------------------------------------------------------------------------

my %seen_warn; # the warnings of the table being made

sub flag {
	my ($p) = @_;
	return '' unless $p && $p->{warn};
	$seen_warn{$_} = 1 for split /\+/, $p->{warn};
	return ' !';
}

sub num {
	my ($v) = @_;
	return '-' unless defined $v;
	my $a = abs $v;
	return sprintf('%.0f', $v) if $a >= 100;
	return sprintf('%.1f', $v) if $a >= 10;
	return sprintf('%.2f', $v);
}

sub ns {
	my ($v) = @_;
	return '-' unless defined $v;
	return num($v / 1e6) . ' ms' if $v >= 1e6;
	return num($v / 1e3) . ' us' if $v >= 1e4;
	return num($v) . ' ns';
}

sub rate {
	my ($v) = @_;
	return '-' unless defined $v;
	return num($v / 1e6) . ' M' if $v >= 1e6;
	return num($v / 1e3) . ' k' if $v >= 1e3;
	return num($v);
}

sub ratio {
	my ($v) = @_;
	return defined $v ? sprintf('%.2fx', $v) : '-';
}

sub pow10 {
	my ($n) = @_;
	my $l = log($n) / log(10);
	return abs($l - int($l + 0.5)) < 1e-9 && $n >= 1000 ? sprintf('10^%d', int($l + 0.5)) : "$n";
}

sub table {
	my ($head, @rows) = @_;
	my $s = '| ' . join(' | ', @$head) . " |\n";
	$s .= '|' . join('|', map { $_ == 0 ? '---' : '---:' } 0 .. $#$head) . "|\n";
	$s .= '| ' . join(' | ', @$_) . " |\n" for @rows;
	return $s;
}

# The line above each table: where its figures come from.
sub source {
	my (@names) = @_;
	my (%by, @order, @loads);
	for my $n (@names) {
		my $r = run($n);
		my $h = $r->{header};
		my $m = $h->{machine} || {};
		(my $date = $h->{date} || '?') =~ s/T.*//;
		my $what = sprintf("commit `%s`, %s, %s, %s cores, %.0f GiB, Linux %s", $h->{commit},
			$date, $m->{cpu} || '?', $m->{cores} || '?', ($m->{memory_kib} || 0) / 1048576,
			$m->{kernel} || '?');
		push @order, $what unless $by{$what};
		push @{$by{$what}}, "`$r->{file}`";
		push @loads, $h->{load_start}[0] if $h->{load_start};
		push @loads, $r->{end}{load_end}[0] if $r->{end} && $r->{end}{load_end};
	}
	@loads = sort { $a <=> $b } @loads;
	my $s = 'Generated by `scripts/bench-tables.pl` from ' .
		join(";
", map { join(', ', @{$by{$_}}) . ": $_" } @order);
	$s .= sprintf(",
load average %.0f to %.0f", $loads[0], $loads[-1]) if @loads;
	$s .= @names == 1 ? ".
Command: `" . run($names[0])->{header}{command} . "`.

" :
		".
Commands: `scripts/bench.sh --results --list`.

";
	return $s;
}

# How far apart the repetitions of the table's points lay: @r holds
# [slowest over fastest, the point's name] per point.
sub spread {
	my ($what, @r) = @_;
	@r = sort { $a->[0] <=> $b->[0] } grep { defined $_->[0] && $_->[0] >= 1 } @r;
	return '' unless @r;
	my $w = $r[-1];
	return sprintf("\nSpread: %s; over the table's %d points, %s at the median point, %s at the " .
		"widest (%s).\n", $what, scalar @r, ratio($r[$#r / 2][0]), ratio($w->[0]), $w->[1]);
}

# The slowest over the fastest repetition of a point, from its extremes.
sub rep_ratio {
	my ($p, $lo, $hi, $inverse) = @_;
	my ($a, $b) = ($p->{$lo}, $p->{$hi});
	return undef unless defined $a && defined $b && $a > 0 && $b > 0;
	return $inverse ? $a / $b : $b / $a;
}

sub reps {
	my ($r) = @_;
	my %n;
	$n{$_->{reps}} = 1 for grep { $_->{reps} } @{$r->{points}};
	return join(' or ', sort { $a <=> $b } keys %n) || '?';
}

sub footnote {
	return '' unless %seen_warn;
	my $s = "\n`!`: polstore-stress flagged the point (" .
		join(', ', map { "`$_`" } sort keys %seen_warn) .
		"; `man polstore-stress`, WARNINGS): read it as the load's figure, not the code's.\n";
	%seen_warn = ();
	return $s;
}

# ---- the tables --------------------------------------------------------------------------

my @variants = qw(spin rwlock seqlock rcu rcu-qsbr);

# Node lookup (ps_store_lookup_node()) per variant at 64, 10^5, 10^6 ranges.
sub gen_variants {
	my $lk = run('lookup');
	my $wr = run('write');
	my $sc = run('scale');
	my $fo = run('flatout');
	my $me = run('memory');
	my (@rows, @sp);
	for my $v (@variants) {
		my @c = ("`$v`");
		for my $n (64, 100000, 1000000) {
			my $p = pt($lk, variant => "$v:node", ranges => $n);
			push @c, $p ? ns($p->{lookup_ns}) . ', ' . ratio($p->{cost_ratio}) . flag($p) : '-';
			push @sp, [rep_ratio($p, 'lookup_ns', 'lookup_ns_max'), "`$v`, " . pow10($n)] if $p;
		}
		my $w = pt($wr, variant => $v, ranges => 10000, kind => 'split');
		push @c, $w ? ratio($w->{cost_ratio}) . flag($w) : '-';
		my $s = pt($sc, scenario => 'shared-text', variant => $v, ranks => 2);
		push @c, $s ? num($s->{cpu_efficiency}) . flag($s) : '-';
		my $f = pt($fo, variant => $v);
		push @c, $f ? num($f->{cpu_efficiency}) . flag($f) : '-';
		my $m = pt($me, variant => $v);
		push @c, $m ? sprintf('%.0f B', $m->{store_heap_idle}) . flag($m) : '-';
		push @rows, \@c;
	}
	return source(qw(lookup write scale flatout memory)) . table(
		['variant', 'lookup, 64 ranges', '10^5 ranges', '10^6 ranges',
		 'a set (split), 10^4 ranges', '2 readers and a writer: cpueff',
		 'a reader beside a flat-out writer: cpueff', 'heap of a small store'], @rows) .
		"\nLookups: `ps_store_lookup_node()`, ns (the fastest repetition, the least disturbed)\n" .
		"and x the bare red-black walk of the same form (`unsync:node`);\n" .
		"a set: x the unsynchronised set; cpueff: lookups per CPU-second over the 1-rank bare walk's;\n" .
		"small store: 1 to 16 ranges, 100 ms after 100 sets each.\n" .
		spread('the slowest of a lookup\'s ' . reps($lk) . ' repetitions over its fastest', @sp) .
		footnote();
}

# ns per lookup against ranges: the walk, each variant's counted and node forms.
sub gen_lookup {
	my $r = run('lookup');
	my %n;
	$n{$_->{ranges}} = 1 for @{$r->{points}};
	my @sizes = sort { $a <=> $b } keys %n;
	my (@rows, @sp);
	for my $form ('', ':node') {
		for my $n (@sizes) {
			my $base = pt($r, variant => "unsync$form", ranges => $n);
			my @c = (pow10($n), $form ? 'node' : 'counted',
				$base ? ns($base->{lookup_ns}) . flag($base) : '-');
			for my $v (@variants) {
				my $p = pt($r, variant => "$v$form", ranges => $n);
				push @c, $p ? ns($p->{lookup_ns}) . ', ' . ratio($p->{cost_ratio}) . flag($p) : '-';
				push @sp, [rep_ratio($p, 'lookup_ns', 'lookup_ns_max'),
					"`$v$form`, " . pow10($n)] if $p;
			}
			push @rows, \@c;
		}
	}
	return source('lookup') . table(['ranges', 'lookup', 'bare walk', @variants], @rows) .
		"\nThe fastest repetition (the least disturbed; `lookup_ns_median` and `lookup_ns_max` in the result\n" .
		"file give the spread), ns per lookup (the loop's own cost subtracted) and x the bare walk of\n" .
		"the same form in the same run: `counted` is `ps_store_lookup()` + `ps_policy_put()` against a\n" .
		"walk with an atomic get and put, `node` is `ps_store_lookup_node()` against the bare walk.\n" .
		spread('the slowest of a point\'s ' . reps($r) . ' repetitions over its fastest', @sp) .
		footnote();
}

sub gen_write {
	my $r = run('write');
	my %n;
	$n{$_->{ranges}} = 1 for @{$r->{points}};
	my (@rows, @sp);
	for my $n (sort { $a <=> $b } keys %n) {
		for my $k (qw(replace split remove span16)) {
			my $b = pt($r, variant => 'unsync', ranges => $n, kind => $k) or next;
			my @c = (pow10($n), $k, ns($b->{set_ns}) . flag($b));
			for my $v ('unsync', @variants) {
				my $p = pt($r, variant => $v, ranges => $n, kind => $k);
				push @sp, [rep_ratio($p, 'set_ns_min', 'set_ns_max'),
					"`$v`, $k, " . pow10($n)] if $p;
				next if $v eq 'unsync';
				push @c, $p ? ratio($p->{cost_ratio}) . flag($p) : '-';
			}
			my $c = pt($r, variant => 'rcu', ranges => $n, kind => $k);
			push @c, $c && defined $c->{copied_mean} ? sprintf('%.2f', $c->{copied_mean}) : '-';
			push @rows, \@c;
		}
	}
	return source('write') . table(['ranges', 'set', 'unsynchronised', @variants,
		'rcu: nodes copied'], @rows) .
		"\nOne thread, no reader: median ns of the unsynchronised in-place set, and each variant's set as\n" .
		"x that.  `replace` gives a range a new policy, `split` cuts one in two, `remove` clears one,\n" .
		"`span16` replaces 16 ranges with one.  `rcu: nodes copied`: the read index's nodes an RCU set\n" .
		"copied, on average (a count, which the load does not disturb).\n" .
		spread('the slowest of a set\'s ' . reps($r) . ' repetitions over its fastest', @sp) .
		footnote();
}

sub gen_scale {
	my $r = run('scale');
	my (@rows, @sp);
	for my $sc ('shared-text', 'hot-policy') {
		for my $p (pts($r, scenario => $sc, ranks => 2)) {
			next if $p->{variant} =~ /^unsync/;
			push @sp, [rep_ratio($p, 'ops_per_sec_min', 'ops_per_sec_max'), "$sc, `$p->{variant}`"];
			push @rows, [$sc, "`$p->{variant}`", num($p->{efficiency}) . flag($p),
				num($p->{cpu_efficiency}) . flag($p), ns($p->{p99_ns}),
				ns($p->{writer_max_wait_ns}), num($p->{writer_ops_per_sec})];
		}
	}
	return source('scale') . table(['scenario', 'variant', 'efficiency', 'cpueff', 'lookup p99',
		'longest set', 'sets/s'], @rows) .
		"\n2 reader ranks and a writer setting every 1 ms; efficiency: throughput over 2 x the 1-rank\n" .
		"baseline's; cpueff: the same per CPU-second the ranks got.  shared-text: each rank looks up\n" .
		"random pages of 64 ranges; hot-policy: all look up one page.\n" .
		spread('the fastest of a point\'s ' . reps($r) . ' repetitions\' throughput over its slowest', @sp) .
		footnote();
}

sub gen_flatout {
	my $r = run('flatout');
	my (@rows, @sp);
	for my $p (pts($r, ranks => 1)) {
		next if $p->{variant} =~ /^unsync/;
		push @sp, [rep_ratio($p, 'ops_per_sec_min', 'ops_per_sec_max'), "`$p->{variant}`"];
		push @rows, ["`$p->{variant}`", num($p->{cpu_efficiency}) . flag($p),
			rate($p->{writer_ops_per_sec}) . flag($p), ns($p->{writer_max_wait_ns})];
	}
	return source('flatout') . table(['variant', 'reader cpueff', 'writer sets/s', 'longest set'],
		@rows) . spread('the fastest of the reader\'s ' . reps($r) .
		' repetitions\' throughput over its slowest', @sp) . footnote();
}

sub gen_oversub {
	my $r = run('oversub');
	my (%rk, %vs, @vord);
	for (@{$r->{points}}) {
		next if $_->{variant} =~ /^unsync/;
		$rk{$_->{ranks}} = 1;
		push @vord, $_->{variant} unless $vs{$_->{variant}}++;
	}
	my @ranks = sort { $a <=> $b } keys %rk;
	my @rows;
	for my $v (@vord) {
		my @c = ("`$v`");
		for my $k (@ranks) {
			my $p = pt($r, variant => $v, ranks => $k);
			push @c, $p ? ns($p->{p99_ns}) . ' / ' . ns($p->{max_ns}) . flag($p) : '-';
		}
		push @rows, \@c;
	}
	return source('oversub') . table(['variant', map { "$_ ranks: p99 / max" } @ranks], @rows) .
		"\nshared-text, lookup latency of sampled faults beside a writer setting every 1 ms.\n" .
		footnote();
}

sub churn_row {
	my ($p) = @_;
	return ($p->{ranks} ? "$p->{ranks} reader" . ($p->{ranks} > 1 ? 's' : '') : 'no reader') .
		($p->{writers} ? ($p->{ranks} ? ' + writer' : ', writer alone') : ', no writer');
}

sub gen_churn {
	my $r = run('churn');
	my (%n, %m, @maps, @rowkeys, %rk);
	for (@{$r->{points}}) {
		$n{$_->{ranges}} = 1;
		push @maps, $_->{variant} unless $m{$_->{variant}}++;
		my $k = "$_->{ranks}:$_->{writers}";
		push @rowkeys, $k unless $rk{$k}++;
	}
	my $ref = $r->{points}[0]{reference} || '?';
	my (@rows, @sp);
	for my $size (sort { $a <=> $b } keys %n) {
		for my $k (@rowkeys) {
			my ($rd, $wr) = split /:/, $k;
			my $first = pt($r, ranges => $size, ranks => $rd, writers => $wr) or next;
			my @c = (pow10($size), churn_row($first));
			for my $map (@maps) {
				my $p = pt($r, ranges => $size, ranks => $rd, writers => $wr, variant => $map);
				push @sp, [rep_ratio($p, 'ops_per_sec_min', 'ops_per_sec_max'),
					"`$map`, " . pow10($size) . ', ' . churn_row($p)] if $p && $rd;
				my @x;
				push @x, rate($p->{ops_per_sec}) . ' (' . ratio($p->{reader_ratio}) . ')'
					if $p && $rd;
				push @x, 'w ' . rate($p->{writer_ops_per_sec}) . ' (' .
					ratio($p->{writer_ratio}) . ')' if $p && $wr;
				push @c, $p ? join(', ', @x) . flag($p) : '-';
			}
			push @rows, \@c;
		}
	}
	return source('churn') . table(['ranges', 'row', map { "`$_`" } @maps], @rows) .
		"\nLookups per second of all readers, `w`: the writer's operations per second (remove a range,\n" .
		"insert one), each x `$ref`'s in the same row.\n" .
		spread('the fastest of the readers\' ' . reps($r) . ' repetitions over their slowest', @sp) .
		footnote();
}

sub gen_faults {
	my $r = run('faults');
	my (@rows, @sp);
	for my $p (@{$r->{points}}) {
		push @sp, [rep_ratio($p, 'ops_per_sec_min', 'ops_per_sec_max'),
			"`$p->{variant}`, $p->{ranks} rank" . ($p->{ranks} > 1 ? 's' : '')];
		push @rows, ["`$p->{variant}`", $p->{ranks}, rate($p->{ops_per_sec}) . flag($p),
			defined $p->{fixed_ratio} ? ratio($p->{fixed_ratio}) : '-',
			defined $p->{lookup_ns} ? ns($p->{lookup_ns}) : '-',
			sprintf('%.2f %%', 100 * ($p->{lookup_share} || 0)),
			ns($p->{p50_ns}), ns($p->{p99_ns})];
	}
	return source('faults') . ("No point: userfaultfd was not available to the run.\n") unless @rows;
	return source('faults') . table(['plane', 'ranks', 'faults/s', 'x fixed', 'lookup',
		'lookup share', 'fault p50', 'fault p99'], @rows) .
		"\n`fixed`: the fault plane with no lookup (every page to one node); the others look the page\n" .
		"up in a store of that variant while a writer sets.\n" .
		spread('the fastest of a point\'s ' . reps($r) . ' repetitions over its slowest', @sp) .
		footnote();
}

sub gen_memory {
	my $me = run('memory');
	my $lk = run('lookup');
	my @rows;
	for my $v (@variants) {
		my $m = pt($me, variant => $v) or next;
		my $l = pt($lk, variant => $v, ranges => 1000000);
		push @rows, ["`$v`", sprintf('%.0f B', $m->{store_heap_fresh}),
			sprintf('%.0f B', $m->{store_heap_after_sets}),
			sprintf('%.0f B', $m->{store_heap_idle}) . flag($m),
			$l ? sprintf('%.0f B', $l->{bytes_per_range}) : '-'];
	}
	return source('memory', 'lookup') . table(['variant', 'small store: fresh',
		'after 100 sets', '100 ms later', 'a range, 10^6 ranges'], @rows) .
		"\nHeap per store of 10^4 stores of 1 to 16 ranges (many-stores), and bytes the library\n" .
		"allocated per range of one store of 10^6 ranges filled in order (lookup-cost).\n" . footnote();
}

# ---- the figures quoted in prose ---------------------------------------------------------

sub commit_of {
	my ($name) = @_;
	return 'commit `' . run($name)->{header}{commit} . '`';
}

# The node lookup at 64 ranges, from the cheapest variant to the dearest.
sub fig_lookup64 {
	my $r = run('lookup');
	my @v = sort { $a <=> $b } map { $_->{lookup_ns} }
		grep { $_ } map { pt($r, variant => "$_:node", ranges => 64) } @variants;
	return sprintf('%s-%s at 64 ranges (%s)', ns($v[0]) =~ s/ ns$//r, ns($v[-1]), commit_of('lookup'));
}

# What the read index adds to a range of a store filled in order: the
# RCU stores' bytes a range over SPIN's.
sub fig_index_bytes {
	my $r = run('lookup');
	my $base = pt($r, variant => 'spin', ranges => 1000000) or return '?';
	my @v = sort { $a <=> $b } map { $_->{bytes_per_range} - $base->{bytes_per_range} }
		grep { $_ } map { pt($r, variant => $_, ranges => 1000000) } qw(rcu rcu-qsbr);
	return sprintf('%.0f-%.0f bytes', $v[0], $v[-1]);
}

my %fig = ('lookup-64' => \&fig_lookup64, 'index-bytes' => \&fig_index_bytes);

my %gen = (
	variants => \&gen_variants, lookup => \&gen_lookup, write => \&gen_write,
	scale => \&gen_scale, flatout => \&gen_flatout, oversub => \&gen_oversub,
	churn => \&gen_churn, faults => \&gen_faults, memory => \&gen_memory,
);

# ---- the plots ---------------------------------------------------------------------------

sub write_file {
	my ($f, $s) = @_;
	open my $fh, '>', $f or die "bench-tables.pl: $f: $!\n";
	print $fh $s;
	close $fh or die "bench-tables.pl: $f: $!\n";
}

sub gnuplot {
	my ($gp) = @_;
	if (system('sh', '-c', 'command -v gnuplot >/dev/null') != 0) {
		print STDERR "bench-tables.pl: no gnuplot: $gp kept, no image\n";
		return;
	}
	system('gnuplot', $gp) == 0 or die "bench-tables.pl: gnuplot $gp failed\n";
}

# ns per lookup against ranges: the bare walk, the node lookups, and
# the churn maps' readers alone (1e9 / lookups per second of one reader,
# the churn harness's cost included).
sub plot_lookup {
	my $r = run('lookup');
	my @series = ('unsync:node', map { "$_:node" } @variants);
	my $dat = "# ranges, then per series: ns (median), flagged (1/0)\n# " .
		join(' ', @series) . "\n";
	my %n;
	$n{$_->{ranges}} = 1 for @{$r->{points}};
	for my $n (sort { $a <=> $b } keys %n) {
		$dat .= $n;
		for my $s (@series) {
			my $p = pt($r, variant => $s, ranges => $n);
			$dat .= $p ? sprintf(' %.2f %d', $p->{lookup_ns}, $p->{warn} ? 1 : 0) : ' NaN 0';
		}
		$dat .= "\n";
	}
	my @cmaps;
	if (-e "$results/churn.jsonl") {
		my $c = run('churn');
		my %m;
		# rcu as the link between the two runs, and the maps of plugins
		my %store = map { $_ => 1 } @variants;
		for (pts($c, ranks => 1, writers => 0)) {
			next if $store{$_->{variant}} && $_->{variant} ne 'rcu';
			push @cmaps, $_->{variant} unless $m{$_->{variant}}++;
		}
		$dat .= "\n\n# churn, 1 reader alone: ranges, then per map: ns, flagged\n# @cmaps\n";
		my %cn;
		$cn{$_->{ranges}} = 1 for @{$c->{points}};
		for my $n (sort { $a <=> $b } keys %cn) {
			$dat .= $n;
			for my $m (@cmaps) {
				my $p = pt($c, ranks => 1, writers => 0, variant => $m, ranges => $n);
				$dat .= $p && $p->{ops_per_sec} ?
					sprintf(' %.2f %d', 1e9 / $p->{ops_per_sec}, $p->{warn} ? 1 : 0) : ' NaN 0';
			}
			$dat .= "\n";
		}
	}
	write_file("$results/lookup-cost.dat", $dat);
	my @plot;
	for my $i (0 .. $#series) {
		my $t = $series[$i] eq 'unsync:node' ? 'bare red-black walk' : $series[$i];
		push @plot, sprintf("'%s' index 0 using 1:%d with linespoints lw 2 title '%s'",
			"$results/lookup-cost.dat", 2 + 2 * $i, $t);
		push @plot, sprintf("'%s' index 0 using 1:(\$%d > 0.5 ? \$%d : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle",
			"$results/lookup-cost.dat", 3 + 2 * $i, 2 + 2 * $i);
	}
	for my $i (0 .. $#cmaps) {
		push @plot, sprintf("'%s' index 1 using 1:%d with linespoints dt 2 title 'churn: %s, 1 reader'",
			"$results/lookup-cost.dat", 2 + 2 * $i, $cmaps[$i]);
		push @plot, sprintf("'%s' index 1 using 1:(\$%d > 0.5 ? \$%d : NaN) with points pt 6 ps 2.5 lc rgb 'red' notitle",
			"$results/lookup-cost.dat", 3 + 2 * $i, 2 + 2 * $i);
	}
	my $h = $r->{header};
	write_file("$results/lookup-cost.gp", <<"EOF" . 'plot ' . join(", \\\n     ", @plot) . "\n");
# Drawn by scripts/bench-tables.pl --plots from $r->{file}
# (commit $h->{commit}); gnuplot $results/lookup-cost.gp from the top of the tree.
set terminal svg size 900,560 dynamic font 'sans,12'
set output '$results/lookup-cost.svg'
set title 'ns per lookup against ranges (commit $h->{commit}; red circles: flagged points)'
set logscale xy
set xrange [40:2000000]
set xlabel 'ranges in the store'
set ylabel 'ns per lookup'
set key top left
set grid
EOF
	gnuplot("$results/lookup-cost.gp");
}

# The churn rows as bars, each map's figure over the maple tree's.
sub plot_churn {
	return unless -e "$results/churn.jsonl";
	my $c = run('churn');
	return unless pt($c, variant => 'maple');
	my (%m, @maps);
	for (@{$c->{points}}) { push @maps, $_->{variant} unless $m{$_->{variant}}++ }
	@maps = grep { $_ ne 'maple' } @maps;
	my $dat = "# row, then per map: its figure over maple's\n# @maps\n";
	for my $p (pts($c, variant => 'maple')) {
		for my $what ('reader', 'writer') {
			next if $what eq 'reader' ? !$p->{ranks} : !$p->{writers};
			my $label = pow10($p->{ranges}) . ': ' . churn_row($p) . ($what eq 'writer' ? ' (writer)' : '');
			$dat .= "\"$label\"";
			for my $m (@maps) {
				my $q = pt($c, variant => $m, ranges => $p->{ranges}, ranks => $p->{ranks},
					writers => $p->{writers});
				my $v = $q ? $q->{"${what}_ratio"} : undef;
				$dat .= defined $v ? sprintf(' %.3f', $v) : ' NaN';
			}
			$dat .= "\n";
		}
	}
	write_file("$results/churn.dat", $dat);
	my @plot = map { sprintf("'%s' using %d:xtic(1) title '%s'", "$results/churn.dat", 2 + $_, $maps[$_]) }
		0 .. $#maps;
	write_file("$results/churn.gp", <<"EOF" . 'plot ' . join(', ', @plot) . "\n");
# Drawn by scripts/bench-tables.pl --plots from $c->{file}
# (commit $c->{header}{commit}); gnuplot $results/churn.gp from the top of the tree.
set terminal svg size 1000,560 dynamic font 'sans,11'
set output '$results/churn.svg'
set title 'churn: each map over the maple tree (1 = as fast)'
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8
set xtics rotate by -40
set rmargin 12
set key outside top right
set ylabel 'x maple'
set grid y
EOF
	gnuplot("$results/churn.gp");
}

# ---- the Markdown files ------------------------------------------------------------------

# A figure of a measured kind in prose: a time, a ratio, a size in bytes.
my $measured = qr{(?<![\w.])\d+(?:\.\d+)?(?:-\d+(?:\.\d+)?)?(?:\s?(?:ns|us)\b|x\b|\sB\b)};

# Print each figure of $text outside the generated tables and figures, and
# outside code, whose paragraph names no commit; return how many.
sub unnamed_figures {
	my ($f, $text) = @_;
	return 0 if $f eq $history;
	# Blank what is not prose, keeping the line numbers.
	my $blank = sub { $_[0] =~ s/[^\n]//gr };
	$text =~ s{(<!-- generated: [\w-]+ -->\n.*?<!-- end -->)}{$blank->($1)}gse;
	$text =~ s{<!-- figure: [\w-]+ -->[^\n]*?<!-- /figure -->}{}g;
	$text =~ s{(^```.*?^```)}{$blank->($1)}gsme;
	$text =~ s{`[^`\n]*`}{ my $c = $&; $c =~ /^`[0-9a-f]{7,}`$/ ? $c : '``' }ge;
	my ($n, $line) = (0, 1);
	for my $para (split /(\n\s*\n)/, $text) {
		if ($para =~ /\S/ && $para !~ /\bcommits?\s+`?[0-9a-f]{7,}/) {
			my $l = $line;
			for my $s (split /\n/, $para, -1) {
				while ($s =~ /$measured/g) {
					print STDERR "bench-tables.pl: $f:$l: \"$&\" is no result file's and names " .
						"no commit: generate it (<!-- figure: NAME -->) or name its commit\n";
					$n++;
				}
				$l++;
			}
		}
		$line += ($para =~ tr/\n//);
	}
	return $n;
}

my $bad = 0;
for my $f (@files) {
	open my $fh, '<', $f or die "bench-tables.pl: $f: $!\n";
	my $old = do { local $/; <$fh> };
	close $fh;
	my $new = $old;
	$new =~ s{(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end -->)}{
		my ($open, $name, $close) = ($1, $2, $4);
		die "bench-tables.pl: $f: no table named $name\n" unless $gen{$name};
		$open . $gen{$name}->() . $close
	}gse;
	$new =~ s{(<!-- figure: ([\w-]+) -->)([^\n]*?)(<!-- /figure -->)}{
		my ($open, $name, $close) = ($1, $2, $4);
		die "bench-tables.pl: $f: no figure named $name\n" unless $fig{$name};
		$open . $fig{$name}->() . $close
	}ge;
	$bad = 1 if $check && unnamed_figures($f, $old);
	next if $new eq $old;
	if ($check) {
		my @o = $old =~ /<!-- (?:generated|figure): ([\w-]+) -->\n?(.*?)<!-- (?:end|\/figure) -->/gs;
		my @n = $new =~ /<!-- (?:generated|figure): ([\w-]+) -->\n?(.*?)<!-- (?:end|\/figure) -->/gs;
		for (my $i = 0; $i < @o; $i += 2) {
			next if $o[$i + 1] eq $n[$i + 1];
			my $what = $o[$i + 1] =~ /\n/ ? 'table' : 'figure';
			print STDERR "bench-tables.pl: $f: the $what \"$o[$i]\" differs from what " .
				"bench/results/ gives (scripts/bench-tables.pl rewrites it)\n";
		}
		$bad = 1;
		next;
	}
	write_file($f, $new);
	print STDERR "bench-tables.pl: $f rewritten\n";
}
if ($plots && !$check) {
	plot_lookup();
	plot_churn();
}
exit $bad;
