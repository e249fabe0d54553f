"""A training loop in Python over MPI, for the Python-frames end-to-end test.

A data-loader thread (threading) prefetches batches into a queue; each
step takes one in load_batch() and sums it across ranks with an allreduce
(mpi4py's pickle-based comm.allreduce). With STALL_RANK >= 0, that rank
stalls in load_batch() before the allreduce of step STALL_STEP, where the
daemon's timeout finds it: asleep (HOW "sleep", the default) or spinning in
pure Python while holding the GIL ("spin"); the others wait in the
allreduce. Without one (-1) rank 0 prints the losses, which must be the
same with and without the agent.

usage: train_loop.py STALL_RANK STALL_STEP STEPS [HOW]
"""
import queue
import sys
import threading
import time

from mpi4py import MPI


def prefetch(rank, batches):
    step = 1
    while True:
        batches.put([float(rank + step + i) for i in range(4)])  # PREFETCH_LINE
        step += 1


def load_batch(batches, stall):
    if stall == "sleep":
        time.sleep(600)  # LOAD_BATCH_LINE: where the stalled rank is
    elif stall == "spin":
        x = 0
        while True:
            x += 1  # SPIN_LINE: where the spinning rank is
    return batches.get()


def train_step(comm, batch):
    local = sum(batch)
    return comm.allreduce(local, op=MPI.SUM)  # ALLREDUCE_LINE: where the others wait


def main():
    stall_rank, stall_step, steps = (int(a) for a in sys.argv[1:4])
    how = sys.argv[4] if len(sys.argv) > 4 else "sleep"
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    batches = queue.Queue(maxsize=2)
    threading.Thread(target=prefetch, args=(rank, batches), name="loader", daemon=True).start()
    losses = []
    for step in range(1, steps + 1):
        stall = how if rank == stall_rank and step == stall_step else None
        batch = load_batch(batches, stall)
        losses.append(train_step(comm, batch))
    if rank == 0:
        print(f"{comm.Get_size()} ranks, {steps} steps, losses {losses[0]:.1f} .. {losses[-1]:.1f}",
              flush=True)


main()
