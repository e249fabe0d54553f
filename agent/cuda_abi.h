/*
 * The few CUDA runtime calls the agent makes to follow NCCL operations to
 * their completion on the GPU, as loaded at run time with dlopen (never
 * linked): the agent must load where there is no CUDA. The CPU stand-in
 * under tests/nccl implements the same calls.
 *
 * Values are those of the CUDA runtime's stable ABI (checked against 13.0).
 */
#ifndef FR_CUDA_ABI_H
#define FR_CUDA_ABI_H

typedef int cudaError_t;
#define cudaSuccess 0
#define cudaErrorInsufficientDriver 35
#define cudaErrorNoDevice 100
#define cudaErrorNotReady 600

typedef struct CUevent_st *cudaEvent_t;
typedef struct CUstream_st *cudaStream_t;

#define cudaEventDisableTiming 0x02u

typedef enum {
	cudaStreamCaptureStatusNone = 0,
	cudaStreamCaptureStatusActive = 1,
	cudaStreamCaptureStatusInvalidated = 2
} cudaStreamCaptureStatus;

/* X(name, (parameters)): the runtime functions the agent looks up. */
#define FR_CUDA_API(X)                                                             \
	X(cudaGetDeviceCount, (int *count))                                        \
	X(cudaGetDevice, (int *device))                                            \
	X(cudaEventCreateWithFlags, (cudaEvent_t *event, unsigned flags))          \
	X(cudaEventRecord, (cudaEvent_t event, cudaStream_t stream))               \
	X(cudaEventQuery, (cudaEvent_t event))                                     \
	X(cudaEventDestroy, (cudaEvent_t event))                                   \
	X(cudaStreamIsCapturing, (cudaStream_t stream, cudaStreamCaptureStatus *status))

#endif
