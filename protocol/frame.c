/*
 * The frame reader (frame.h). It only finds frames: headers are checked by
 * fr_wire_header_decode() and payloads by the decoders of wire.c, which the
 * caller picks by the header's type.
 */
#include "frame.h"

#include <errno.h>
#include <string.h>

int fr_frame_next(const uint8_t *buf, size_t len, size_t max_payload, struct fr_wire_frame *f)
{
	int err;

	memset(f, 0, sizeof(*f));
	f->size = FR_WIRE_HEADER_SIZE;
	err = fr_wire_header_decode(buf, len, &f->h);
	if (err == -EAGAIN)
		return err;
	f->have_header = true;
	if (err)
		return err;
	if (f->h.length > max_payload)
		return -EFBIG;
	f->size = FR_WIRE_HEADER_SIZE + (size_t)f->h.length;
	if (len < f->size)
		return -EAGAIN;
	f->payload = buf + FR_WIRE_HEADER_SIZE;
	return 0;
}
