#!/usr/bin/env python3
"""Stand-in agents of a job in which one rank crashes and the launcher kills
the others before they can dump (protocol/PROTOCOL.md, CRASH).

crash_agents.py PORT JOB WORLD RANK [SECONDS]

Connects ranks 0..WORLD-1 of JOB (HELLO, no token, then VERSION 6), and
waits until the daemon has answered each with WELCOME (every rank known,
as in a job that ran a while); rank RANK then sends CRASH (SIGSEGV at
0xdead in load_shard). Once the daemon asks any rank for its dump (the
incident it opened for the crash), every connection closes without BYE, as
mpirun's teardown does; prints "asked ID", then "killed", and exits. Each
run is a new set of processes (pids of its own), so that a second run for
the same JOB is the job restarted. Gives up after SECONDS (10) without a
request: prints "never asked" and exits 1.
"""
import os
import select
import socket
import struct
import sys
import time

MAGIC = 0x43455246
HELLO, DUMP_REQUEST, VERSION, WELCOME, CRASH = 1, 5, 21, 22, 26
HEADER = 16


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


class Conn:
    """A rank's connection and the bytes of its next frame."""

    def __init__(self, sock):
        self.sock, self.buf, self.closed = sock, b"", False

    def fileno(self):
        return self.sock.fileno()

    def frames(self):
        """Reads what is there; returns the whole frames (type, payload)."""
        data = self.sock.recv(65536)
        if not data:
            self.closed = True
        self.buf += data
        out = []
        while len(self.buf) >= HEADER:
            kind, length = struct.unpack_from("<HI", self.buf, 6)
            if len(self.buf) < HEADER + length:
                break
            out.append((kind, self.buf[HEADER:HEADER + length]))
            self.buf = self.buf[HEADER + length:]
        return out


def until(conns, deadline, want):
    """Reads frames from the open connections until want(conn, kind,
    payload) returns something, or the deadline; returns it (None when
    none)."""
    while time.monotonic() < deadline:
        live = [c for c in conns if not c.closed]
        if not live:
            return None
        ready, _, _ = select.select(live, [], [], max(0, min(0.2, deadline - time.monotonic())))
        for c in ready:
            for kind, payload in c.frames():
                got = want(c, kind, payload)
                if got is not None:
                    return got
    return None


def main():
    port, job, world, culprit = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limit = float(sys.argv[5]) if len(sys.argv) > 5 else 10
    conns = []
    for r in range(world):
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.sendall(hello(job, r, world) + frame(VERSION, struct.pack("<H", 6), version=5))
        conns.append(Conn(c))
    welcomed = set()

    def welcome(c, kind, _payload):
        if kind == WELCOME:
            welcomed.add(c)
        return True if len(welcomed) == world else None

    if until(conns, time.monotonic() + 10, welcome) is None:
        print("not welcomed: %d of %d" % (len(welcomed), world), flush=True)
        sys.exit(1)
    conns[culprit].sock.sendall(crash())

    def asked(_c, kind, payload):
        if kind == DUMP_REQUEST and len(payload) >= 2:
            n = struct.unpack_from("<H", payload)[0]
            return payload[2:2 + n].decode()
        return None

    incident = until(conns, time.monotonic() + limit, asked)
    if incident is None:
        print("never asked", flush=True)
        sys.exit(1)
    print("asked " + incident, flush=True)
    for c in conns:
        c.sock.close()
    print("killed", flush=True)


if __name__ == "__main__":
    main()
