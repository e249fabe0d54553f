#!/usr/bin/env python3
"""A raw agent for the limits tests: speaks the wire protocol
(protocol/PROTOCOL.md), proving the token when the daemon challenges.

  abuse_agent.py PORT TOKEN_FILE hold JOB RANK WORLD
      connects, says HELLO and COMM, then reads commands on stdin:
      "progress SEQ" (one all_reduce in flight for 5 s, seq SEQ), "quit".
      Prints "connected" once the HELLO is sent; whatever the daemon sends
      (dump requests) is read and ignored.
  abuse_agent.py PORT TOKEN_FILE join JOB RANK WORLD N
      N times: connect, HELLO, wait until the daemon closes the connection
      (or 1 s passes). Prints how many were closed by the daemon.
  abuse_agent.py PORT TOKEN_FILE oversize JOB RANK WORLD N BYTES
      N times: connect, HELLO, then a PROGRESS header announcing BYTES
      bytes; wait until the daemon closes the connection.
  abuse_agent.py PORT - connect N
      N times: connect and wait until the daemon closes the connection.
"""

import array
import hashlib
import hmac
import os
import socket
import struct
import sys
import threading

MAGIC = 0x43455246
HELLO, COMM, PROGRESS, HEARTBEAT, CHALLENGE, AUTH, ERROR = 1, 2, 3, 4, 8, 9, 10
VERSION = {CHALLENGE: 2, AUTH: 2, ERROR: 2}
ALL_REDUCE = 4
START_NS = 1700000000000000000


def s(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def frame(kind, payload, length=None):
    return struct.pack("<IHHII", MAGIC, VERSION.get(kind, 1), kind,
                       len(payload) if length is None else length, 0) + payload


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise ConnectionError("closed")
        data += part
    return data


def read_frame(sock):
    """The next frame's type and payload."""
    head = recv_exact(sock, 16)
    _, _, kind, length, _ = struct.unpack("<IHHII", head)
    return kind, recv_exact(sock, length)


def print_errors(sock):
    """Prints "error CODE MESSAGE" for each ERROR frame until the
    connection closes (or its timeout passes)."""
    try:
        while True:
            kind, body = read_frame(sock)
            if kind == ERROR:
                code, mlen = struct.unpack("<HH", body[:4])
                print("error %d %s" % (code, body[4:4 + mlen].decode(errors="replace")),
                      flush=True)
    except (OSError, ConnectionError):
        pass


def comm_body(size):
    """A COMM payload's member list after its strings: my rank 0, SIZE
    members, global ranks 0..SIZE-1 (4 * SIZE bytes)."""
    members = array.array("I", range(size))
    if sys.byteorder != "little":
        members.byteswap()
    return (0).to_bytes(4, "little") + size.to_bytes(4, "little") + members.tobytes()


def read_token(path):
    """The token in file `path`, or None for "-" (no token)."""
    if path == "-":
        return None
    with open(path, "rb") as f:
        return f.read().strip()


def hello_payload(job, rank, world):
    return (s(job) + struct.pack("<III", rank, world, os.getpid()) + s("abuse-host") +
            struct.pack("<IQ", 2000, START_NS) + s("fake MPI 1.0"))


def open_agent(port, token, job, rank, world):
    """Connects and says HELLO (after AUTH when there is a token)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    hello = hello_payload(job, rank, world)
    out = b""
    if token:
        head = recv_exact(sock, 16)
        _, _, kind, length, _ = struct.unpack("<IHHII", head)
        body = recv_exact(sock, length)
        if kind != CHALLENGE:
            raise ConnectionError("expected a challenge, got type %d" % kind)
        key = hmac.new(token, b"flightrec job key\0" + job.encode(), hashlib.sha256).digest()
        proof = hmac.new(key, b"flightrec hello\0" + body + hello, hashlib.sha256).digest()
        out += frame(AUTH, proof)
    out += frame(HELLO, hello)
    sock.sendall(out)
    return sock


def closed_by_daemon(sock, wait_s=1.0):
    """Whether the daemon closes the connection within wait_s."""
    sock.settimeout(wait_s)
    try:
        while sock.recv(4096):
            pass
        return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False
    finally:
        sock.close()


def progress(seq):
    inflight = (s("world") + struct.pack("<BBBiiQQQ", ALL_REDUCE, 0, 0, -1, -1, seq, 1, 8) +
                s("double") + struct.pack("<Q", 5000))
    return frame(PROGRESS, struct.pack("<I", 1) + s("world") + struct.pack("<QQ", seq, seq - 1) +
                 struct.pack("<I", 1) + inflight)


def hold(port, token, job, rank, world):
    sock = open_agent(port, token, job, rank, world)
    members = b"".join(struct.pack("<I", i) for i in range(world))
    sock.sendall(frame(COMM, s("world") + s("MPI_COMM_WORLD") +
                       struct.pack("<II", rank, world) + members))
    sock.settimeout(None)

    def drain():
        try:
            while sock.recv(65536):
                pass
        except OSError:
            pass
        os._exit(0)

    threading.Thread(target=drain, daemon=True).start()
    print("connected", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "progress":
            sock.sendall(frame(HEARTBEAT, struct.pack("<Q", START_NS)) + progress(int(words[1])))
        elif words[0] == "quit":
            break
    sock.close()


def main():
    port = int(sys.argv[1])
    token = None
    if sys.argv[2] != "-":
        with open(sys.argv[2], "rb") as f:
            token = f.read().strip()
    cmd = sys.argv[3]
    if cmd == "hold":
        hold(port, token, sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    elif cmd in ("join", "oversize"):
        job, rank, world, n = sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
        closed = 0
        for _ in range(n):
            sock = open_agent(port, token, job, rank, world)
            if cmd == "oversize":
                sock.sendall(frame(PROGRESS, b"", length=int(sys.argv[8])))
            closed += closed_by_daemon(sock)
        print(closed)
    elif cmd == "connect":
        closed = 0
        for _ in range(int(sys.argv[4])):
            closed += closed_by_daemon(socket.create_connection(("127.0.0.1", port), timeout=5))
        print(closed)
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
