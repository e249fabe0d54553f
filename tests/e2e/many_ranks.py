#!/usr/bin/env python3
"""N ranks of one MPI-like job from one process, for the live view tests:
each connects, says HELLO as rank i of N and sends a COMM for world with
its N members, then stays idle. Prints "up N" once every rank's frames
went out; holds the connections until killed.

  many_ranks.py PORT JOB N
"""

import array
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import COMM, frame, open_agent, s  # noqa: E402


def main():
    port, job, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 64), hard))
    members = array.array("I", range(n))
    if sys.byteorder != "little":
        members.byteswap()
    socks = []
    for rank in range(n):
        sock = open_agent(port, None, job, rank, n)
        sock.sendall(frame(COMM, s("world") + s("MPI_COMM_WORLD") +
                           rank.to_bytes(4, "little") + n.to_bytes(4, "little") +
                           members.tobytes()))
        socks.append(sock)
    print("up %d" % n, flush=True)
    while True:
        time.sleep(60)


if __name__ == "__main__":
    main()
