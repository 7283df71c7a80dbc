// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The workload of testutil.h that runs readers of the RCU stores' read
 * index beside a flat-out writer; testutil_load.c says how a load reports
 * a failed check.
 */
#include "compiler.h"
#include "testutil_load.h"

/* ---- the read index beside a flat-out writer ---- */

#define IXL_SPANS 6
#define IXL_HIST 1024 /* versions described at once: a call spanning more is not checked */
#define IXL_WINDOW 512

/* A range of the configuration, or a span a version changed (@node 0: removed). */
struct ixl_span {
	uint64_t x, y;
	int node;
};

/* Version k: the configuration (k even) or it with @sp changed (k odd); atomics only. */
struct ixl_ver {
	int n;
	struct ixl_span sp[IXL_SPANS]; /* ascending, disjoint */
};

struct index_load {
	struct load ld;
	struct ps_test_index_load *l;
	struct ps_store *s;
	struct ps_policy *pol[16]; /* BIND on node i; [0] NULL */
	struct ixl_span *a;	   /* the configuration, nodes 1-7 */
	int na;
	uint64_t space; /* the configuration lies in [0, space) */
	int miss_node;	/* what ps_store_lookup_node(, 0) answers where no range is */
	struct ixl_ver hist[IXL_HIST];
	uint64_t updates; /* atomic: published so far (release) */
	long lookups, nexts, windows, unchecked;
	int started; /* readers about to make their first look */
};

static void ixl_ver_load(struct index_load *il, uint64_t k, struct ixl_ver *v)
{
	const struct ixl_ver *h = &il->hist[k % IXL_HIST];
	int i;

	v->n = 0;
	if (!(k & 1))
		return;
	v->n = PSI_READ_ONCE(h->n);
	if (v->n < 0 || v->n > IXL_SPANS)
		v->n = 0; /* overwritten meanwhile: the check is thrown away */
	for (i = 0; i < v->n; i++) {
		v->sp[i].x = PSI_READ_ONCE(h->sp[i].x);
		v->sp[i].y = PSI_READ_ONCE(h->sp[i].y);
		v->sp[i].node = PSI_READ_ONCE(h->sp[i].node);
		if (v->sp[i].node < 0 || v->sp[i].node > 15)
			v->sp[i].node = 0;
	}
}

static void ixl_ver_store(struct index_load *il, uint64_t k, const struct ixl_ver *v)
{
	struct ixl_ver *h = &il->hist[k % IXL_HIST];
	int i;

	PSI_WRITE_ONCE(h->n, v->n);
	for (i = 0; i < v->n; i++) {
		PSI_WRITE_ONCE(h->sp[i].x, v->sp[i].x);
		PSI_WRITE_ONCE(h->sp[i].y, v->sp[i].y);
		PSI_WRITE_ONCE(h->sp[i].node, v->sp[i].node);
	}
}

/* The first range of the configuration that ends after @idx: its position, or na. */
static int ixl_after(const struct index_load *il, uint64_t idx)
{
	int lo = 0, hi = il->na;

	while (lo < hi) {
		int mid = lo + (hi - lo) / 2;

		if (il->a[mid].y > idx)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* The node of the range holding @idx in version @v (0: none). */
static int ixl_at(const struct index_load *il, const struct ixl_ver *v, uint64_t idx)
{
	int i;

	for (i = 0; i < v->n; i++)
		if (v->sp[i].x <= idx && idx < v->sp[i].y)
			return v->sp[i].node;
	i = ixl_after(il, idx);
	return i < il->na && il->a[i].x <= idx ? il->a[i].node : 0;
}

/*
 * The first range of version @v that ends after @idx: a changed span, or
 * what is left of a range of the configuration beside the spans.
 */
static bool ixl_next(const struct index_load *il, const struct ixl_ver *v, uint64_t idx,
		struct ixl_span *out)
{
	bool have = false;
	int i, j;

	for (j = 0; j < v->n; j++)
		if (v->sp[j].node && v->sp[j].y > idx) {
			*out = v->sp[j];
			have = true;
			break;
		}
	for (i = ixl_after(il, idx); i < il->na; i++) {
		struct ixl_span r = il->a[i], piece = { 0, 0, r.node };
		uint64_t cur = r.x;
		bool found = false;

		if (have && r.x >= out->x)
			break;
		for (j = 0; j < v->n && !found; j++) {
			const struct ixl_span *s = &v->sp[j];

			if (s->y <= cur)
				continue;
			if (s->x >= r.y)
				break;
			if (s->x > cur && s->x > idx) {
				piece.x = cur;
				piece.y = s->x;
				found = true;
			}
			cur = cur > s->y ? cur : s->y;
		}
		if (!found && cur < r.y) {
			piece.x = cur;
			piece.y = r.y;
			found = true;
		}
		if (found) {
			if (!have || piece.x < out->x)
				*out = piece;
			return true;
		}
	}
	return have;
}

/* What one reader call answered. */
struct ixl_answer {
	const struct index_load *il;
	int kind; /* 0 node, 1 policy, 2 next, 3 window */
	uint64_t idx, we;
	int node;
	const struct ps_policy *pol;
	int ret; /* next: 0 or -ENOENT; window: 0 or 1 (full) */
	uint64_t start, end;
	int n;
	struct ixl_span w[IXL_WINDOW];
};

static int ixl_node_of(const struct index_load *il, const struct ps_policy *pol)
{
	int i;

	for (i = 1; i < 16; i++)
		if (il->pol[i] == pol)
			return i;
	return pol ? -1 : 0;
}

static bool ixl_matches(const struct index_load *il, const struct ixl_ver *v,
		const struct ixl_answer *a)
{
	struct ixl_span r;
	uint64_t idx;
	int i, node;

	switch (a->kind) {
	case 0:
		node = ixl_at(il, v, a->idx);
		return a->node == (node ? ps_policy_node(il->pol[node], a->idx, 0) : il->miss_node);
	case 1:
		return a->pol == il->pol[ixl_at(il, v, a->idx)];
	case 2:
		if (!ixl_next(il, v, a->idx, &r))
			return a->ret == -ENOENT;
		return a->ret == 0 && a->start == r.x && a->end == r.y && a->pol == il->pol[r.node];
	default:
		for (i = 0, idx = a->idx; i < IXL_WINDOW; i++, idx = r.y) {
			if (!ixl_next(il, v, idx, &r) || r.x >= a->we)
				return i == a->n && !a->ret;
			if (i >= a->n || a->w[i].x != r.x || a->w[i].y != r.y || a->w[i].node != r.node)
				return false;
		}
		return a->n == IXL_WINDOW && a->ret == 1;
	}
}

static int ixl_window_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ixl_answer *a = arg;

	a->w[a->n].x = start;
	a->w[a->n].y = end;
	a->w[a->n].node = ixl_node_of(a->il, pol);
	return ++a->n == IXL_WINDOW;
}

/* An index a reader asks about: near the configuration's edges, in it, past it. */
static uint64_t ixl_idx(const struct index_load *il, uint64_t *seed)
{
	uint64_t r = ps_test_rand(seed) % 16;
	const struct ixl_span *x = &il->a[ps_test_rand(seed) % (uint64_t)il->na];

	if (r < 3)
		return x->x;
	if (r < 5)
		return x->y - 1 + ps_test_rand(seed) % 2;
	if (r == 5)
		return UINT64_MAX - ps_test_rand(seed) % 3;
	if (r == 6)
		return ps_test_rand(seed);
	return ps_test_rand(seed) % (il->space + 32);
}

/* Some version from @k0 to @k1 + 1 gave @a; false only when none did and all were still described. */
static void ixl_check(struct index_load *il, const struct ixl_answer *a, uint64_t k0, uint64_t k1)
{
	struct ixl_ver v;
	uint64_t k, k2;
	bool ok = false;

	for (k = k0; k <= k1 + 1 && !ok; k++) {
		ixl_ver_load(il, k, &v);
		ok = ixl_matches(il, &v, a);
	}
	k2 = PSI_LOAD_ACQUIRE(il->updates);
	if (k2 + 2 - k0 >= IXL_HIST - 2) {
		PSI_FETCH_ADD(il->unchecked, 1, RELAXED);
		return;
	}
	CHECK(&il->ld, ok,
			"%s: %s of %" PRIu64 " (window to %" PRIu64 "): ret %d node %d [%" PRIu64
			", %" PRIu64 ") n %d: no version from %" PRIu64 " to %" PRIu64 " gave it",
			ps_sync_name(il->l->sync),
			a->kind == 0 ? "lookup_node" : a->kind == 1 ? "lookup" : a->kind == 2 ? "next" : "window",
			a->idx, a->we, a->ret, a->node, a->start, a->end, a->n, k0, k1 + 1);
}

static void *ixl_reader(void *arg)
{
	struct index_load *il = arg;
	struct ixl_answer *a = xcalloc(2, sizeof(*a));
	uint64_t seed = ps_test_seed(il->l->run.seed, 100 + (int)(uintptr_t)pthread_self() % 64);

	bool online = il->l->qsbr_online && il->l->sync == PS_SYNC_RCU_QSBR;
	int (*node_fn)(struct ps_store *, uint64_t, int) =
		il->l->lookup_node ? il->l->lookup_node : ps_store_lookup_node;
	struct ps_policy *(*lookup_fn)(struct ps_store *, uint64_t) =
		il->l->lookup ? il->l->lookup : ps_store_lookup;

	a[0].il = a[1].il = il;
	if (online)
		TCHECK(ps_qsbr_thread_online() == 0, "online");
	PSI_FETCH_ADD(il->started, 1, SEQ_CST);
	while (!load_stopped(&il->ld)) {
		uint64_t k0 = PSI_LOAD_ACQUIRE(il->updates), k1, r;
		struct ps_policy *pol = NULL;
		int nans = 1;

		r = ps_test_rand(&seed) % 8;
		a[0].idx = ixl_idx(il, &seed);
		a[0].n = a[0].ret = 0;
		a[0].start = a[0].end = 0;
		a[0].pol = NULL;
		if (r < 2) {
			a[0].kind = 0;
			a[0].node = node_fn(il->s, a[0].idx, 0);
			PSI_FETCH_ADD(il->lookups, 1, RELAXED);
		} else if (r == 2) {
			a[0].kind = 1;
			pol = lookup_fn(il->s, a[0].idx);
			a[0].pol = pol;
			ps_policy_put(pol); /* the test holds a reference of its own */
			PSI_FETCH_ADD(il->lookups, 1, RELAXED);
		} else if (r < 5) {
			a[0].kind = 2;
			a[0].ret = ps_store_next(il->s, a[0].idx, &a[0].start, &a[0].end, &pol);
			if (!a[0].ret) {
				a[0].pol = pol;
				ps_policy_put(pol);
			}
			PSI_FETCH_ADD(il->nexts, 1, RELAXED);
		} else if (r < 7) {
			a[0].kind = 3;
			if (ps_test_rand(&seed) % 16 == 0) {
				a[0].idx = 0;
				a[0].we = UINT64_MAX;
			} else {
				a[0].idx %= il->space + 32;
				a[0].we = a[0].idx + 1 + ps_test_rand(&seed) % 600;
			}
			a[0].ret = ps_store_foreach_range(il->s, a[0].idx, a[0].we, ixl_window_cb, &a[0]);
			PSI_FETCH_ADD(il->windows, 1, RELAXED);
		} else {
			/* Borrowed, in one section: each answer some version's. */
			const struct ps_policy *b;

			a[0].kind = 1;
			a[1].kind = 2;
			a[1].idx = ixl_idx(il, &seed);
			a[1].start = a[1].end = 0;
			a[1].pol = NULL;
			ps_store_read_lock(il->s);
			a[0].pol = ps_store_lookup_borrow(il->s, a[0].idx);
			a[1].ret = ps_store_next_borrow(il->s, a[1].idx, &a[1].start, &a[1].end, &b);
			if (!a[1].ret)
				a[1].pol = b;
			ps_store_read_unlock(il->s);
			PSI_FETCH_ADD(il->lookups, 1, RELAXED);
			PSI_FETCH_ADD(il->nexts, 1, RELAXED);
			nans = 2;
		}
		k1 = PSI_LOAD_ACQUIRE(il->updates);
		ixl_check(il, &a[0], k0, k1);
		if (nans == 2)
			ixl_check(il, &a[1], k0, k1);
		if (online)
			ps_qsbr_quiescent();
	}
	if (online)
		ps_qsbr_thread_offline();
	free(a);
	return NULL;
}

/* A version with some spans changed: one span (short or across many ranges) or a few. */
static void ixl_describe(struct index_load *il, uint64_t *seed, struct ixl_ver *v)
{
	uint64_t r = ps_test_rand(seed) % 4, top = il->space + 16;
	int j;

	if (r < 2) {
		uint64_t x = ps_test_rand(seed) % il->space;
		uint64_t len = 1 + ps_test_rand(seed) % (r ? il->space / 4 : 64);

		v->n = 1;
		v->sp[0].x = x;
		v->sp[0].y = x + len < top ? x + len : top;
		v->sp[0].node = ps_test_rand(seed) % 5 ? 8 + (int)(ps_test_rand(seed) % 8) : 0;
		return;
	}
	v->n = 2 + (int)(ps_test_rand(seed) % (IXL_SPANS - 1));
	for (j = 0; j < v->n; j++) {
		uint64_t w = top / (uint64_t)v->n, x = (uint64_t)j * w + ps_test_rand(seed) % w;
		uint64_t len = 1 + ps_test_rand(seed) % (r == 2 ? 32 : w), end = (uint64_t)(j + 1) * w;

		v->sp[j].x = x;
		v->sp[j].y = x + len < end ? x + len : end;
		v->sp[j].node = ps_test_rand(seed) % 5 ? 8 + (int)(ps_test_rand(seed) % 8) : 0;
	}
}

/* The sets that turn the configuration into version @v: one set, or a batch. */
static int ixl_change(struct index_load *il, const struct ixl_ver *v, struct ps_set_op *ops,
		uint64_t *seed)
{
	int j;

	for (j = 0; j < v->n; j++)
		ops[j] = (struct ps_set_op){ v->sp[j].x, v->sp[j].y, il->pol[v->sp[j].node] };
	if (v->n == 1 && ps_test_rand(seed) % 4)
		return ps_store_set(il->s, ops[0].start, ops[0].end, ops[0].pol);
	return ps_store_set_many(il->s, ops, (size_t)v->n);
}

/* The batch that turns version @v back into the configuration. */
static int ixl_restore(struct index_load *il, const struct ixl_ver *v, struct ps_set_op *ops)
{
	size_t n = 0;
	int i, j;

	for (j = 0; j < v->n; j++) {
		uint64_t lo = v->sp[j].x, hi = v->sp[j].y;

		i = ixl_after(il, lo);
		if (i < il->na && il->a[i].x < lo)
			lo = il->a[i].x;
		i = ixl_after(il, hi - 1);
		if (i < il->na && il->a[i].x < hi && il->a[i].y > hi)
			hi = il->a[i].y;
		ops[n++] = (struct ps_set_op){ lo, hi, NULL };
		for (i = ixl_after(il, lo); i < il->na && il->a[i].x < hi; i++)
			ops[n++] = (struct ps_set_op){ il->a[i].x, il->a[i].y, il->pol[il->a[i].node] };
	}
	return ps_store_set_many(il->s, ops, n);
}

static int ixl_expect_cb(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct ixl_answer *a = arg;
	const struct index_load *il = a->il;

	if (a->n >= il->na || il->a[a->n].x != start || il->a[a->n].y != end ||
			il->pol[il->a[a->n].node] != pol)
		a->ret = 1;
	a->n++;
	return 0;
}

int ps_test_index_run(struct ps_test_index_load *l)
{
	struct index_load *il = xcalloc(1, sizeof(*il));
	int nreaders = l->readers < 1 ? 1 : l->readers > 8 ? 8 : l->readers;
	struct ps_set_op *ops;
	struct ixl_ver cur;
	struct ixl_answer *end = xcalloc(1, sizeof(*end));
	pthread_t rd[8];
	uint64_t seed = ps_test_seed(l->run.seed, 0), pos = 0, u;
	const char *why = NULL;
	int i, ret;

	il->l = l;
	load_init(&il->ld, &l->run);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(il->hist, sizeof(il->hist));
	il->na = l->ranges > 0 ? l->ranges : 2000;
	il->a = xcalloc((size_t)il->na, sizeof(*il->a));
	ops = xcalloc((size_t)il->na + 4 * IXL_SPANS, sizeof(*ops));
	for (i = 1; i < 16; i++)
		il->pol[i] = ps_test_bind(i);
	il->s = l->create ? l->create(l->sync) : ps_store_create(l->sync);
	TCHECK(il->s, "ps_store_create");
	for (i = 0; i < il->na; i++) {
		uint64_t x = pos + ps_test_rand(&seed) % 4, len = 1 + ps_test_rand(&seed) % 8;

		il->a[i] = (struct ixl_span){ x, x + len, 1 + (int)(ps_test_rand(&seed) % 7) };
		ops[i] = (struct ps_set_op){ x, x + len, il->pol[il->a[i].node] };
		pos = x + len;
	}
	il->space = pos;
	TCHECK(ps_store_set_many(il->s, ops, (size_t)il->na) == 0, "the configuration");
	il->miss_node = ps_store_lookup_node(il->s, il->space + 1000000, 0);
	ixl_describe(il, &seed, &cur);
	ixl_ver_store(il, 1, &cur);
	ps_test_spawn(rd, nreaders, ixl_reader, il, 0);
	/*
	 * The run's time counts from when every reader looks: the set-up can
	 * take all of it under valgrind, where a writer making its least
	 * updates in one time slice would leave the readers none.
	 */
	while (PSI_LOAD_SEQ_CST(il->started) < nreaders)
		sched_yield();
	load_start_clock(&il->ld);
	/* Update u makes version u + 1; version u + 2 is described before u + 1 is announced. */
	for (u = 0; (u & 1) || load_go_on(&il->ld, (long)u, il->ld.deadline); u++) {
		if (!(u & 1)) {
			ret = ixl_change(il, &cur, ops, &seed);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %d", u, ret);
		} else {
			ret = ixl_restore(il, &cur, ops);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %d", u, ret);
			ixl_describe(il, &seed, &cur);
			ixl_ver_store(il, u + 2, &cur);
		}
		if (u % 256 == 255) {
			ret = ps_store_check(il->s, &why);
			CHECK(&il->ld, ret == 0, "update %" PRIu64 ": %s", u, why);
		}
		PSI_STORE_RELEASE(il->updates, u + 1);
	}
	PSI_STORE_SEQ_CST(il->ld.stop, true);
	ps_test_join(rd, nreaders);
	l->updates = (long)u;
	l->lookups = PSI_LOAD_SEQ_CST(il->lookups);
	l->nexts = PSI_LOAD_SEQ_CST(il->nexts);
	l->windows = PSI_LOAD_SEQ_CST(il->windows);
	l->unchecked = PSI_LOAD_SEQ_CST(il->unchecked);
	ret = ps_store_check(il->s, &why);
	CHECK(&il->ld, ret == 0, "at the end: %s", why);
	end->il = il;
	ps_store_foreach(il->s, ixl_expect_cb, end);
	CHECK(&il->ld, !end->ret && end->n == il->na, "at the end: not the configuration");
	ps_store_destroy(il->s);
	for (i = 1; i < 16; i++) {
		CHECK(&il->ld, ps_policy_refcount(il->pol[i]) == 1, "policy %d: %ld references", i,
				ps_policy_refcount(il->pol[i]));
		ps_policy_put(il->pol[i]);
	}
	ret = load_done(&il->ld);
	free(end);
	free(ops);
	free(il->a);
	free(il);
	return ret;
}
