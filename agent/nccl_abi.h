/*
 * The part of NCCL's binary interface (2.x, checked against 2.28.9) that the
 * agent hooks, and that the CPU stand-in under tests/nccl implements. The
 * agent never includes nccl.h or links against NCCL: it must build on
 * machines without CUDA and load into processes without NCCL, and it finds
 * the real functions at run time (the pncclX profiling symbols).
 *
 * Only types and values that are part of NCCL's stable ABI are here:
 * handles are pointers, enums are ints with fixed values, ncclUniqueId is
 * 128 opaque bytes, ncclConfig_t is passed through by pointer only.
 */
#ifndef FR_NCCL_ABI_H
#define FR_NCCL_ABI_H

#include <stddef.h>

typedef struct ncclComm *ncclComm_t;
typedef struct CUstream_st *cudaStream_t;
typedef struct ncclConfig_opaque ncclConfig_t; /* only ever passed by pointer */

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
	char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

typedef enum {
	ncclSuccess = 0,
	ncclUnhandledCudaError = 1,
	ncclSystemError = 2,
	ncclInternalError = 3,
	ncclInvalidArgument = 4,
	ncclInvalidUsage = 5,
	ncclRemoteError = 6,
	ncclInProgress = 7,
	ncclNumResults = 8
} ncclResult_t;

typedef enum {
	ncclInt8 = 0,
	ncclUint8 = 1,
	ncclInt32 = 2,
	ncclUint32 = 3,
	ncclInt64 = 4,
	ncclUint64 = 5,
	ncclFloat16 = 6,
	ncclFloat32 = 7,
	ncclFloat64 = 8,
	ncclBfloat16 = 9,
	ncclFloat8e4m3 = 10,
	ncclFloat8e5m2 = 11,
	ncclNumTypes = 12
} ncclDataType_t;

/* Values >= ncclNumOps are user-defined reductions (ncclRedOpCreatePreMulSum). */
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

/*
 * X(name, return type, (parameters), (arguments)): every NCCL function the
 * agent interposes, declared once. The hooks (agent/hooks_nccl.c) and the
 * stand-in (tests/nccl/fake_nccl.c) both expand it.
 */
#define FR_NCCL_SETUP(X)                                                                          \
	X(GetVersion, ncclResult_t, (int *version), (version))                                    \
	X(GetUniqueId, ncclResult_t, (ncclUniqueId *id), (id))                                    \
	X(CommInitRank, ncclResult_t, (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank),  \
	  (comm, nranks, id, rank))                                                               \
	X(CommInitRankConfig, ncclResult_t,                                                       \
	  (ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config),        \
	  (comm, nranks, id, rank, config))                                                       \
	X(CommInitAll, ncclResult_t, (ncclComm_t *comms, int ndev, const int *devlist),           \
	  (comms, ndev, devlist))                                                                 \
	X(CommInitRankScalable, ncclResult_t,                                                     \
	  (ncclComm_t *comm, int nranks, int rank, int nids, ncclUniqueId *ids,                   \
	   ncclConfig_t *config),                                                                 \
	  (comm, nranks, rank, nids, ids, config))                                                \
	X(CommSplit, ncclResult_t,                                                                \
	  (ncclComm_t comm, int color, int key, ncclComm_t *newcomm, ncclConfig_t *config),       \
	  (comm, color, key, newcomm, config))                                                    \
	X(CommShrink, ncclResult_t,                                                               \
	  (ncclComm_t comm, int *exclude, int nexclude, ncclComm_t *newcomm,                      \
	   ncclConfig_t *config, int flags),                                                      \
	  (comm, exclude, nexclude, newcomm, config, flags))                                      \
	X(CommFinalize, ncclResult_t, (ncclComm_t comm), (comm))                                  \
	X(CommDestroy, ncclResult_t, (ncclComm_t comm), (comm))                                   \
	X(CommAbort, ncclResult_t, (ncclComm_t comm), (comm))                                     \
	X(CommRevoke, ncclResult_t, (ncclComm_t comm, int flags), (comm, flags))                  \
	X(CommGetAsyncError, ncclResult_t, (ncclComm_t comm, ncclResult_t *err), (comm, err))     \
	X(CommCount, ncclResult_t, (const ncclComm_t comm, int *count), (comm, count))            \
	X(CommUserRank, ncclResult_t, (const ncclComm_t comm, int *rank), (comm, rank))

/* The collectives and point-to-point calls: each a hook that records it. */
#define FR_NCCL_COLLECTIVES(X)                                                                    \
	X(AllReduce, ncclResult_t,                                                                \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt, ncclRedOp_t op, \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, count, dt, op, comm, stream))                                      \
	X(Broadcast, ncclResult_t,                                                                \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt, int root,       \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, count, dt, root, comm, stream))                                    \
	X(Bcast, ncclResult_t,                                                                    \
	  (void *buff, size_t count, ncclDataType_t dt, int root, ncclComm_t comm,                \
	   cudaStream_t stream),                                                                  \
	  (buff, count, dt, root, comm, stream))                                                  \
	X(Reduce, ncclResult_t,                                                                   \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt, ncclRedOp_t op, \
	   int root, ncclComm_t comm, cudaStream_t stream),                                       \
	  (sendbuff, recvbuff, count, dt, op, root, comm, stream))                                \
	X(AllGather, ncclResult_t,                                                                \
	  (const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t dt,             \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, sendcount, dt, comm, stream))                                      \
	X(ReduceScatter, ncclResult_t,                                                            \
	  (const void *sendbuff, void *recvbuff, size_t recvcount, ncclDataType_t dt,             \
	   ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),                                 \
	  (sendbuff, recvbuff, recvcount, dt, op, comm, stream))                                  \
	X(AlltoAll, ncclResult_t,                                                                 \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt,                 \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, count, dt, comm, stream))                                          \
	X(Gather, ncclResult_t,                                                                   \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt, int root,       \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, count, dt, root, comm, stream))                                    \
	X(Scatter, ncclResult_t,                                                                  \
	  (const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t dt, int root,       \
	   ncclComm_t comm, cudaStream_t stream),                                                 \
	  (sendbuff, recvbuff, count, dt, root, comm, stream))                                    \
	X(Send, ncclResult_t,                                                                     \
	  (const void *sendbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,      \
	   cudaStream_t stream),                                                                  \
	  (sendbuff, count, dt, peer, comm, stream))                                              \
	X(Recv, ncclResult_t,                                                                     \
	  (void *recvbuff, size_t count, ncclDataType_t dt, int peer, ncclComm_t comm,            \
	   cudaStream_t stream),                                                                  \
	  (recvbuff, count, dt, peer, comm, stream))

#define FR_NCCL_GROUP(X)                                                                          \
	X(GroupStart, ncclResult_t, (void), ())                                                   \
	X(GroupEnd, ncclResult_t, (void), ())

#define FR_NCCL_API(X) FR_NCCL_SETUP(X) FR_NCCL_COLLECTIVES(X) FR_NCCL_GROUP(X)

#define FR_NCCL_DECLARE(name, ret, params, args) ret nccl##name params;
FR_NCCL_API(FR_NCCL_DECLARE)
#undef FR_NCCL_DECLARE

/* Not interposed, but the stand-in provides them like the real library. */
const char *ncclGetErrorString(ncclResult_t result);
const char *ncclGetLastError(ncclComm_t comm);

#endif
