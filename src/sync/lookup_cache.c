// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The readers' lookup cache: the thread-local entries, the stores' ids and
 * the check of both (lookup_cache.h; polstore/static/lcache.h says why an
 * entry is valid).
 */
#include <errno.h>

#include "lookup_cache.h"

/* Zeroed in every new thread (a reused stack's TLS too): id 0 names no store. */
__thread struct _ps_lc _ps_lc_tls __attribute__((tls_model("initial-exec")));

/* The last id given: ids are never reused, so a store at a freed one's address has another. */
static uint64_t psi_lc_last_id;

uint64_t psi_lc_new_id(void)
{
	return PSI_ADD_FETCH(psi_lc_last_id, 1, RELAXED);
}

int psi_lc_check(const struct ps_store *s, const char **why)
{
	const struct _ps_lc_entry *e = _ps_lc_way(s);
	const struct ps_ix_leaf *l;
	int i;

	if (!s->lc.id) {
		*why = "lookup cache: store without an id";
		return -EUCLEAN;
	}
	if (PSI_READ_ONCE(s->rd.gen) & 1) {
		*why = "lookup cache: publication count odd outside a publication";
		return -EUCLEAN;
	}
	if (e->id != s->lc.id || e->gen != PSI_READ_ONCE(s->rd.gen))
		return 0; /* another store's entry, or an old version's: never answers */
	if (e->gen & 1 || !e->len) {
		*why = "lookup cache: entry of an odd count or an empty range";
		return -EUCLEAN;
	}
	i = _ps_ix_find(PSI_LOAD_ACQUIRE(s->ix.node), e->start, &l);
	if (i < 0 || _PS_IX_START(l)[i] != e->start ||
			_PS_IX_END(l)[i] - e->start != e->len || _PS_IX_POL(l)[i] != e->pol ||
			_PS_IX_HINT(l)[i] != e->hint) {
		*why = "lookup cache: entry of the current count differs from the index";
		return -EUCLEAN;
	}
	return 0;
}
