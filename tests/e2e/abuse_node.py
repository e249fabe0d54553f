#!/usr/bin/env python3
"""A raw node daemon for the upstream limits tests: speaks the node
messages (protocol/PROTOCOL.md, "Node daemons") to a central daemon,
proving the token when it challenges.

  abuse_node.py PORT TOKEN_FILE oversize BYTES [auth]
      connects and sends a NODE_HELLO header announcing BYTES bytes, no
      payload (after an AUTH of the right size with "auth"); prints
      "closed SECONDS" when the daemon closes the connection (or "open"
      after 5 s), then each ERROR it sent as "error CODE MESSAGE".
  abuse_node.py PORT TOKEN_FILE node NAME BOOT_ID JOB WORLD RANK...
      NODE_HELLO as node NAME with BOOT_ID, then a FULL NODE_RANKS of JOB
      with RANKs, all connected; prints "sent", then each ERROR the daemon
      sends as "error CODE MESSAGE", each NODE_DUMP_REQUEST as
      "dump_request INCIDENT JOB" (never answered), and "closed" when it
      closes. Reads
      commands on stdin: "ranks JOB WORLD RANK..." (a FULL list),
      "retract JOB WORLD" (an empty FULL list: the job ended), "quit".
"""

import hashlib
import hmac
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import AUTH, CHALLENGE, ERROR, VERSION, frame, read_frame, s  # noqa: E402

NODE_HELLO, NODE_RANKS, NODE_DUMP_REQUEST = 13, 14, 17
VERSION.update({NODE_HELLO: 4, NODE_RANKS: 4})
RANKS_FULL = 1
START_NS = 1700000000000000000


def print_error(body):
    code, mlen = struct.unpack("<HH", body[:4])
    print("error %d %s" % (code, body[4:4 + mlen].decode(errors="replace")), flush=True)


def read_token(path):
    if path == "-":
        return None
    with open(path, "rb") as f:
        return f.read().strip()


def connect(port, token):
    """Connects; with a token, returns the daemon's CHALLENGE nonce too."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    nonce = None
    if token:
        kind, nonce = read_frame(sock)
        if kind != CHALLENGE:
            raise ConnectionError("expected a challenge, got type %d" % kind)
    return sock, nonce


def ranks_payload(job, world, ranks):
    body = s(job) + struct.pack("<IBI", world, RANKS_FULL, len(ranks))
    for r in ranks:
        body += struct.pack("<II", r, 1000 + r) + s("abuse-node") + struct.pack("<BQI", 0, START_NS, 2000)
    return body


def oversize(port, token, size, auth):
    sock, _ = connect(port, token)
    out = frame(AUTH, os.urandom(32)) if auth else b""
    start = time.monotonic()
    sock.sendall(out + frame(NODE_HELLO, b"", length=size))
    errors = []
    try:
        while True:
            kind, body = read_frame(sock)
            if kind == ERROR:
                errors.append(body)
    except socket.timeout:
        print("open", flush=True)
        return
    except (OSError, ConnectionError):
        pass
    print("closed %.2f" % (time.monotonic() - start), flush=True)
    for body in errors:
        print_error(body)


def node(port, token, name, boot_id, job, world, ranks):
    sock, nonce = connect(port, token)
    hello = s(name) + struct.pack("<QHI", boot_id, 4, 1) + s(job) + struct.pack("<II", world, len(ranks))
    out = b""
    if token:
        out += frame(AUTH, hmac.new(token, b"flightrec node\0" + nonce + hello, hashlib.sha256).digest())
    out += frame(NODE_HELLO, hello) + frame(NODE_RANKS, ranks_payload(job, world, ranks))
    sock.sendall(out)
    sock.settimeout(None)
    print("sent", flush=True)

    def drain():
        try:
            while True:
                kind, body = read_frame(sock)
                if kind == ERROR:
                    print_error(body)
                elif kind == NODE_DUMP_REQUEST:
                    ilen = struct.unpack("<H", body[:2])[0]
                    jlen = struct.unpack("<H", body[2 + ilen:4 + ilen])[0]
                    print("dump_request %s %s" % (body[2:2 + ilen].decode(errors="replace"),
                                                  body[4 + ilen:4 + ilen + jlen].decode(errors="replace")),
                          flush=True)
        except (OSError, ConnectionError):
            pass
        print("closed", flush=True)
        os._exit(0)

    threading.Thread(target=drain, daemon=True).start()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "ranks":
            sock.sendall(frame(NODE_RANKS, ranks_payload(words[1], int(words[2]),
                                                         [int(r) for r in words[3:]])))
        elif words[0] == "retract":
            sock.sendall(frame(NODE_RANKS, ranks_payload(words[1], int(words[2]), [])))
        elif words[0] == "quit":
            break
    sock.close()


def main():
    port, token, cmd = int(sys.argv[1]), read_token(sys.argv[2]), sys.argv[3]
    if cmd == "oversize":
        oversize(port, token, int(sys.argv[4]), len(sys.argv) > 5 and sys.argv[5] == "auth")
    elif cmd == "node":
        node(port, token, sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7]),
             [int(r) for r in sys.argv[8:]])
    else:
        sys.exit("unknown command " + cmd)


if __name__ == "__main__":
    main()
