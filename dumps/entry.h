/*
 * The fields of a dump's entry (dumps/FORMAT.md), declared once, for the
 * writer (dump_write.c) and both readers (dump_read.c): internal to dumps/.
 */
#ifndef FR_ENTRY_H
#define FR_ENTRY_H

/*
 * One row a field, in the order our writer writes them, which is the order
 * the readers expect them in; then three of PyTorch's that only a visitor
 * reads (fr_dump_entry). The columns:
 *
 *   id     the field's name in enum entry_field (EF_<id>);
 *   key    its JSON key;
 *   drop   the reader has no use for it;
 *   copy   PyTorch's copy of what our own fields say (the group's name and
 *          description, the sizes and dtypes as tensor lists, ...): left
 *          out of a summary (summary.h), whose only reader is ours, and
 *          read when present, so that a summary is a third smaller;
 *   shape  how our writer writes it: put_<shape>() in dump_write.c writes
 *          it, scan_<shape>() in dump_read.c reads it back from the text;
 *   into   where that reader (written_entry()) puts the value, typed: a
 *          member of the operation `op`, or of `w`, the values it keeps
 *          for the rules of an entry (w.unused: read and dropped);
 *   value  what the writer writes, an expression of the operation `op` and
 *          of what entry_json() works out before: `desc` (its
 *          communicator's description, a JSON string), `profiling`
 *          ("mpi:all_reduce"), `opname`.
 *
 * The shapes: u64 an integer from 0; str a string; pair ["comm", "desc"];
 * sizes [[count]]; strs ["dtype"]; time an integer, or null for 0; flag
 * true or false; rank an integer from -1; if_true written (true) only when
 * true; ratio written only when not 0; none never written.
 */
#define ENTRY_FIELDS(X)                                                                               \
	X(RECORD_ID, "record_id", 0, 0, u64, op->record_id, op->record_id)                            \
	X(PG_ID, "pg_id", 0, 0, str, w.pg_id, op->comm)                                               \
	X(PROCESS_GROUP, "process_group", 0, 1, pair, w.pg, op->comm, desc)                           \
	X(COLL_SEQ, "collective_seq_id", 0, 0, u64, w.coll_seq, op->is_p2p ? 0 : op->seq)             \
	X(P2P_SEQ, "p2p_seq_id", 0, 0, u64, w.p2p_seq, op->is_p2p ? op->seq : 0)                      \
	X(OP_ID, "op_id", 1, 1, u64, w.unused, op->record_id)                                         \
	X(PROFILING_NAME, "profiling_name", 0, 1, str, w.profiling, profiling)                        \
	X(CREATED, "time_created_ns", 0, 0, u64, op->t_entered_ns, op->t_entered_ns)                  \
	/* Sizes and dtypes again, for PyTorch's tools: ours are below. */                            \
	X(INPUT_SIZES, "input_sizes", 0, 1, sizes, w.unused, op->count)                               \
	X(INPUT_DTYPES, "input_dtypes", 0, 1, strs, w.dtypes, op->dtype)                              \
	X(OUTPUT_SIZES, "output_sizes", 0, 1, sizes, w.unused, output_count(op))                      \
	X(OUTPUT_DTYPES, "output_dtypes", 1, 1, strs, w.dtypes, op->dtype)                            \
	X(STATE, "state", 0, 0, str, w.state, state_text(op))                                         \
	X(STARTED, "time_discovered_started_ns", 0, 0, time, op->t_started_ns, op->t_started_ns)      \
	X(COMPLETED, "time_discovered_completed_ns", 0, 0, time, op->t_completed_ns, op->t_completed_ns) \
	X(RETIRED, "retired", 1, 1, flag, w.retired, op->state == FR_STATE_COMPLETED)                 \
	X(IS_P2P, "is_p2p", 0, 0, flag, op->is_p2p, op->is_p2p)                                       \
	X(OP, "op", 0, 0, str, w.op, opname)                                                          \
	X(NONBLOCKING, "nonblocking", 0, 0, flag, op->nonblocking, op->nonblocking)                   \
	X(WAITED, "waited", 0, 0, flag, op->waited, op->waited)                                       \
	X(CAPTURED, "captured", 0, 0, if_true, op->captured, op->captured)                            \
	X(SIZE_RATIO, "size_ratio", 0, 0, ratio, op->size_ratio, op->size_ratio)                      \
	X(PEER, "peer", 0, 0, rank, op->peer, op->peer)                                               \
	X(ROOT, "root", 0, 0, rank, op->root, op->root)                                               \
	X(PEER_IN_COMM, "peer_in_comm", 0, 0, rank, op->peer_in_comm, op->peer_in_comm)               \
	X(COUNT, "count", 0, 0, u64, op->count, op->count)                                            \
	X(BYTES, "bytes", 0, 0, u64, op->bytes, op->bytes)                                            \
	X(DTYPE, "dtype", 0, 0, str, w.dtype, op->dtype)                                              \
	X(REDOP, "redop", 0, 0, str, w.redop, op->redop)                                              \
	X(TIMEOUT, "timeout_ms", 1, 0, none, w.unused, 0)                                             \
	X(FRAMES, "frames", 1, 0, none, w.unused, 0)                                                  \
	X(THREAD_NAME, "thread_name", 1, 0, none, w.unused, 0)

enum entry_field {
#define EF_ENUM(id, ...) EF_##id,
	ENTRY_FIELDS(EF_ENUM)
#undef EF_ENUM
	EF__COUNT
};

#endif
