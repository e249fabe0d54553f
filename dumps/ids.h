/*
 * Strings' places in sorted order, for sorting many records by a string
 * that few of them differ in: an incident of 65,536 summaries names each
 * communicator in every member's dump, and qsort comparing those ids with
 * strcmp, record against record, took a good part of reading it.
 */
#ifndef FR_IDS_H
#define FR_IDS_H

#include <stddef.h>
#include <stdint.h>

/*
 * Ranks the ids of n records of `size` bytes at `recs`, each of which has
 * a `const char *` at offset `id_at` and a uint32_t at offset `rank_at`:
 * sets each record's rank to its id's place among the distinct ids, in
 * strcmp order, so that two records' ranks compare as their ids do (equal
 * exactly when the strings are), and a sort by rank is the sort by id
 * without a strcmp per comparison. Returns 0, or -ENOMEM (ranks unset).
 */
int fr_ids_rank(void *recs, size_t n, size_t size, size_t id_at, size_t rank_at);

#endif
