#!/usr/bin/env python3
"""One rank of a huge job that reports many big communicators, for the
memory and lock tests: says HELLO as rank 0 of WORLD (with AUTH when
TOKEN_FILE is not "-"), sends K COMM frames "c0".."c<K-1>" of SIZE members
each (global ranks 0..SIZE-1, about 4 * SIZE bytes each), prints
"sent N" (N: how many COMM frames went out before the daemon closed the
connection, if it did), then keeps the connection open until killed,
printing "error CODE MESSAGE" for an ERROR frame and "closed" when the
daemon closes it.

  comm_flood.py PORT TOKEN_FILE JOB WORLD K SIZE
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from abuse_agent import COMM, comm_body, frame, open_agent, print_errors, read_token, s  # noqa: E402


def main():
    port, token_file, job = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    world, k, size = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
    token = read_token(token_file)
    sock = open_agent(port, token, job, 0, world)
    sock.settimeout(None)
    body = comm_body(size)
    sent = 0
    try:
        for i in range(k):
            sock.sendall(frame(COMM, s("c%d" % i) + s("flood") + body))
            sent += 1
    except OSError:
        pass
    print("sent %d" % sent, flush=True)
    print_errors(sock)
    print("closed", flush=True)


if __name__ == "__main__":
    main()
