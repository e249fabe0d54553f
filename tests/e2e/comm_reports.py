#!/usr/bin/env python3
"""One rank that reports the communicators it is told, for the memory
budget tests: says HELLO as rank 0 of WORLD (with AUTH when TOKEN_FILE is
not "-"), sends one COMM frame per ID:SIZE argument, in order (members:
global ranks 0..SIZE-1), prints "sent N" (N: how many went out before the
daemon closed the connection, if it did), then keeps the connection open
until killed, printing "error CODE MESSAGE" for an ERROR frame and "closed"
when the daemon closes it. Each run is a new process: a new pid for the
daemon, as a new run of the job would be.

  comm_reports.py PORT TOKEN_FILE JOB WORLD [ID:SIZE ...]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import COMM, comm_body, frame, open_agent, print_errors, read_token, s  # noqa: E402


def main():
    port, token_file, job, world = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    token = read_token(token_file)
    sock = open_agent(port, token, job, 0, world)
    sock.settimeout(None)
    sent = 0
    try:
        for arg in sys.argv[5:]:
            cid, size = arg.rsplit(":", 1)
            size = int(size)
            sock.sendall(frame(COMM, s(cid) + s("report") + comm_body(size)))
            sent += 1
    except OSError:
        pass
    print("sent %d" % sent, flush=True)
    print_errors(sock)
    print("closed", flush=True)


if __name__ == "__main__":
    main()
