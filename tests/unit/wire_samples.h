/*
 * Sample messages that test_wire.c round-trips and test_auth.c makes its
 * proofs of: PROTOCOL.md's worked example is the proof of this HELLO for
 * this CHALLENGE, so neither file may change them alone.
 */
#ifndef FR_TEST_WIRE_SAMPLES_H
#define FR_TEST_WIRE_SAMPLES_H

#include <stdint.h>
#include <string.h>

#include "wire.h"

static inline void sample_hello(struct fr_msg_hello *m)
{
	memset(m, 0, sizeof(*m));
	strcpy(m->job, "job-42");
	m->rank = 3;
	m->world_size = 8;
	m->pid = 123456;
	strcpy(m->host, "node-a.cluster");
	m->ring_capacity = 2000;
	m->start_ns = 0x0102030405060708ull;
	strcpy(m->comm_lib, "Open MPI v4.1.4");
}

static inline void sample_challenge(struct fr_msg_challenge *m)
{
	for (unsigned i = 0; i < FR_WIRE_NONCE_SIZE; i++)
		m->nonce[i] = (uint8_t)i;
}

static inline void sample_daemon_challenge(struct fr_msg_daemon_challenge *m)
{
	for (unsigned i = 0; i < FR_WIRE_NONCE_SIZE; i++)
		m->nonce[i] = (uint8_t)(0x80 + i);
}

#endif
