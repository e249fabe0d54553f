#!/usr/bin/env python3
"""Stand-in agents of a job in which one rank crashes and the launcher kills
the others before they can dump (protocol/PROTOCOL.md, CRASH).

crash_agents.py PORT JOB WORLD RANK

Connects ranks 0..WORLD-1 of JOB (HELLO, no token); rank RANK sends CRASH
(SIGSEGV at 0xdead in load_shard). Once the daemon asks any rank for its
dump (the incident it opened for the crash), every connection closes
without BYE, as mpirun's teardown does; prints "asked ID", then "killed",
and exits. Gives up after 10 s.
"""
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x43455246
HELLO, DUMP_REQUEST, CRASH = 1, 5, 26


def s(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def frame(kind, payload, version=1):
    return struct.pack("<IHHII", MAGIC, version, kind, len(payload), 0) + payload


def hello(job, rank, world):
    return frame(HELLO, s(job) + struct.pack("<III", rank, world, os.getpid() * 10 + rank) +
                 s("stand-in") + struct.pack("<IQ", 2000, 1700000000000000000) +
                 s("stand-in MPI 1.0"))


def crash():
    now = time.time_ns()
    frames = [(0x401136, 3, "load_shard"), (0x4011a0, 64, "train_step"),
              (0x401200, 16, "main")]
    body = struct.pack("<IiQQQIH", 11, 1, 0xDEAD, now, 42, 4242, len(frames))
    for ip, off, name in frames:
        body += struct.pack("<QQ", ip, off) + s(name)
    return frame(CRASH, body, version=6)


def main():
    port, job, world, culprit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    conns = []
    for r in range(world):
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(hello(job, r, world))
        conns.append(c)
    # Every rank known before one crashes, as in a job that ran a while.
    time.sleep(0.3)
    conns[culprit].sendall(crash())
    deadline = time.monotonic() + 10
    asked = None
    while asked is None and time.monotonic() < deadline:
        ready, _, _ = select.select(conns, [], [], 0.2)
        for c in ready:
            data = c.recv(65536)
            if len(data) >= 16 and struct.unpack_from("<H", data, 6)[0] == DUMP_REQUEST:
                n = struct.unpack_from("<H", data, 16)[0]
                asked = data[18:18 + n].decode()
    if asked is None:
        print("never asked", flush=True)
        sys.exit(1)
    print("asked " + asked, flush=True)
    for c in conns:
        c.close()
    print("killed", flush=True)


if __name__ == "__main__":
    main()
