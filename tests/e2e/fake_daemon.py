#!/usr/bin/env python3
"""A hostile stand-in for flightrecd, for the agent's end-to-end tests: it
listens where the agent connects, never reads a byte the agent sends, and
floods every connection with DUMP_REQUESTs (protocol/PROTOCOL.md).

fake_daemon.py PORT_FILE MODE

  flood       asks for dumps as fast as it can write, incidents
              (evil-<n>) and live looks at stacks (live-stacks-<n>) in turn
  challenge   first sends a CHALLENGE, as a daemon with a token does, then
              floods: it cannot prove a token it does not have
  v2          a daemon of protocol version 2 with a token: sends a
              CHALLENGE, and answers the agent's DAEMON_CHALLENGE (a
              version-3 frame) with ERROR 4, as such a daemon does

Writes the port it listens on to PORT_FILE; runs until killed.
"""
import os
import socket
import struct
import sys
import threading
import time

MAGIC = 0x43455246
DUMP_REQUEST, CHALLENGE, ERROR = 5, 8, 10


def s(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def frame(kind, payload, version=1):
    return struct.pack("<IHHII", MAGIC, version, kind, len(payload), 0) + payload


def old_daemon(conn):
    conn.sendall(frame(CHALLENGE, os.urandom(32), version=2))
    header = b""
    while len(header) < 16:
        part = conn.recv(16 - len(header))
        if not part:
            return
        header += part
    _, version, kind, _, _ = struct.unpack("<IHHII", header)
    if version > 2:
        conn.sendall(frame(ERROR, struct.pack("<H", 4) + s("protocol version %d" % version),
                           version=2))
    conn.close()


def flood(conn, mode):
    try:
        if mode == "v2":
            old_daemon(conn)
            return
        if mode == "challenge":
            conn.sendall(frame(CHALLENGE, os.urandom(32), version=2))
        n = 0
        while True:
            n += 1
            name = "evil-%d" % n if n % 2 else "live-stacks-%d" % n
            conn.sendall(frame(DUMP_REQUEST, s(name) + s("flood")))
            # About 1000 requests a second: far past any rate an agent
            # should follow, without taking a core of a shared machine.
            time.sleep(0.001)
    except OSError:
        pass


def main():
    port_file, mode = sys.argv[1], sys.argv[2]
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # A small receive buffer (inherited by every connection): what the
    # agent sends soon piles up on its own side.
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(port_file + ".tmp", port_file)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=flood, args=(conn, mode), daemon=True).start()


main()
