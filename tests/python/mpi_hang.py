"""A planted hang in a Python MPI program, for the end-to-end tests.

mpi4py loads libmpi with dlopen after the agent is already in the process,
the way every Python, Julia or plug-in MPI program does. Each rank runs
all_reduce #1..#STEPS on MPI_COMM_WORLD (one double, through a buffer, so
that each is one MPI_Allreduce); the culprit rank never returns from
stuck_in_compute() before all_reduce #AT. Without a culprit (-1) rank 0
prints every rank's sum, which must be the same with and without the agent.

usage: mpi_hang.py CULPRIT AT STEPS
"""
import sys
import time
from array import array

from mpi4py import MPI


def stuck_in_compute():
    while True:
        time.sleep(0.1)


def main():
    culprit, at, steps = (int(a) for a in sys.argv[1:4])
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    total = 0.0
    for step in range(1, steps + 1):
        if rank == culprit and step == at:
            stuck_in_compute()
        out = array("d", [0.0])
        comm.Allreduce(array("d", [float(rank + step)]), out, op=MPI.SUM)
        total += out[0]
    sums = comm.gather(total, root=0)
    if rank == 0:
        for r, s in enumerate(sums):
            print(f"rank {r} of {comm.Get_size()}: sum {s:.1f}", flush=True)


main()
