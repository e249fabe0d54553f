/*
 * The real MPI behind the hooks (hooks_mpi.c): libmpi's PMPI_* functions
 * and Open MPI's predefined objects, looked up at run time.
 *
 * libflightrec.so holds no link-time reference to MPI at all. A reference,
 * even a weak one, is bound once, when the agent loads: in a program that
 * loads libmpi later with dlopen (Python's mpi4py, Julia, a plugin; often
 * RTLD_LOCAL, so libmpi never joins the global scope) it stays NULL, and a
 * hook would call address 0. Instead the hooks find libmpi at their first
 * call, in the global scope or else in the scope of the object that called
 * them (mpi4py's extension module links libmpi), as the NCCL hooks do, and
 * keep what they found in one table.
 *
 * The lists below are every MPI name the hooks use; tests/e2e/test_preload.sh
 * fails when the library gains an undefined MPI symbol, which is what using
 * an MPI function or handle directly, instead of through the table, gives.
 */
#ifndef FR_AGENT_MPI_REAL_H
#define FR_AGENT_MPI_REAL_H

/* The PMPI functions the hooks forward to or call themselves. */
#define FR_PMPI_FUNCTIONS(X)                                                      \
	X(Allgather) X(Allgatherv) X(Allreduce) X(Alltoall) X(Alltoallv) X(Barrier)    \
	X(Bcast) X(Comm_create) X(Comm_dup) X(Comm_free) X(Comm_group) X(Comm_rank)    \
	X(Comm_size) X(Comm_split) X(Comm_split_type) X(Exscan) X(Finalize) X(Gather)  \
	X(Gatherv) X(Get_library_version) X(Group_free) X(Group_translate_ranks)       \
	X(Iallgather) X(Iallgatherv) X(Iallreduce) X(Ialltoall) X(Ialltoallv)          \
	X(Ibarrier) X(Ibcast) X(Iexscan) X(Igather) X(Igatherv) X(Init) X(Init_thread) \
	X(Irecv) X(Ireduce) X(Ireduce_scatter) X(Ireduce_scatter_block) X(Iscan)       \
	X(Iscatter) X(Iscatterv) X(Isend) X(Issend) X(Recv) X(Reduce)                  \
	X(Reduce_scatter) X(Reduce_scatter_block) X(Request_free) X(Scan) X(Scatter)   \
	X(Scatterv) X(Send) X(Sendrecv) X(Ssend) X(Test) X(Testall) X(Testany)         \
	X(Testsome) X(Type_size) X(Wait) X(Waitall) X(Waitany) X(Waitsome)

/*
 * Open MPI's handles are the addresses of its predefined objects
 * (MPI_COMM_WORLD is &ompi_mpi_comm_world). The handles the hooks compare
 * against, with the symbol behind each; the datatypes and reductions the
 * hooks name are looked up by symbol in hooks_mpi.c's tables.
 */
#define FR_OMPI_OBJECTS(X)                                                        \
	X(comm_world, "ompi_mpi_comm_world") X(comm_self, "ompi_mpi_comm_self")        \
	X(comm_null, "ompi_mpi_comm_null") X(datatype_null, "ompi_mpi_datatype_null")  \
	X(op_null, "ompi_mpi_op_null") X(request_null, "ompi_request_null")

#endif
