/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * What the companion scenarios share (companion_run.c): a small runner of
 * ranks and writers behind a gate, and the loop that measures every
 * setting x rank count x variant with interleaved repetitions.  css-walk
 * lives in scn_css_walk.c (scn_css_walk.h), memcg-charge and mmap-commit
 * in scn_companion.c; both call the runner, which calls neither.
 */
#ifndef POLSTORE_STRESS_COMPANION_RUN_H
#define POLSTORE_STRESS_COMPANION_RUN_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "compiler.h"
#include "stress.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a tiny runner: ranks and writers behind a gate, for a duration ---------- */

struct crun;

struct cthread {
	struct crun *r;
	pthread_t th;
	int id;
	uint64_t ops, tries, fails;
	uint64_t max_wait_ns;
	double aux;	 /* scenario-specific maximum */
	uint64_t cpu_ns; /* the thread's CPU time */
	void *(*fn)(void *);
	struct stress_hist hist;
} __attribute__((aligned(64)));

struct crun {
	struct stress_gate gate;
	int nranks, nwriters;
	void *(*rank_fn)(void *);
	void *(*writer_fn)(void *);
	void *arg;
	struct cthread *ranks, *writers;
	double duration_s;
	int stop __attribute__((aligned(64)));
};

static inline bool crun_stopped(const struct crun *r)
{
	return PSI_LOAD_ACQUIRE(r->stop);
}

/* Start the ranks and writers, run --duration, stop and join them. */
void crun_go(struct crun *r);
/* Totals of a run into a point (efficiency is the runner's); frees the thread arrays. */
void crun_point(struct crun *r, struct stress_point *p);

/*
 * A companion scenario: its variants, the settings it runs each at
 * (memcg-charge: --limit; the others one setting, NAN), its rank counts
 * when --ranks is not given, and how one point is measured (filling @p,
 * not emitting it; a broken invariant aborts there).
 */
struct companion {
	const char *name;
	const char *const *variants;
	size_t nvariants;
	const double *settings;
	int nsettings;
	const int *default_ranks;
	int ndefault_ranks;
	void (*point)(const char *variant, int nranks, double setting, struct stress_point *p);
};

/* The one setting of a scenario without settings. */
extern const double one_setting[1];

/* Every point of @c, --repeat times interleaved; emits each point's median. */
void companion_run(const struct companion *c);
/* Seconds @c takes, about. */
double companion_estimate(const struct companion *c);

/* Whether two settings are the same (NAN, the one setting, equals itself). */
bool same_setting(double a, double b);
/* The point recorded last for @scenario, @variant, @ranks at @setting (limit_ratio). */
const struct stress_point *companion_find(
		const char *scenario, const char *variant, int ranks, double setting);

#endif /* POLSTORE_STRESS_COMPANION_RUN_H */
