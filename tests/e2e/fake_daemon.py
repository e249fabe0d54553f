#!/usr/bin/env python3
"""A hostile (or merely slow) stand-in for flightrecd, for the agent's
end-to-end tests (protocol/PROTOCOL.md).

fake_daemon.py PORT_FILE MODE

  flood       never reads a byte the agent sends, and asks for dumps as
              fast as it can write, incidents (evil-<n>) and live looks at
              stacks (live-stacks-<n>) in turn
  once        never reads; 2 s after connecting (once the application has
              filled its ring) asks for one incident (once-1), then nothing:
              the agent holds what one unsent dump costs, no more
  answers     reads everything: asks for incidents first, second, third
              and live looks live-stacks-1, -2, -3 faster than the agent
              makes dumps, and prints "upload INCIDENT TOTAL" for each
              upload that begins (TOTAL 0: an empty answer)
  challenge   first sends a CHALLENGE, as a daemon with a token does, then
              floods: it cannot prove a token it does not have
  v2          a daemon of protocol version 2 with a token: sends a
              CHALLENGE, and answers the agent's DAEMON_CHALLENGE (a
              version-3 frame) with ERROR 4 "Protocol not supported", as
              such a daemon does
  busy        a daemon of version 3 that challenges, then refuses the HELLO
              with ERROR 4 (too many ranks of the job connected)
  reflect     challenges, then sends the agent's own AUTH proof back as its
              DAEMON_PROOF, then floods: a proof reflected proves nothing
  silent      challenges, reads, and never sends a proof (a daemon too busy
              to answer, or a peer waiting to see what the agent does)
  rechallenge challenges, and after the agent's HELLO challenges again
              instead of proving, then stays silent
  v4          no token; reads, and closes the connection at the first
              frame of version 5 (an agent's VERSION), as a daemon of
              protocol 4 does; prints "frame N TYPE MEMBERS" for each
              COMM (MEMBERS: how many it lists) and "frame N TYPE" for
              every other frame, N the connection
  v5          no token; answers VERSION with WELCOME 5, and prints frames
              as v4 does ("frame N comm_runs RUNS", RUNS the count of runs)
  drop5       v5, but each rank's first connection is closed at its
              VERSION (printed "frame N version: dropped"), as a daemon
              restarting just then would drop it

Prints "connection N SECONDS" for each connection accepted, SECONDS since
the first. Writes the port it
listens on to PORT_FILE; runs until killed.
"""
import os
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import recv_exact  # noqa: E402
from port_file import listen_and_publish  # noqa: E402

MAGIC = 0x43455246
DUMP_REQUEST, DUMP_DATA, CHALLENGE, AUTH, ERROR, DAEMON_PROOF = 5, 6, 8, 9, 10, 12
HELLO = 1


def s(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def frame(kind, payload, version=1):
    return struct.pack("<IHHII", MAGIC, version, kind, len(payload), 0) + payload


SAY_LOCK = threading.Lock()


def say(text):
    # One connection's thread each: print() writes the text and its newline
    # apart, so two threads' lines could run together.
    with SAY_LOCK:
        print(text, flush=True)


def read_frame(conn):
    _, version, kind, length, _ = struct.unpack("<IHHII", recv_exact(conn, 16))
    return version, kind, recv_exact(conn, length)


def read_until(conn, want):
    """Reads frames up to the first of type `want`; returns its payload."""
    while True:
        _, kind, payload = read_frame(conn)
        if kind == want:
            return payload


def challenge(conn):
    conn.sendall(frame(CHALLENGE, os.urandom(32), version=2))


def old_daemon(conn):
    challenge(conn)
    version, _, _ = read_frame(conn)
    if version > 2:
        conn.sendall(frame(ERROR, struct.pack("<H", 4) + s("Protocol not supported"),
                           version=2))
    conn.close()


def flood_requests(conn):
    n = 0
    while True:
        n += 1
        name = "evil-%d" % n if n % 2 else "live-stacks-%d" % n
        conn.sendall(frame(DUMP_REQUEST, s(name) + s("flood")))
        # About 1000 requests a second: far past any rate an agent
        # should follow, without taking a core of a shared machine.
        time.sleep(0.001)


def request(conn, name):
    conn.sendall(frame(DUMP_REQUEST, s(name) + s("answers")))


def answers(conn):
    """Requests faster than the agent's intervals; prints every answer."""
    def reader():
        try:
            while True:
                _, kind, payload = read_frame(conn)
                if kind != DUMP_DATA:
                    continue
                n = struct.unpack_from("<H", payload)[0]
                name = payload[2:2 + n].decode()
                offset, total = struct.unpack_from("<QQ", payload, 2 + n)
                if offset == 0:
                    say("upload %s %d" % (name, total))
        except OSError:
            pass

    threading.Thread(target=reader, daemon=True).start()
    # Incidents: first is made at once, second waits its interval, third
    # comes while second still waits. Live looks likewise, 0.5 s apart.
    for name in ("first", "live-stacks-1", "live-stacks-2", "second", "live-stacks-3",
                 "third"):
        request(conn, name)
        time.sleep(0.05)
    while True:
        time.sleep(1)


VERSION, WELCOME, COMM_RUNS = 21, 22, 23
NAMES = {1: "hello", 2: "comm", 3: "progress", 4: "heartbeat", 7: "bye", VERSION: "version",
         COMM_RUNS: "comm_runs"}


DROPPED = set()
DROPPED_LOCK = threading.Lock()


def protocol(conn, n, mode):
    """Reads frames as a daemon of protocol 4 or 5 without a token."""
    rank = None
    while True:
        version, kind, payload = read_frame(conn)
        name = NAMES.get(kind, str(kind))
        if kind == HELLO:
            rank = struct.unpack_from("<I", payload, 2 + struct.unpack_from("<H", payload)[0])[0]
        if version >= 5 and mode == "v4":
            say("frame %d %s: closing, as protocol 4 does" % (n, name))
            conn.close()
            return
        if kind == VERSION and mode == "drop5":
            with DROPPED_LOCK:
                first = rank not in DROPPED
                DROPPED.add(rank)
            if first:
                say("frame %d version: dropped" % n)
                conn.close()
                return
        if kind in (2, COMM_RUNS):
            at = 0
            for _ in range(2):
                at += 2 + struct.unpack_from("<H", payload, at)[0]
            rank, size = struct.unpack_from("<II", payload, at)
            count = size if kind == 2 else struct.unpack_from("<I", payload, at + 8)[0]
            say("frame %d %s %d" % (n, name, count))
        else:
            say("frame %d %s" % (n, name))
        if kind == VERSION:
            conn.sendall(frame(WELCOME, struct.pack("<H", 5), version=5))


def serve(conn, mode, n=0):
    try:
        if mode in ("v4", "v5", "drop5"):
            protocol(conn, n, mode)
        elif mode == "v2":
            old_daemon(conn)
        elif mode == "busy":
            challenge(conn)
            read_until(conn, HELLO)
            conn.sendall(frame(ERROR, struct.pack("<H", 4) + s(
                "too many ranks of this job are connected (--max-job-connections)"),
                version=2))
            conn.close()
        elif mode == "reflect":
            challenge(conn)
            proof = read_until(conn, AUTH)
            read_until(conn, HELLO)
            conn.sendall(frame(DAEMON_PROOF, proof, version=3))
            flood_requests(conn)
        elif mode in ("silent", "rechallenge"):
            challenge(conn)
            read_until(conn, HELLO)
            if mode == "rechallenge":
                challenge(conn)
            while True:
                read_frame(conn)
        elif mode == "answers":
            answers(conn)
        elif mode == "once":
            time.sleep(2)
            request(conn, "once-1")
            while True:
                time.sleep(1)
        else:
            if mode == "challenge":
                challenge(conn)
            flood_requests(conn)
    except OSError:
        pass


def main():
    port_file, mode = sys.argv[1], sys.argv[2]
    # A small receive buffer (inherited by every connection): what the
    # agent sends soon piles up on its own side.
    srv = listen_and_publish(port_file, 16, rcvbuf=4096)
    n, first = 0, None
    while True:
        conn, _ = srv.accept()
        n += 1
        first = first or time.monotonic()
        say("connection %d %.1f" % (n, time.monotonic() - first))
        threading.Thread(target=serve, args=(conn, mode, n), daemon=True).start()


main()
