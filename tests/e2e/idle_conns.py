#!/usr/bin/env python3
"""Idle TCP connections to the daemon's agent port, for the descriptor and
HELLO-deadline tests. None of them ever sends a byte.

  idle_conns.py count PORT N WAIT [SOURCE]
      opens N connections (from SOURCE, an address of this host, if given)
      and waits up to WAIT seconds; prints "closed K after S" where K is how
      many the daemon closed and S the seconds until the last of those.
  idle_conns.py flood PORT N [SOURCE...]
      keeps N connections open, opening a new one for each the daemon
      closes, until killed; prints "flooding" once N were opened. With
      SOURCEs, the connections come from each in turn (as many addresses
      of 127.0.0.0/8 as a local user likes).
"""

import select
import socket
import sys
import time


def connect(port, source=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source:
        s.bind((source, 0))
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    return s


def closed_by_peer(s):
    try:
        return s.recv(4096) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def count(port, n, wait, source):
    socks = [connect(port, source) for _ in range(n)]
    start = time.monotonic()
    closed = 0
    last = 0.0
    live = set(socks)
    while live and time.monotonic() - start < wait:
        r, _, _ = select.select(list(live), [], [], 0.1)
        for s in r:
            if closed_by_peer(s):
                live.discard(s)
                closed += 1
                last = time.monotonic() - start
    print("closed %d after %.1f" % (closed, last), flush=True)


def flood(port, n, sources):
    sources = sources or [None]
    live = {}
    for i in range(n):
        src = sources[i % len(sources)]
        live[connect(port, src)] = src
    print("flooding", flush=True)
    while True:
        r, _, _ = select.select(list(live), [], [], 0.5)
        for s in r:
            if closed_by_peer(s):
                src = live.pop(s)
                s.close()
                live[connect(port, src)] = src


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "count":
        count(port, int(sys.argv[3]), float(sys.argv[4]),
              sys.argv[5] if len(sys.argv) > 5 else None)
    elif mode == "flood":
        flood(port, int(sys.argv[3]), sys.argv[4:])
    else:
        sys.exit("usage: idle_conns.py count|flood PORT N ...")


if __name__ == "__main__":
    main()
