// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * libFuzzer harness: decode the input into policy creations (arbitrary
 * modes, flags, masks and mask lengths), sets, removals, batches of sets
 * (ps_store_set_many()), lookups, borrowed lookups, walks, windows
 * (ps_store_foreach_range()), walks by position (ps_store_next() and its
 * borrowed form) and destroys on one store, and check every step against a
 * model (the documented validity rules of ps_policy_create() and the
 * shared_policy_replace() semantics of ps_store_set()).  Any difference
 * aborts.  The variant comes from POLSTORE_FUZZ_SYNC (a name as
 * ps_sync_name() prints it), or from the first input byte when unset.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <polstore/polstore.h>

#define PS_TEST_NO_CRITERION
#include "testutil.h" /* tests/common/: the model of ps_store_set() */

#define NSLOTS 8
#define LONGS (PS_MAXNODE_LIMIT / 64 + 1)

static struct ps_model model;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "polstore fuzz: " __VA_ARGS__);                            \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

struct in {
	const uint8_t *p;
	size_t n;
};

static uint64_t take(struct in *in, int bytes)
{
	uint64_t v = 0;

	while (bytes--) {
		v = v << 8 | (in->n ? *in->p : 0);
		if (in->n) {
			in->p++;
			in->n--;
		}
	}
	return v;
}

/* An index: small, or near UINT64_MAX, so both edges are exercised. */
static uint64_t take_idx(struct in *in)
{
	uint8_t b = (uint8_t)take(in, 1);

	return b & 0x80 ? UINT64_MAX - (b & 0x3f) : (uint64_t)(b & 0x7f);
}

/* A window's callback: each range is the model's next one overlapping the window. */
struct window {
	uint64_t a, b;
	int i, calls;
};

static int window_fn(uint64_t start, uint64_t end, struct ps_policy *pol, void *arg)
{
	struct window *w = arg;

	w->calls++;
	while (w->i < model.n && model.r[w->i].end <= w->a)
		w->i++;
	CHECK(w->i < model.n && model.r[w->i].start < w->b,
			"window [%llu, %llu): [%llu, %llu) is not in the model",
			(unsigned long long)w->a, (unsigned long long)w->b,
			(unsigned long long)start, (unsigned long long)end);
	CHECK(model.r[w->i].start == start && model.r[w->i].end == end && model.r[w->i].pol == pol,
			"window [%llu, %llu): [%llu, %llu), model [%llu, %llu)",
			(unsigned long long)w->a, (unsigned long long)w->b, (unsigned long long)start,
			(unsigned long long)end, (unsigned long long)model.r[w->i].start,
			(unsigned long long)model.r[w->i].end);
	w->i++;
	return 0;
}

/* The documented rules of ps_policy_create(), written independently of policy.c. */
static int expect_create(int mode, unsigned flags, const unsigned long *mask, unsigned long maxnode,
		int *mode_out, unsigned *flags_out)
{
	unsigned long bit;
	int weight = 0;

	if (mode < 0 || mode >= PS_MPOL_MAX || (flags & ~PS_MPOL_F_ALL) ||
			(flags & PS_MPOL_F_ALL) == PS_MPOL_F_ALL ||
			(mask && maxnode > PS_MAXNODE_LIMIT))
		return -EINVAL;
	for (bit = 0; mask && bit < maxnode; bit++)
		if (mask[bit / 64] >> (bit % 64) & 1) {
			if (bit >= PS_MAX_NUMNODES)
				return -EINVAL;
			weight++;
		}
	*mode_out = mode;
	*flags_out = flags;
	if (mode == PS_MPOL_DEFAULT) { /* no policy object in the kernel, no flag kept */
		*flags_out = 0;
		return weight ? -EINVAL : 0;
	}
	if (mode == PS_MPOL_LOCAL) /* mpol_new(): no nodes, no node-mask flag */
		return weight || flags ? -EINVAL : 0;
	if (mode == PS_MPOL_PREFERRED) {
		if (!weight && flags)
			return -EINVAL;
		if (!weight)
			*mode_out = PS_MPOL_LOCAL;
		return 0;
	}
	return weight ? 0 : -EINVAL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned long mask[LONGS];
	struct ps_policy *slot[NSLOTS] = { NULL };
	struct in in = { data, size };
	const char *env = getenv("POLSTORE_FUZZ_SYNC");
	int sync = env ? ps_sync_from_name(env) : (int)(take(&in, 1) % PS_SYNC_COUNT);
	struct ps_store *s;
	int i, steps = 0;

	CHECK(sync >= 0, "POLSTORE_FUZZ_SYNC=%s is not a variant", env);
	s = ps_store_create((enum ps_sync)sync);
	CHECK(s, "store creation failed");
	model.n = 0;
	while (in.n && steps++ < 512) {
		uint8_t op = (uint8_t)take(&in, 1);

		switch (op % 11) {
		case 0: { /* create a policy from arbitrary arguments */
			int mode = (int8_t)take(&in, 1), want_mode = 0, want;
			unsigned want_flags = 0;
			unsigned flags = (unsigned)take(&in, 2) << (op >> 6 ? 2 : 0);
			unsigned long maxnode = (unsigned long)take(&in, 2) * ((op >> 3) & 3);
			int k = (int)(take(&in, 1) % NSLOTS);
			struct ps_policy *p;
			const unsigned long *arg = mask;
			uint8_t sel;

			memset(mask, 0, sizeof(mask));
			mask[0] = take(&in, 8);
			sel = (uint8_t)take(&in, 1);
			mask[1] = sel ? take(&in, 8) : 0;
			if (sel == 0xff) /* a NULL mask: empty, whatever maxnode says */
				arg = NULL;
			if (op & 0x20) /* one far bit, maybe beyond PS_MAX_NUMNODES */
				mask[take(&in, 2) % LONGS] |= 1UL << (take(&in, 1) % 64);
			want = expect_create(mode, flags, arg, maxnode, &want_mode, &want_flags);
			errno = 0;
			p = ps_policy_create(mode, flags, arg, maxnode);
			CHECK(!!p == !want, "create(mode %d, flags %#x, maxnode %lu): %s, model says %d",
					mode, flags, maxnode, p ? "accepted" : "refused", want);
			if (!p) {
				CHECK(errno == EINVAL, "create refused with errno %d", errno);
				break;
			}
			CHECK(ps_policy_mode(p) == want_mode, "mode %d, want %d", ps_policy_mode(p),
					want_mode);
			CHECK(ps_policy_flags(p) == want_flags, "flags %#x, want %#x",
					ps_policy_flags(p), want_flags);
			ps_policy_put(slot[k]);
			slot[k] = p;
			break;
		}
		case 1:
		case 2: { /* set or remove */
			uint64_t a = take_idx(&in), b = take_idx(&in);
			int k = (int)take(&in, 1);
			struct ps_policy *p = k % (NSLOTS + 1) == NSLOTS ? NULL : slot[k % (NSLOTS + 1)];
			int ret;

			if (op % 8 == 2 && a < b && (a = b - 1 - (take(&in, 1) % 4)) > b)
				a = 0;
			ret = ps_store_set(s, a, b, p);
			if (a >= b) {
				CHECK(ret == -EINVAL, "set(%llu, %llu): %d, want -EINVAL",
						(unsigned long long)a, (unsigned long long)b, ret);
				break;
			}
			CHECK(ret == 0, "set: %d", ret);
			if (ps_model_set(&model, a, b, p)) {
				/* The model is full: start over. */
				ps_store_destroy(s);
				s = ps_store_create((enum ps_sync)sync);
				CHECK(s, "store creation failed");
				model.n = 0;
			}
			break;
		}
		case 3: { /* lookup with a reference */
			uint64_t idx = take_idx(&in);
			struct ps_policy *got = ps_store_lookup(s, idx);

			CHECK(got == ps_model_at(&model, idx), "lookup(%llu)", (unsigned long long)idx);
			CHECK(got || errno == 0, "a miss left errno %d", errno);
			ps_policy_put(got);
			break;
		}
		case 4: { /* borrowed lookup */
			uint64_t idx = take_idx(&in);
			const struct ps_policy *got;

			ps_store_read_lock(s);
			got = ps_store_lookup_borrow(s, idx);
			ps_store_read_unlock(s);
			CHECK(got == ps_model_at(&model, idx), "borrow(%llu)", (unsigned long long)idx);
			break;
		}
		case 5: { /* walk and check */
			char why[160];

			CHECK(ps_model_matches(s, &model, why, sizeof(why)), "walk: %s", why);
			break;
		}
		case 6: /* destroy and start over */
			ps_store_destroy(s);
			s = ps_store_create((enum ps_sync)sync);
			CHECK(s, "store creation failed");
			model.n = 0;
			break;
		case 8: { /* a window: the ranges overlapping it, whole, ascending */
			uint64_t a = take_idx(&in), b = take_idx(&in);
			struct window w = { a, b, 0, 0 };
			int ret = ps_store_foreach_range(s, a, b, window_fn, &w);

			if (a >= b) {
				CHECK(ret == -EINVAL, "window(%llu, %llu): %d, want -EINVAL",
						(unsigned long long)a, (unsigned long long)b, ret);
				CHECK(w.calls == 0, "a refused window called back");
				break;
			}
			CHECK(ret == 0, "window: %d", ret);
			while (w.i < model.n && model.r[w.i].end <= a)
				w.i++;
			CHECK(w.i == model.n || model.r[w.i].start >= b,
					"window [%llu, %llu): the model has more ranges in it",
					(unsigned long long)a, (unsigned long long)b);
			break;
		}
		case 9: { /* walk by position from an index, counted or borrowed */
			uint64_t idx = take_idx(&in), st, en;
			bool borrow = op & 0x10;
			int k = 0, ret;

			while (k < model.n && model.r[k].end <= idx)
				k++;
			if (borrow)
				ps_store_read_lock(s);
			for (;; k++) {
				struct ps_policy *p = NULL;

				st = en = 0;
				if (borrow)
					ret = ps_store_next_borrow(s, idx, &st, &en,
							(const struct ps_policy **)&p);
				else
					ret = ps_store_next(s, idx, &st, &en, &p);
				if (k == model.n) {
					CHECK(ret == -ENOENT, "next(%llu): %d after the last range",
							(unsigned long long)idx, ret);
					break;
				}
				CHECK(ret == 0 && st == model.r[k].start && en == model.r[k].end &&
								p == model.r[k].pol,
						"next(%llu): %d [%llu, %llu), model [%llu, %llu)",
						(unsigned long long)idx, ret,
						(unsigned long long)st, (unsigned long long)en,
						(unsigned long long)model.r[k].start,
						(unsigned long long)model.r[k].end);
				if (!borrow)
					ps_policy_put(p);
				idx = en;
			}
			if (borrow)
				ps_store_read_unlock(s);
			break;
		}
		case 10: { /* a batch: in order, all or nothing */
			struct ps_set_op ops[4];
			size_t n = (size_t)(take(&in, 1) % 5), k;
			bool valid = true;
			int ret;

			for (k = 0; k < n; k++) {
				int q = (int)take(&in, 1);

				ops[k].start = take_idx(&in);
				ops[k].end = take_idx(&in);
				/* Mostly valid ops; the rest shows the whole batch refused. */
				if (q & 0x80 && ops[k].start > ops[k].end) {
					uint64_t t = ops[k].start;

					ops[k].start = ops[k].end;
					ops[k].end = t;
				}
				q %= NSLOTS + 1;
				ops[k].pol = q == NSLOTS ? NULL : slot[q];
				valid = valid && ops[k].start < ops[k].end;
			}
			ret = ps_store_set_many(s, n ? ops : NULL, n);
			if (!valid) {
				CHECK(ret == -EINVAL, "set_many with an empty op: %d", ret);
				break; /* the walk of case 5 finds any change */
			}
			CHECK(ret == 0, "set_many: %d", ret);
			for (k = 0; k < n; k++) {
				if (ps_model_set(&model, ops[k].start, ops[k].end, ops[k].pol)) {
					ps_store_destroy(s);
					s = ps_store_create((enum ps_sync)sync);
					CHECK(s, "store creation failed");
					model.n = 0;
					break;
				}
			}
			break;
		}
		default: { /* drop the caller's reference: the store keeps its own */
			int k = (int)(take(&in, 1) % NSLOTS);

			ps_policy_put(slot[k]);
			slot[k] = NULL;
			break;
		}
		}
	}
	ps_store_destroy(s);
	for (i = 0; i < NSLOTS; i++)
		ps_policy_put(slot[i]);
	return 0;
}
