"""A rank of a Python MPI job that dies of SIGSEGV, with Python's
faulthandler enabled, for the end-to-end tests of the agent's crash
handler: faulthandler must still print the Python traceback, and the exit
status must be the one without the agent.

usage: crash.py ORDER CULPRIT AT
  ORDER  "before": faulthandler is enabled before MPI is initialised (the
         agent's handler, installed at MPI_Init, calls faulthandler's
         first); "after": after it (faulthandler's calls the agent's)
"""
import ctypes
import faulthandler
import sys
import time
from array import array

order, culprit, at = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if order == "before":
    faulthandler.enable()
from mpi4py import MPI  # noqa: E402  MPI_Init: the agent starts here
if order == "after":
    faulthandler.enable()


def read_shard():
    # Page 0 may be mapped (some hosts allow it): an address nothing maps.
    return ctypes.string_at(0xdeadbeef000, 8)


def main():
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    for step in range(1, 100):
        time.sleep(0.1)
        if rank == culprit and step == at:
            read_shard()
        out = array("d", [0.0])
        comm.Allreduce(array("d", [1.0]), out, op=MPI.SUM)


main()
