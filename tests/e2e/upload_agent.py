#!/usr/bin/env python3
"""Ranks that upload big dumps at once, for the memory budget test.

  upload_agent.py PORT TOKEN_FILE JOB WORLD BYTES

Connects ranks 0..WORLD-1 of JOB (AUTH first when TOKEN_FILE is not "-"),
each with a COMM for world and one all_reduce in flight, so that the
daemon's --timeout opens an incident and asks each for its dump. Then every
rank uploads a dump of BYTES bytes in 256 KiB pieces, the ranks taking
turns piece by piece, so that all the uploads are in the daemon's memory
at once. Prints "requested INCIDENT" when asked, "uploaded" when done, and
"error CODE MESSAGE" for any ERROR frame.
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import (COMM, frame, open_agent, print_errors, progress,  # noqa: E402
                         read_frame, read_token, s)

DUMP_REQUEST, DUMP_DATA = 5, 6
PIECE = 256 << 10


def main():
    port, token_file, job = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    world, total = int(sys.argv[4]), int(sys.argv[5])
    token = read_token(token_file)
    members = b"".join(struct.pack("<I", i) for i in range(world))
    socks = []
    for rank in range(world):
        sock = open_agent(port, token, job, rank, world)
        sock.settimeout(60)
        sock.sendall(frame(COMM, s("world") + s("MPI_COMM_WORLD") +
                           struct.pack("<II", rank, world) + members) + progress(1))
        socks.append(sock)
    incident = None
    for sock in socks:
        while True:
            kind, body = read_frame(sock)
            if kind == DUMP_REQUEST:
                (n,) = struct.unpack("<H", body[:2])
                incident = body[2:2 + n].decode()
                break
    print("requested %s" % incident, flush=True)
    piece = b"{" * PIECE
    off = 0
    while off < total:
        n = min(PIECE, total - off)
        for sock in socks:
            try:
                sock.sendall(frame(DUMP_DATA, s(incident) + struct.pack("<QQI", off, total, n) +
                                   piece[:n]))
            except OSError:
                pass
        off += n
    print("uploaded", flush=True)
    for sock in socks:
        sock.settimeout(1)
        print_errors(sock)
    print("done", flush=True)


if __name__ == "__main__":
    main()
