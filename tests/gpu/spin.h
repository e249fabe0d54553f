/*
 * The work that holds a stream for a while, as a long kernel does: the GPU
 * check queues it ahead of an NCCL collective, so that the collective is
 * enqueued on the host and then waits on the device.
 *
 * Two implementations: spin.cu, a CUDA kernel for the real GPU, and
 * spin_standin.c, a work item on a stream of the CPU stand-in
 * (tests/nccl/fake_cudart.c). Both end when released or at a time limit,
 * so that a process whose check went wrong still drains its stream and
 * exits.
 */
#ifndef GPU_SPIN_H
#define GPU_SPIN_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;

/* How a spin ended, read after the stream has been synchronised. */
enum spin_outcome { SPIN_NOT_ENDED = 0, SPIN_RELEASED = 1, SPIN_TIME_LIMIT = 2 };

/* Prepares the device side (the release flag); 0, or -1 with a message on
 * stderr. */
int spin_init(void);

/* Queues one spin on `stream`, running until spin_release() or for at most
 * `limit_s` seconds; 0, or -1 with a message on stderr. One at a time. */
int spin_launch(struct CUstream_st *stream, double limit_s);

/* Whether the device has begun the spin (everything queued before it is
 * done). */
bool spin_started(void);

/* Lets the spin end. */
void spin_release(void);

enum spin_outcome spin_outcome(void);

/* The device's name, for the summary. */
void spin_device_name(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif
