/*
 * Completion on the GPU. An NCCL call returns once its work is enqueued on
 * a CUDA stream; the operation completes later, on the device. The hook
 * records a CUDA event on the stream right before the launch and another
 * right after it; the link thread polls them (cudaEventQuery), marks a
 * record started when the device reaches the first, and completes it when
 * the device reaches the second. Events come from a pool of slots, each
 * owning its two events (created once, timing disabled).
 *
 * The CUDA runtime is found at run time (dlopen, never linked) and used
 * only when a device is usable. Without it (no runtime, no driver, no
 * device) an operation counts as completed when its call returns, so that
 * a synchronous stand-in never looks hung. Inside CUDA graph capture no
 * event is recorded (the launch runs at each replay, not now): the hook
 * records the operation as captured, and it completes at once.
 */
#ifndef FR_AGENT_GPU_H
#define FR_AGENT_GPU_H

#include <stdbool.h>

#include "agent.h"
#include "cuda_abi.h"

/* Looks for a usable CUDA runtime (once; later calls return the answer). */
bool fr_gpu_usable(void);

/* An operation followed by events: its slot. */
struct fr_gpu_op;

/* Whether `stream` is being captured into a CUDA graph; false when CUDA is
 * not usable. Application thread. */
bool fr_gpu_capturing(cudaStream_t stream);

/*
 * Before the launch: claims a slot and records its start event on
 * `stream`, which the caller found not capturing (a captured launch runs at
 * each replay of the graph, not now, and its events may not be queried).
 * NULL when the operation cannot be followed (no usable CUDA, every slot
 * busy): fr_gpu_track then completes it at once.
 * Application thread; no lock, no allocation once warm.
 */
struct fr_gpu_op *fr_gpu_begin(cudaStream_t stream);

/*
 * After a successful launch: records the end event on `stream` and hands
 * the operation of `t` to the link thread's polling; with `g` NULL (or
 * when the event cannot be recorded), completes it now.
 */
void fr_gpu_track(struct fr_gpu_op *g, const struct fr_ticket *t, cudaStream_t stream);

/* The launch failed: gives the slot back (`g` may be NULL). */
void fr_gpu_cancel(struct fr_gpu_op *g);

/* Marks started, and completes, the operations whose events the device
 * reached. Link thread. */
void fr_gpu_poll(void);

#endif
