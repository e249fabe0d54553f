"""A planted hang in a program that calls MPI through a handle, as Julia's
ccall and Python's ctypes do: libmpi is dlopened RTLD_LOCAL and every
function is looked up with dlsym(handle, name), never through the global
scope the agent's hooks are in. Each rank runs barrier #1..#STEPS on
MPI_COMM_WORLD; the culprit rank never returns from stuck_in_compute()
before barrier #AT. Without a culprit (-1) every rank ends normally and
rank 0 prints "done".

usage: ctypes_hang.py CULPRIT AT STEPS
"""
import ctypes
import os
import sys
import time


def stuck_in_compute():
    while True:
        time.sleep(0.1)


def main():
    culprit, at, steps = (int(a) for a in sys.argv[1:4])
    mpi = ctypes.CDLL("libmpi.so.40", mode=os.RTLD_LOCAL | os.RTLD_NOW)
    # Open MPI's MPI_COMM_WORLD is the address of its predefined object.
    world = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.in_dll(mpi, "ompi_mpi_comm_world")))
    if mpi.MPI_Init(None, None) != 0:
        sys.exit("MPI_Init failed")
    rank = ctypes.c_int()
    mpi.MPI_Comm_rank(world, ctypes.byref(rank))
    for step in range(1, steps + 1):
        if rank.value == culprit and step == at:
            stuck_in_compute()
        if mpi.MPI_Barrier(world) != 0:
            sys.exit("MPI_Barrier failed")
    mpi.MPI_Finalize()
    if rank.value == 0:
        print("done", flush=True)


main()
