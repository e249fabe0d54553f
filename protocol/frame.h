/*
 * Reassembling frames from a byte stream: the one reader that the agent's
 * link, the daemon's server and bench/loadgen share, so that they agree on
 * when a frame is complete and on which headers are refused.
 *
 * The caller owns the buffer: it appends what it reads, asks
 * fr_frame_next() about the bytes from the start of the next frame, hands
 * a complete frame to its decoder, steps past it (f.size bytes) and asks
 * again; what is left of an incomplete frame it keeps for the next read.
 * The reader allocates nothing, takes no lock and makes no system call, so
 * the agent may call it on its link thread and the daemon under its lock.
 *
 * A header is judged as soon as its 16 bytes are in, before its payload
 * is: a peer cannot make the caller buffer a frame it would refuse. What
 * the caller does about a refusal (close, count, log, reconnect) is its
 * own.
 */
#ifndef FR_FRAME_H
#define FR_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

struct fr_wire_frame {
	/* Whether the header's bytes are in; `h` is meaningless before. */
	bool have_header;
	/* The header as fr_wire_header_decode() read it, also when refused. */
	struct fr_wire_header h;
	/* Bytes of the whole frame, header and payload: what the caller must
	 * hold for it to be complete, and step past once it has handled it.
	 * FR_WIRE_HEADER_SIZE until the header is in. */
	size_t size;
	/* The payload (h.length bytes, inside the caller's buffer) once the
	 * frame is complete; NULL before. */
	const uint8_t *payload;
};

/*
 * Looks at the `len` bytes at `buf`, which start where the next frame
 * does. Returns:
 *
 *   0        a complete frame: `f` says all of it
 *   -EAGAIN  not complete yet: read until `f->size` bytes are in
 *   -EPROTO, -EPROTONOSUPPORT, -EMSGSIZE, -EBADMSG
 *            the header is refused, as fr_wire_header_decode() says
 *            (-EMSGSIZE: longer than the protocol allows)
 *   -EFBIG   a valid header whose payload is longer than `max_payload`,
 *            the caller's limit (at most FR_WIRE_MAX_PAYLOAD)
 *
 * On an error the stream cannot go on: nothing says where a next frame
 * would start. `f->h` holds what the header said for every result but
 * -EAGAIN before the header is in.
 */
int fr_frame_next(const uint8_t *buf, size_t len, size_t max_payload, struct fr_wire_frame *f);

#endif
