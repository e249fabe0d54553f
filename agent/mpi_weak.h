/*
 * Every MPI symbol the hooks reference, made a weak reference, so that
 * libflightrec.so loads in a process without libmpi (it is never linked
 * against it) and binds to libmpi's definitions when the process has them.
 * Open MPI's handles (MPI_COMM_WORLD, MPI_DOUBLE, MPI_SUM, ...) are
 * addresses of its predefined objects, hence the ompi_* names.
 *
 * tests/e2e/test_preload.sh fails when a new MPI reference is missing here
 * (it looks for strong undefined MPI symbols in the library).
 */
#ifndef FR_AGENT_MPI_WEAK_H
#define FR_AGENT_MPI_WEAK_H

#pragma weak PMPI_Allgather
#pragma weak PMPI_Allgatherv
#pragma weak PMPI_Allreduce
#pragma weak PMPI_Alltoall
#pragma weak PMPI_Alltoallv
#pragma weak PMPI_Barrier
#pragma weak PMPI_Bcast
#pragma weak PMPI_Comm_create
#pragma weak PMPI_Comm_dup
#pragma weak PMPI_Comm_free
#pragma weak PMPI_Comm_group
#pragma weak PMPI_Comm_rank
#pragma weak PMPI_Comm_size
#pragma weak PMPI_Comm_split
#pragma weak PMPI_Comm_split_type
#pragma weak PMPI_Exscan
#pragma weak PMPI_Finalize
#pragma weak PMPI_Gather
#pragma weak PMPI_Gatherv
#pragma weak PMPI_Get_library_version
#pragma weak PMPI_Group_free
#pragma weak PMPI_Group_translate_ranks
#pragma weak PMPI_Iallgather
#pragma weak PMPI_Iallgatherv
#pragma weak PMPI_Iallreduce
#pragma weak PMPI_Ialltoall
#pragma weak PMPI_Ialltoallv
#pragma weak PMPI_Ibarrier
#pragma weak PMPI_Ibcast
#pragma weak PMPI_Iexscan
#pragma weak PMPI_Igather
#pragma weak PMPI_Igatherv
#pragma weak PMPI_Init
#pragma weak PMPI_Init_thread
#pragma weak PMPI_Irecv
#pragma weak PMPI_Ireduce
#pragma weak PMPI_Ireduce_scatter
#pragma weak PMPI_Ireduce_scatter_block
#pragma weak PMPI_Iscan
#pragma weak PMPI_Iscatter
#pragma weak PMPI_Iscatterv
#pragma weak PMPI_Isend
#pragma weak PMPI_Issend
#pragma weak PMPI_Recv
#pragma weak PMPI_Reduce
#pragma weak PMPI_Reduce_scatter
#pragma weak PMPI_Reduce_scatter_block
#pragma weak PMPI_Request_free
#pragma weak PMPI_Scan
#pragma weak PMPI_Scatter
#pragma weak PMPI_Scatterv
#pragma weak PMPI_Send
#pragma weak PMPI_Sendrecv
#pragma weak PMPI_Ssend
#pragma weak PMPI_Test
#pragma weak PMPI_Testall
#pragma weak PMPI_Testany
#pragma weak PMPI_Testsome
#pragma weak PMPI_Type_size
#pragma weak PMPI_Wait
#pragma weak PMPI_Waitall
#pragma weak PMPI_Waitany
#pragma weak PMPI_Waitsome
#pragma weak ompi_mpi_2int
#pragma weak ompi_mpi_byte
#pragma weak ompi_mpi_c_bool
#pragma weak ompi_mpi_c_double_complex
#pragma weak ompi_mpi_c_float_complex
#pragma weak ompi_mpi_char
#pragma weak ompi_mpi_comm_null
#pragma weak ompi_mpi_comm_self
#pragma weak ompi_mpi_comm_world
#pragma weak ompi_mpi_datatype_null
#pragma weak ompi_mpi_double
#pragma weak ompi_mpi_double_int
#pragma weak ompi_mpi_float
#pragma weak ompi_mpi_float_int
#pragma weak ompi_mpi_int
#pragma weak ompi_mpi_int16_t
#pragma weak ompi_mpi_int32_t
#pragma weak ompi_mpi_int64_t
#pragma weak ompi_mpi_int8_t
#pragma weak ompi_mpi_long
#pragma weak ompi_mpi_long_double
#pragma weak ompi_mpi_long_int
#pragma weak ompi_mpi_long_long_int
#pragma weak ompi_mpi_op_band
#pragma weak ompi_mpi_op_bor
#pragma weak ompi_mpi_op_bxor
#pragma weak ompi_mpi_op_land
#pragma weak ompi_mpi_op_lor
#pragma weak ompi_mpi_op_lxor
#pragma weak ompi_mpi_op_max
#pragma weak ompi_mpi_op_maxloc
#pragma weak ompi_mpi_op_min
#pragma weak ompi_mpi_op_minloc
#pragma weak ompi_mpi_op_no_op
#pragma weak ompi_mpi_op_null
#pragma weak ompi_mpi_op_prod
#pragma weak ompi_mpi_op_replace
#pragma weak ompi_mpi_op_sum
#pragma weak ompi_mpi_short
#pragma weak ompi_mpi_signed_char
#pragma weak ompi_mpi_uint16_t
#pragma weak ompi_mpi_uint32_t
#pragma weak ompi_mpi_uint64_t
#pragma weak ompi_mpi_uint8_t
#pragma weak ompi_mpi_unsigned
#pragma weak ompi_mpi_unsigned_char
#pragma weak ompi_mpi_unsigned_long
#pragma weak ompi_mpi_unsigned_long_long
#pragma weak ompi_mpi_unsigned_short
#pragma weak ompi_request_null

#endif
