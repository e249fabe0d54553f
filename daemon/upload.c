/*
 * A dump arriving in DUMP_DATA pieces (protocol/PROTOCOL.md), put back
 * together: the one reassembler of incidents' dumps and live looks'. It
 * checks that every piece follows the last one of the same dump and lies
 * inside it, grows the buffer as the bytes arrive, and says when the dump
 * is whole. What a dump may cost, and what is done with it, is its owner's
 * policy (incident.c, look.c): the owner gives the limit at the first
 * piece and a charge to pay before the buffer grows.
 */
#include "upload.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int upload_begin(struct upload *up, const char *id, uint64_t total, uint64_t max)
{
	assert(!up->active && !up->data);
	if (total == 0)
		return -EPROTO;
	if (total > max)
		return -EMSGSIZE;
	/* No buffer yet: it grows with what actually arrives. */
	up->active = true;
	up->total = total;
	snprintf(up->id, sizeof(up->id), "%s", id);
	return 0;
}

/*
 * The buffer size that holds `len` more bytes: doubled from UPLOAD_MIN_CAP
 * until it does, never past the dump's total.
 */
static size_t upload_grown_cap(const struct upload *up, uint32_t len)
{
	size_t need = (size_t)up->received + len;
	size_t cap = up->cap ? up->cap : UPLOAD_MIN_CAP;

	if (need <= up->cap)
		return up->cap;
	while (cap < need)
		cap *= 2;
	if (cap > up->total)
		cap = (size_t)up->total;
	return cap;
}

/* Whether piece `m` is the next one of the dump; says what is wrong when not. */
static bool upload_in_order(const struct upload *up, const struct fr_msg_dump_data *m, char *why,
			    size_t cap)
{
	const char *wrong;

	if (!up->active) {
		snprintf(why, cap, "piece at offset %" PRIu64 " of a dump never started", m->offset);
		return false;
	}
	if (m->total != up->total)
		wrong = "the dump's total changed";
	else if (m->offset > up->received)
		wrong = "a gap after the bytes received";
	else if (m->offset < up->received)
		wrong = "it overlaps the bytes received";
	else if (m->len > up->total - up->received)
		wrong = "it runs past the dump's end";
	else
		return true;
	snprintf(why, cap,
		 "piece of %" PRIu32 " bytes at offset %" PRIu64 " of %" PRIu64
		 " out of order (expected offset %" PRIu64 " of %" PRIu64 "): %s",
		 m->len, m->offset, m->total, up->received, up->total, wrong);
	return false;
}

enum upload_step upload_append(struct upload *up, const struct fr_msg_dump_data *m,
			       upload_charge_fn *charge, void *ctx, char *why, size_t cap)
{
	size_t grown;
	uint8_t *data;

	if (!upload_in_order(up, m, why, cap))
		return UPLOAD_ERROR;
	grown = upload_grown_cap(up, m->len);
	if (charge && !charge(ctx, up, grown - up->cap, m->len, why, cap))
		return UPLOAD_ERROR;
	if (grown != up->cap) {
		data = realloc(up->data, grown);
		if (!data) {
			snprintf(why, cap,
				 "out of memory for %" PRIu64 " bytes of a dump of %" PRIu64,
				 up->received + m->len, up->total);
			return UPLOAD_ERROR;
		}
		up->data = data;
		up->cap = grown;
	}
	if (m->len)
		memcpy(up->data + up->received, m->data, m->len);
	up->received += m->len;
	return up->received == up->total ? UPLOAD_COMPLETE : UPLOAD_MORE;
}

uint8_t *upload_take(struct upload *up, size_t *len)
{
	uint8_t *data = up->data;

	assert(up->active && up->received == up->total);
	*len = (size_t)up->total;
	memset(up, 0, sizeof(*up));
	return data;
}

void upload_reset(struct upload *up)
{
	free(up->data);
	memset(up, 0, sizeof(*up));
}
