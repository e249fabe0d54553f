/*
 * Links against the real libnccl.so.2 and initialises a one-rank
 * communicator. Without a GPU the real library refuses (it cannot reach
 * CUDA); the test runs this with and without the agent and checks that the
 * program sees NCCL's own answer, unchanged, and that the agent's hooks ran.
 */
#include <stdio.h>

#include "../../agent/nccl_abi.h"

int main(void)
{
	ncclUniqueId id;
	ncclComm_t comm = NULL;
	int version = 0;
	ncclResult_t rc;

	rc = ncclGetVersion(&version);
	printf("ncclGetVersion -> %d (%d)\n", (int)rc, version);
	rc = ncclGetUniqueId(&id);
	printf("ncclGetUniqueId -> %d\n", (int)rc);
	rc = ncclCommInitRank(&comm, 1, id, 0);
	printf("ncclCommInitRank -> %d\n", (int)rc);
	if (rc == ncclSuccess)
		ncclCommDestroy(comm);
	return 0;
}
