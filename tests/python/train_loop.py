"""A training loop in Python over MPI, for the Python-frames end-to-end test.

Each step loads a batch and sums it across ranks with an allreduce
(mpi4py's pickle-based comm.allreduce). With STALL_RANK >= 0, that rank
sleeps in load_batch() before the allreduce of step STALL_STEP, where the
daemon's timeout finds it; the others wait in the allreduce. Without one
(-1) rank 0 prints the losses, which must be the same with and without the
agent.

usage: train_loop.py STALL_RANK STALL_STEP STEPS
"""
import sys
import time

from mpi4py import MPI


def load_batch(rank, step, stall):
    if stall:
        time.sleep(600)  # LOAD_BATCH_LINE: where the stalled rank is
    return [float(rank + step + i) for i in range(4)]


def train_step(comm, batch):
    local = sum(batch)
    return comm.allreduce(local, op=MPI.SUM)  # ALLREDUCE_LINE: where the others wait


def main():
    stall_rank, stall_step, steps = (int(a) for a in sys.argv[1:4])
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    losses = []
    for step in range(1, steps + 1):
        batch = load_batch(rank, step, rank == stall_rank and step == stall_step)
        losses.append(train_step(comm, batch))
    if rank == 0:
        print(f"{comm.Get_size()} ranks, {steps} steps, losses {losses[0]:.1f} .. {losses[-1]:.1f}",
              flush=True)


main()
