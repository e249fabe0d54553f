/*
 * Completion on the GPU. An NCCL call returns once its work is enqueued on
 * a CUDA stream; the operation completes later, on the device. The hook
 * records a CUDA event on the stream right after the call and hands it
 * here; the link thread polls the events (cudaEventQuery) and completes the
 * ring records whose events have been reached.
 *
 * The CUDA runtime is found at run time (dlopen, never linked) and used
 * only when a device is usable. Without it (no runtime, no driver, no
 * device) an operation counts as completed when its call returns, so that
 * a synchronous stand-in never looks hung. Inside CUDA graph capture no
 * event is recorded: the operation is marked captured and completed.
 */
#ifndef FR_AGENT_GPU_H
#define FR_AGENT_GPU_H

#include <stdbool.h>

#include "agent.h"
#include "cuda_abi.h"

/* Looks for a usable CUDA runtime (once; later calls return the answer). */
bool fr_gpu_usable(void);

/*
 * Follows the operation of `t`, enqueued on `stream`, to its completion:
 * records an event, or completes it now when events cannot be used.
 * Application thread; no lock, no allocation once warm.
 */
void fr_gpu_track(const struct fr_ticket *t, cudaStream_t stream);

/* Completes the operations whose events were reached. Link thread. */
void fr_gpu_poll(void);

#endif
