/*
 * The vocabulary of operations and their states, shared by the agent (which
 * records them), the wire protocol (which carries them as small integers) and
 * the dumps (which spell them as strings, in PyTorch Flight Recorder's words
 * where they exist).
 *
 * The numeric values travel on the wire and never change; new kinds are added
 * at the end of the table.
 */
#ifndef FR_OP_H
#define FR_OP_H

#include <stdbool.h>
#include <stdint.h>

/* X(ENUM, value, "name", is_collective) */
#define FR_OP_TYPES(X)                                  \
	X(UNKNOWN, 0, "unknown", false)                  \
	X(BARRIER, 1, "barrier", true)                   \
	X(BROADCAST, 2, "broadcast", true)               \
	X(REDUCE, 3, "reduce", true)                     \
	X(ALL_REDUCE, 4, "all_reduce", true)             \
	X(ALL_GATHER, 5, "all_gather", true)             \
	X(ALL_GATHERV, 6, "all_gatherv", true)           \
	X(GATHER, 7, "gather", true)                     \
	X(GATHERV, 8, "gatherv", true)                   \
	X(SCATTER, 9, "scatter", true)                   \
	X(SCATTERV, 10, "scatterv", true)                \
	X(ALL_TO_ALL, 11, "all_to_all", true)            \
	X(ALL_TO_ALLV, 12, "all_to_allv", true)          \
	X(REDUCE_SCATTER, 13, "reduce_scatter", true)    \
	X(REDUCE_SCATTER_BLOCK, 14, "reduce_scatter_block", true) \
	X(SCAN, 15, "scan", true)                        \
	X(EXSCAN, 16, "exscan", true)                    \
	X(COMM_SPLIT, 17, "comm_split", true)            \
	X(COMM_DUP, 18, "comm_dup", true)                \
	X(COMM_CREATE, 19, "comm_create", true)          \
	X(SEND, 20, "send", false)                       \
	X(RECV, 21, "recv", false)                       \
	X(SENDRECV, 22, "sendrecv", false)              \
	X(FINALIZE, 23, "finalize", true)

enum fr_op_type {
#define FR_OP_ENUM(e, v, name, coll) FR_OP_##e = v,
	FR_OP_TYPES(FR_OP_ENUM)
#undef FR_OP_ENUM
	FR_OP__COUNT
};

/*
 * States an operation goes through. MPI operations are `entered` when the
 * rank calls them and `completed` when they return (or, for non-blocking
 * ones, when Wait/Test reports them done).
 */
#define FR_OP_STATES(X)            \
	X(ENTERED, 0, "entered")   \
	X(COMPLETED, 1, "completed")

enum fr_op_state {
#define FR_STATE_ENUM(e, v, name) FR_STATE_##e = v,
	FR_OP_STATES(FR_STATE_ENUM)
#undef FR_STATE_ENUM
	FR_STATE__COUNT
};

/* Name of an operation type ("all_reduce"); "unknown" for values out of range. */
const char *fr_op_name(unsigned type);
/* Inverse of fr_op_name(); FR_OP_UNKNOWN when the name is not known. */
enum fr_op_type fr_op_from_name(const char *name);
/* True for operations that every member of a communicator must call. */
bool fr_op_is_collective(unsigned type);
/* True for collectives with a root (broadcast, reduce, gather(v), scatter(v)). */
bool fr_op_is_rooted(unsigned type);
/*
 * True for collectives that end for every member at once (a reduction or a
 * gather to all, a barrier): the member that waited least in the call came
 * last, whatever the hosts' clocks say. fr-analyze and the daemon's live
 * straggler scores both order arrivals so.
 */
bool fr_op_ends_together(unsigned type);

const char *fr_state_name(unsigned state);

#endif
