/*
 * PyTorch Flight Recorder dumps, read as evidence like our own.
 *
 * PyTorch writes one file per rank (a common prefix and the global rank:
 * nccl_trace_rank_0, nccl_trace_rank_1, ...), a pickle by default and JSON
 * on request, schema versions "2.x". Its entries already use the names our
 * dumps use (dumps/FORMAT.md, "Mapping to PyTorch Flight Recorder"); what it
 * lacks is the rank's identity, which comes from the file name, and a
 * per-thread stack, which is taken from the Python frames of the rank's
 * latest operation.
 */
#ifndef FR_DUMPS_PYTORCH_H
#define FR_DUMPS_PYTORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"
#include "value.h"

/* The global rank a PyTorch dump's file name ends with ("..._rank_12" ->
 * 12). False when the name does not end with a number. */
bool fr_pytorch_rank_from_name(const char *path, uint32_t *rank);

/* Whether a parsed document looks like a PyTorch Flight Recorder dump (an
 * object with "version" and an "entries" array, or no "entries" but a
 * "pg_config" object; no "format"). */
bool fr_pytorch_is_dump(const struct fr_val *root);

/*
 * Reads the PyTorch dump `root` (a document in `d`, where the values that
 * wrap it in our dump's header are made) of global rank `rank` into `t`, as of
 * `time_ns`, when the file was written (bounded by the dump's own times:
 * no earlier than the latest, no later than that plus the longest timeout
 * it names, or PyTorch's default of 10 minutes, since PyTorch dumps when an
 * operation times out and a copied file has a later time). Returns 0, or
 * -EPROTO/-ENOMEM with `err` naming
 * `name` and what is wrong (an unknown major version, a bad field).
 */
int fr_pytorch_from_val(struct fr_doc *d, const struct fr_val *root, const char *name,
			uint32_t rank, uint64_t time_ns, struct fr_trace *t, char *err,
			size_t errlen);

/*
 * Reads PyTorch dump bytes, a pickle or JSON told apart by content. Returns
 * 0, 1 when the bytes are neither (not a PyTorch dump: pass it over), or a
 * negative errno with `err` set.
 */
int fr_pytorch_parse(const void *buf, size_t len, const char *name, uint32_t rank,
		     uint64_t time_ns, struct fr_trace *t, char *err, size_t errlen);

#endif
