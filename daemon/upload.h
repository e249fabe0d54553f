/*
 * A dump arriving in DUMP_DATA pieces, put back together; the one
 * reassembler of incidents and live looks. Its owner says what a dump may
 * cost (the limit, the charge to the memory budget) and what is done with
 * it once whole.
 */
#ifndef FR_DAEMON_UPLOAD_H
#define FR_DAEMON_UPLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../protocol/wire.h"

struct upload {
	bool active;                /* between upload_begin() and its end */
	char id[FR_INCIDENT_MAX + 1]; /* the incident or live look it answers */
	uint8_t *data;              /* grows with the pieces received */
	size_t cap;
	uint64_t total;
	uint64_t received;
	/* Bytes the owner charged to the memory budget for it, which the
	 * owner gives back: upload_reset() does not. */
	uint64_t charged;
};

/* An upload's first buffer; it doubles as pieces arrive. */
#define UPLOAD_MIN_CAP (64u << 10)

enum upload_step {
	UPLOAD_ERROR = -1,          /* `why` says what is wrong; the owner resets it */
	UPLOAD_MORE,
	UPLOAD_COMPLETE,            /* upload_take() hands the bytes over */
};

/*
 * What the owner pays before the buffer grows by `grow` bytes (0 when the
 * piece fits) for a piece of `len` bytes: returns false, with the reason
 * in `why`, to refuse the piece. Whatever it charged it adds to
 * up->charged.
 */
typedef bool upload_charge_fn(void *ctx, struct upload *up, uint64_t grow, uint32_t len,
			      char *why, size_t cap);

/*
 * Starts a reset upload of dump `id`, of `total` bytes, at most `max`.
 * Nothing is allocated: the buffer grows as the pieces arrive, never past
 * `total`, so that announcing a large total costs a peer nothing. Returns
 * 0, -EPROTO for an empty dump (what an agent sends when it could not
 * build one) or -EMSGSIZE over `max`; the owner says which in its words.
 */
int upload_begin(struct upload *up, const char *id, uint64_t total, uint64_t max);
/*
 * Adds piece `m` (its id is the owner's to check), which must follow the
 * bytes received: a gap, an overlap, a changed total, a piece past the end
 * or of a dump never started is an error naming which. `charge` (NULL:
 * none) is called once the piece is found in order, before the buffer
 * grows.
 */
enum upload_step upload_append(struct upload *up, const struct fr_msg_dump_data *m,
			       upload_charge_fn *charge, void *ctx, char *why, size_t cap);
/* Hands a complete dump's bytes (the caller owns them) and resets `up`. */
uint8_t *upload_take(struct upload *up, size_t *len);
/* Frees what `up` holds and makes it ready for upload_begin(). */
void upload_reset(struct upload *up);

#endif
