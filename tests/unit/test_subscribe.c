// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * Change subscription, every variant: the store's generation; what a
 * subscription reports, merged, and when (never before readers see the
 * change), checked beside a flat-out writer against the sets it made and
 * the model; overflow; cancel while changes flow; destroy with a live
 * subscription; fork; allocation failures.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler.h"
#include "testutil.h"

#define WIN_START 1024
#define WIN_END 2048
#define SPACE 4096

static int fd_ready(struct ps_sub *sub, int ms)
{
	struct pollfd p = { .fd = ps_sub_fd(sub), .events = POLLIN };

	return poll(&p, 1, ms);
}

static struct ps_sub_event read_one(struct ps_sub *sub)
{
	struct ps_sub_event ev[2];

	cr_assert_eq(ps_sub_read(sub, ev, 2), 1);
	return ev[0];
}

VARIANT_TEST(subscribe, generation)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(0);
	struct ps_set_op ops[2] = { { 0, 10, a }, { 20, 30, a } };

	cr_assert_eq(ps_store_generation(NULL), 0);
	cr_assert_eq(ps_store_generation(s), 0);
	cr_assert_eq(ps_store_set(s, 0, 10, a), 0);
	cr_assert_eq(ps_store_generation(s), 1);
	cr_assert_eq(ps_store_set(s, 5, 5, a), -EINVAL);
	cr_assert_eq(ps_store_generation(s), 1);
	cr_assert_eq(ps_store_set_many(s, ops, 2), 0);
	cr_assert_eq(ps_store_generation(s), 2);
	cr_assert_eq(ps_store_set(s, 0, 100, NULL), 0);
	cr_assert_eq(ps_store_generation(s), 3);
	ps_store_read_lock(s);
	cr_assert_eq(ps_store_generation(s), 3);
	ps_store_read_unlock(s);
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(subscribe, polled_window_merged)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(0);
	struct ps_set_op ops[2] = { { 90, 110, a }, { 300, 400, a } };
	struct ps_sub_event ev[4];
	struct ps_sub *sub;

	cr_assert_eq(ps_store_subscribe(NULL, 0, 1, 4, NULL, NULL), NULL);
	cr_assert_eq(errno, EINVAL);
	cr_assert_eq(ps_store_subscribe(s, 5, 5, 4, NULL, NULL), NULL);
	cr_assert_eq(ps_store_subscribe(s, 0, 5, 0, NULL, NULL), NULL);
	cr_assert_eq(ps_store_subscribe(s, 0, 5, 65537, NULL, NULL), NULL);
	sub = ps_store_subscribe(s, 100, 200, 4, NULL, NULL);
	cr_assert_not_null(sub);
	cr_assert_geq(ps_sub_fd(sub), 0);
	cr_assert_eq(ps_sub_read(sub, NULL, 1), -EINVAL);
	cr_assert_eq(ps_sub_read(sub, ev, 0), -EINVAL);
	cr_assert_eq(fd_ready(sub, 0), 0);
	cr_assert_eq(ps_store_set(s, 0, 50, a), 0); /* outside the window */
	cr_assert_eq(ps_store_set(s, 200, 250, a), 0);
	cr_assert_eq(fd_ready(sub, 0), 0);
	cr_assert_eq(ps_sub_read(sub, ev, 4), 0);
	cr_assert_eq(ps_store_set(s, 150, 300, a), 0);
	cr_assert_eq(fd_ready(sub, 0), 1);
	ev[0] = read_one(sub);
	cr_assert_eq(ev[0].start, 150);
	cr_assert_eq(ev[0].end, 200);
	cr_assert_eq(ev[0].gen, 3);
	cr_assert_eq(ev[0].flags, 0);
	cr_assert_eq(fd_ready(sub, 0), 0);
	/* Touching neighbours merge; a gap does not. */
	cr_assert_eq(ps_store_set(s, 120, 130, a), 0);
	cr_assert_eq(ps_store_set(s, 130, 140, NULL), 0);
	cr_assert_eq(ps_store_set(s, 160, 170, a), 0);
	cr_assert_eq(ps_sub_read(sub, ev, 4), 2);
	cr_assert(ev[0].start == 120 && ev[0].end == 140 && ev[0].gen == 5);
	cr_assert(ev[1].start == 160 && ev[1].end == 170 && ev[1].gen == 6);
	/* A batch: each op that overlaps the window, one generation. */
	cr_assert_eq(ps_store_set_many(s, ops, 2), 0);
	ev[0] = read_one(sub);
	cr_assert(ev[0].start == 100 && ev[0].end == 110 && ev[0].gen == 7);
	cr_assert_eq(ps_sub_cancel(sub), 0);
	cr_assert_eq(ps_sub_cancel(NULL), 0);
	cr_assert_eq(ps_store_set(s, 100, 200, a), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}

VARIANT_TEST(subscribe, overflow_reported)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(0);
	struct ps_sub *sub = ps_store_subscribe(s, 0, 1000, 3, NULL, NULL);
	struct ps_sub_event ev[8];
	int i, n;

	cr_assert_not_null(sub);
	for (i = 0; i < 10; i++) /* disjoint: nothing merges */
		cr_assert_eq(ps_store_set(s, 10 * i, 10 * i + 5, a), 0);
	cr_assert_eq(fd_ready(sub, 0), 1);
	/* Capacity 3 rounds up to 4: four events, then the overflow, in one read. */
	n = ps_sub_read(sub, ev, 8);
	cr_assert_eq(n, 5);
	for (i = 0; i < 4; i++)
		cr_assert(ev[i].start == 10u * i && ev[i].flags == 0, "event %d", i);
	cr_assert(ev[4].flags == PS_SUB_OVERFLOW && ev[4].start == 0 && ev[4].end == 1000);
	cr_assert_eq(ps_sub_read(sub, ev, 8), 0);
	cr_assert_eq(fd_ready(sub, 0), 0);
	/* Reported once, and the queue works again. */
	cr_assert_eq(ps_store_set(s, 500, 510, a), 0);
	ev[0] = read_one(sub);
	cr_assert(ev[0].start == 500 && ev[0].flags == 0);
	/* A short read leaves the descriptor readable and the overflow for later. */
	for (i = 0; i < 6; i++)
		cr_assert_eq(ps_store_set(s, 10 * i, 10 * i + 5, a), 0);
	cr_assert_eq(ps_sub_read(sub, ev, 2), 2);
	cr_assert_eq(fd_ready(sub, 0), 1);
	cr_assert_eq(ps_sub_read(sub, ev, 8), 3);
	cr_assert_eq(ev[2].flags, PS_SUB_OVERFLOW);
	cr_assert_eq(ps_sub_cancel(sub), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}

/*
 * Beside a flat-out writer: a callback subscriber checks each event as it
 * comes (events come in generation order, each holds the part in the
 * window of every set it stands for, and a lookup in it already finds
 * that set's policy or a later one), keeps a replica of the window, and
 * at the end the replica equals the model of every set.
 */
struct oracle {
	struct ps_store *s;
	long n;
	struct ps_set_op *ops; /* written before each set */
	struct ps_policy **pols;
	struct pol_index {
		const struct ps_policy *pol;
		long k;
	} *index;		   /* sorted by pointer */
	uint64_t gen0;		   /* the generation before set 0 */
	long next;		   /* the first set no event has stood for yet */
	struct ps_policy *replica[WIN_END - WIN_START];
	uint64_t last_gen;	   /* of the last event, for the main thread */
	struct ps_model model;
};

static int pol_cmp(const void *a, const void *b)
{
	const struct pol_index *x = a, *y = b;

	return x->pol < y->pol ? -1 : x->pol > y->pol;
}

/* The set whose policy @pol is; -1 for NULL. */
static long set_of(struct oracle *o, const struct ps_policy *pol)
{
	struct pol_index key = { pol, 0 }, *hit;

	if (!pol)
		return -1;
	hit = bsearch(&key, o->index, (size_t)o->n, sizeof(key), pol_cmp);
	TCHECK(hit, "a policy no set wrote");
	return hit->k;
}

static bool clip(const struct ps_set_op *op, uint64_t *a, uint64_t *b)
{
	*a = op->start > WIN_START ? op->start : WIN_START;
	*b = op->end < WIN_END ? op->end : WIN_END;
	return *a < *b;
}

/*
 * A set from @k on that the lookup just made could see removed page @p:
 * one counted by the generation then, or the one writer's set in flight,
 * which the generation counts once it returns.
 */
static bool removed_since(struct oracle *o, uint64_t p, long k)
{
	long now = (long)(ps_store_generation(o->s) - o->gen0) - 1;

	if (now < o->n - 1)
		while ((long)(ps_store_generation(o->s) - o->gen0) - 1 == now)
			sched_yield();
	for (now++; k <= now && k < o->n; k++)
		if (!o->ops[k].pol && o->ops[k].start <= p && p < o->ops[k].end)
			return true;
	return false;
}

static void oracle_event(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg)
{
	struct oracle *o = arg;
	long k = (long)(ev->gen - o->gen0) - 1, j, i, want;
	uint64_t a, b, p;
	struct ps_policy *pol;

	(void)sub;
	TCHECK(ev->flags == 0, "flags %#x with a queue as long as the run", ev->flags);
	TCHECK(k >= o->next && k < o->n + 1, "event of set %ld after set %ld", k, o->next);
	/* Every set since the last event that touches the window is inside this one. */
	for (j = o->next; j <= k && j < o->n; j++)
		if (clip(&o->ops[j], &a, &b))
			TCHECK(a >= ev->start && b <= ev->end,
					"set %ld [%lu, %lu) outside event [%lu, %lu)", j, a, b,
					ev->start, ev->end);
	o->next = k + 1;
	for (p = ev->start; p < ev->end; p++) {
		pol = ps_store_lookup(o->s, p);
		/* The set that wrote @p last at generation ev->gen: its policy or later is visible. */
		for (want = -1, i = k < o->n ? k : o->n - 1; i >= 0; i--)
			if (o->ops[i].start <= p && p < o->ops[i].end) {
				want = i;
				break;
			}
		if (want >= 0 && !pol)
			TCHECK(removed_since(o, p, want), "%s page %lu: event of set %ld, no policy",
					ps_sync_name(ps_store_sync_kind(o->s)), p, k);
		else if (want >= 0)
			TCHECK(o->ops[want].pol ? set_of(o, pol) >= want : set_of(o, pol) > want,
					"%s page %lu: event of set %ld, lookup finds set %ld's policy",
					ps_sync_name(ps_store_sync_kind(o->s)), p, k, set_of(o, pol));
		ps_policy_put(o->replica[p - WIN_START]);
		o->replica[p - WIN_START] = pol;
	}
	PSI_STORE_RELEASE(o->last_gen, ev->gen);
}

VARIANT_TEST(subscribe, flat_out_writer_against_model, .timeout = 120)
{
	struct oracle *o = calloc(1, sizeof(*o));
	uint64_t seed = ps_test_seed(50, (int)*sync), a, b;
	struct ps_sub *sub;
	char why[256];
	long k, refs;
	uint64_t p;

	o->n = ps_test_iters(6000);
	o->s = ps_store_create(*sync);
	o->ops = calloc((size_t)o->n, sizeof(*o->ops));
	o->pols = calloc((size_t)o->n, sizeof(*o->pols));
	o->index = calloc((size_t)o->n, sizeof(*o->index));
	cr_assert(o->s && o->ops && o->pols && o->index);
	for (k = 0; k < o->n; k++) {
		o->pols[k] = ps_test_bind((int)(k % 4));
		o->index[k] = (struct pol_index){ o->pols[k], k };
	}
	qsort(o->index, (size_t)o->n, sizeof(*o->index), pol_cmp);
	ps_model_init(&o->model);
	o->gen0 = ps_store_generation(o->s);
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&o->last_gen, sizeof(o->last_gen)); /* atomics only */
	sub = ps_store_subscribe(o->s, WIN_START, WIN_END, 65536, oracle_event, o);
	cr_assert_not_null(sub);
	for (k = 0; k < o->n; k++) {
		while (!ps_test_rand_range(&seed, 0, SPACE, &a, &b))
			;
		if (b - a > 512)
			b = a + 512;
		if (k == o->n - 1) { /* inside the window: its event ends the run */
			a = WIN_START + a % 512;
			b = a + 1;
		}
		o->ops[k] = (struct ps_set_op){ a, b, k % 7 == 6 ? NULL : o->pols[k] };
		cr_assert_eq(ps_model_set(&o->model, a, b, o->ops[k].pol), 0);
		cr_assert_eq(ps_store_set(o->s, a, b, o->ops[k].pol), 0);
	}
	while (PSI_LOAD_ACQUIRE(o->last_gen) < o->gen0 + (uint64_t)o->n)
		usleep(1000);
	cr_assert_eq(ps_sub_cancel(sub), 0);
	cr_assert(ps_model_matches(o->s, &o->model, why, sizeof(why)), "%s", why);
	/* The replica, kept by events alone, is what the model holds. */
	for (p = WIN_START; p < WIN_END; p++)
		cr_assert_eq(o->replica[p - WIN_START], ps_model_at(&o->model, p), "page %lu", p);
	for (p = 0; p < WIN_END - WIN_START; p++)
		ps_policy_put(o->replica[p]);
	ps_store_destroy(o->s);
	for (k = 0, refs = 0; k < o->n; k++) {
		refs += ps_policy_refcount(o->pols[k]) - 1;
		ps_policy_put(o->pols[k]);
	}
	cr_assert_eq(refs, 0);
	free(o->index);
	free(o->pols);
	free(o->ops);
	free(o);
}

/* A destroy ends the store's subscriptions: their queued events, then PS_SUB_CLOSED. */
static void note_closed(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg)
{
	(void)sub;
	if (ev->flags & PS_SUB_CLOSED)
		PSI_STORE_RELEASE(*((int *)arg), 1);
}

/* Subscribe and cancel, polled and called back, while a writer sets flat out. */
struct flow {
	struct ps_store *s;
	struct ps_policy *a;
	int stop;
	long events;
};

static void *flow_writer(void *arg)
{
	struct flow *f = arg;
	uint64_t seed = 7, a, b;

	while (!PSI_READ_ONCE(f->stop))
		if (ps_test_rand_range(&seed, 0, SPACE, &a, &b))
			TCHECK(ps_store_set(f->s, a, b, (a & 1) ? f->a : NULL) == 0, "set");
	return NULL;
}

static void flow_count(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg)
{
	struct flow *f = arg;

	(void)sub;
	TCHECK(ev->start < ev->end && ev->start >= WIN_START && ev->end <= WIN_END,
			"[%lu, %lu) outside the window", ev->start, ev->end);
	PSI_FETCH_ADD(f->events, 1, RELAXED);
}

VARIANT_TEST(subscribe, cancel_while_changes_flow, .timeout = 120)
{
	struct flow f = { .s = ps_store_create(*sync), .a = ps_test_bind(1) };
	long i, rounds = ps_test_iters(200);
	struct ps_sub_event ev[16];
	struct ps_sub *sub[3];
	int closed = 0;
	pthread_t w;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&f.stop, sizeof(f.stop)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&f.events, sizeof(f.events)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&closed, sizeof(closed)); /* atomics only */
	ps_test_spawn(&w, 1, flow_writer, &f, 0);
	for (i = 0; i < rounds; i++) {
		sub[0] = ps_store_subscribe(f.s, WIN_START, WIN_END, 8, flow_count, &f);
		sub[1] = ps_store_subscribe(f.s, WIN_START, WIN_END, 8, NULL, NULL);
		sub[2] = ps_store_subscribe(f.s, 0, 1, 1, note_closed, &closed);
		cr_assert(sub[0] && sub[1] && sub[2]);
		if (i & 1)
			(void)fd_ready(sub[1], 1);
		cr_assert_geq(ps_sub_read(sub[1], ev, 16), 0);
		cr_assert_eq(ps_sub_cancel(sub[(i + 0) % 3]), 0);
		cr_assert_eq(ps_sub_cancel(sub[(i + 1) % 3]), 0);
		cr_assert_eq(ps_sub_cancel(sub[(i + 2) % 3]), 0);
	}
	PSI_WRITE_ONCE(f.stop, 1);
	ps_test_join(&w, 1);
	ps_store_destroy(f.s);
	ps_policy_put(f.a);
}

/* Cancel from the subscription's own callback is refused; from another's it works. */
struct self_cancel {
	struct ps_sub *other;
	int own, other_ret, calls;
};

static void cancel_in_callback(struct ps_sub *sub, const struct ps_sub_event *ev, void *arg)
{
	struct self_cancel *c = arg;

	(void)ev;
	if (PSI_READ_ONCE(c->calls))
		return;
	c->own = ps_sub_cancel(sub);
	c->other_ret = ps_sub_cancel(c->other);
	PSI_ANNOTATE_HAPPENS_BEFORE(&c->calls); /* @own and @other_ret: pairs with the test */
	PSI_STORE_RELEASE(c->calls, 1);
}

VARIANT_TEST(subscribe, cancel_in_callback)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(0);
	struct self_cancel c = { 0 };
	struct ps_sub *sub;
	int closed = 0;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&c.calls, sizeof(c.calls)); /* atomics only */
	PSI_ANNOTATE_BENIGN_RACE_SIZED(&closed, sizeof(closed)); /* atomics only */
	c.other = ps_store_subscribe(s, 0, 10, 4, note_closed, &closed);
	sub = ps_store_subscribe(s, 100, 110, 4, cancel_in_callback, &c);
	cr_assert(sub && c.other);
	cr_assert_eq(ps_store_set(s, 100, 101, a), 0);
	while (!PSI_LOAD_ACQUIRE(c.calls))
		usleep(1000);
	PSI_ANNOTATE_HAPPENS_AFTER(&c.calls);
	cr_assert_eq(c.own, -EDEADLK);
	cr_assert_eq(c.other_ret, 0);
	cr_assert_eq(ps_store_set(s, 0, 200, a), 0);
	cr_assert_eq(ps_sub_cancel(sub), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}

static void destroy_ends(enum ps_sync sync, bool deferred)
{
	struct ps_store *s = ps_store_create(sync);
	struct ps_policy *a = ps_test_bind(0);
	struct ps_sub_event ev[4];
	struct ps_sub *polled, *called;
	int closed = 0;

	PSI_ANNOTATE_BENIGN_RACE_SIZED(&closed, sizeof(closed)); /* atomics only */
	polled = ps_store_subscribe(s, 0, 100, 4, NULL, NULL);
	called = ps_store_subscribe(s, 0, 100, 4, note_closed, &closed);
	cr_assert(polled && called);
	cr_assert_eq(ps_store_set(s, 10, 20, a), 0);
	if (deferred)
		cr_assert_eq(ps_store_destroy_deferred(s), 0);
	else
		ps_store_destroy(s);
	cr_assert_eq(fd_ready(polled, 10000), 1);
	cr_assert_eq(ps_sub_read(polled, ev, 4), deferred ? 1 : 2);
	cr_assert(ev[0].start == 10 && ev[0].end == 20 && ev[0].flags == 0);
	if (deferred) {
		cr_assert_eq(fd_ready(polled, 10000), 1);
		cr_assert_eq(ps_sub_read(polled, ev + 1, 3), 1);
	}
	cr_assert(ev[1].flags == PS_SUB_CLOSED && ev[1].start == 0 && ev[1].end == 100);
	cr_assert_eq(ps_sub_read(polled, ev, 4), 0);
	cr_assert_eq(fd_ready(polled, 0), 0);
	while (!PSI_LOAD_ACQUIRE(closed))
		usleep(1000);
	cr_assert_eq(ps_sub_cancel(polled), 0);
	cr_assert_eq(ps_sub_cancel(called), 0);
	ps_policy_put(a);
}

VARIANT_TEST(subscribe, destroy_ends_subscriptions)
{
	destroy_ends(*sync, false);
}

VARIANT_TEST(subscribe, destroy_deferred_ends_subscriptions)
{
	destroy_ends(*sync, true);
}

/* A fork child has none of its parent's subscriptions, and may make its own. */
struct fork_arg {
	struct ps_store *s;
	struct ps_sub *polled, *called;
	struct ps_policy *a;
};

static void fork_child(void *arg)
{
	struct fork_arg *f = arg;
	struct ps_sub_event ev[4];
	uint64_t gen = ps_store_generation(f->s);
	struct ps_sub *mine;

	TCHECK(ps_sub_read(f->polled, ev, 4) == -ECHILD, "read of the parent's subscription");
	TCHECK(ps_store_set(f->s, 10, 20, f->a) == 0, "set");
	TCHECK(ps_store_generation(f->s) == gen + 1, "generation");
	mine = ps_store_subscribe(f->s, 0, 100, 4, NULL, NULL);
	TCHECK(mine, "subscribe: %s", strerror(errno));
	TCHECK(ps_store_set(f->s, 30, 40, f->a) == 0, "set");
	TCHECK(ps_sub_read(mine, ev, 4) == 1 && ev[0].start == 30, "the child's own event");
	TCHECK(ps_sub_cancel(f->polled) == 0 && ps_sub_cancel(f->called) == 0, "cancel");
	TCHECK(ps_sub_cancel(mine) == 0, "cancel");
	ps_store_destroy(f->s);
}

VARIANT_TEST(subscribe, fork_child_has_none)
{
	struct fork_arg f = { .s = ps_store_create(*sync), .a = ps_test_bind(0) };
	struct ps_sub_event ev[4];
	char out[1024];
	int closed = 0;

	f.polled = ps_store_subscribe(f.s, 0, 100, 4, NULL, NULL);
	f.called = ps_store_subscribe(f.s, 0, 100, 4, note_closed, &closed);
	cr_assert(f.polled && f.called);
	cr_assert_eq(ps_test_run_child(fork_child, &f, 60, out, sizeof(out), NULL), 0, "%s", out);
	/* Nothing the child did reached the parent's queue. */
	cr_assert_eq(ps_sub_read(f.polled, ev, 4), 0);
	cr_assert_eq(ps_store_set(f.s, 50, 60, f.a), 0);
	cr_assert_eq(ps_sub_read(f.polled, ev, 4), 1);
	cr_assert_eq(ev[0].start, 50);
	cr_assert_eq(ps_sub_cancel(f.polled), 0);
	cr_assert_eq(ps_sub_cancel(f.called), 0);
	ps_store_destroy(f.s);
	ps_policy_put(f.a);
}

/* Each allocation of a subscribe fails in turn: NULL, ENOMEM, nothing held, the store as it was. */
static void subscribe_fails_cleanly(struct ps_store *s, struct ps_policy *a)
{
	uint64_t gen = ps_store_generation(s);
	struct ps_sub_event ev[2];
	struct ps_sub *sub = NULL;
	int closed = 0;
	long k, live;

	ps_test_alloc_install();
	for (k = 0; !sub; k++) {
		live = ps_test_alloc_live();
		ps_test_alloc_fail_after(k);
		sub = ps_store_subscribe(s, 0, 100, 16, (k & 1) ? note_closed : NULL, &closed);
		cr_assert_eq(ps_test_alloc_disarm(), !sub);
		if (sub)
			break;
		cr_assert_eq(errno, ENOMEM);
		cr_assert_eq(ps_test_alloc_live(), live, "allocation %ld: a block left behind", k);
		cr_assert_eq(ps_store_generation(s), gen);
	}
	cr_assert_gt(k, 0);
	cr_assert_eq(ps_store_set(s, 5, 6, a), 0);
	if (!(k & 1)) {
		cr_assert_eq(fd_ready(sub, 10000), 1);
		cr_assert_eq(ps_sub_read(sub, ev, 2), 1);
	}
	cr_assert_eq(ps_sub_cancel(sub), 0);
	ps_test_alloc_restore();
}

VARIANT_TEST(subscribe, allocation_failure_changes_nothing)
{
	struct ps_store *s = ps_store_create(*sync);
	struct ps_policy *a = ps_test_bind(0);
	struct ps_sub *first;

	subscribe_fails_cleanly(s, a); /* the store's first: its list too */
	first = ps_store_subscribe(s, 0, 10, 1, NULL, NULL);
	cr_assert_not_null(first);
	subscribe_fails_cleanly(s, a);
	cr_assert_eq(ps_sub_cancel(first), 0);
	ps_store_destroy(s);
	ps_policy_put(a);
}
