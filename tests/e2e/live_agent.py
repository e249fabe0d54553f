#!/usr/bin/env python3
"""A stand-in agent for the live looks' end-to-end tests, speaking the wire
protocol (protocol/PROTOCOL.md) without a token.

live_agent.py PORT JOB RANK WORLD MODE [ARG]

  flood N TOTAL  N connections, ranks RANK..RANK+N-1 of JOB, each uploading
                 one piece of a live look nobody asked for, announcing TOTAL
                 bytes, then holding the connection open
  big FRAMES     answers every live look with a dump of one thread of
                 FRAMES frames (a few MB for a few hundred thousand)
  stall TOTAL    answers every live look with the first piece of a dump
                 announced as TOTAL bytes, then sends nothing more
  liar           answers every live look with a dump that says it is
                 another rank's
  whole          answers every live look with tests/data's whole dump, as
                 an agent that predates scoped looks does
  silent         never answers

Prints "ready" once every connection said HELLO, "asked ID" for each
DUMP_REQUEST; runs until killed.
"""
import json
import os
import socket
import struct
import sys
import time

MAGIC = 0x43455246
HELLO, DUMP_REQUEST, DUMP_DATA = 1, 5, 6
CHUNK = 256 << 10  # FR_WIRE_DUMP_CHUNK


def s(text):
    b = text.encode()
    return struct.pack("<H", len(b)) + b


def frame(kind, payload):
    return struct.pack("<IHHII", MAGIC, 1, kind, len(payload), 0) + payload


def hello(sock, job, rank, world):
    sock.sendall(frame(HELLO, s(job) + struct.pack("<III", rank, world, os.getpid()) +
                       s("stand-in") + struct.pack("<IQ", 2000, 1700000000000000000) +
                       s("stand-in MPI 1.0")))


def exact(sock, n):
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            sys.exit(0)
        data += part
    return data


def data_dump():
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "data", "dumps", "good-rank-0.json")) as f:
        return json.load(f)


def dump(job, rank, world, incident, nframes):
    # A valid dump of tests/data, made this rank's and scoped to stacks.
    doc = data_dump()
    doc.update(job=job, rank=rank, world_size=world, incident=incident, host="dump-host",
               pid=1, entries=[], pg_config={}, pg_status={})
    frames = [{"name": "f%d" % i, "offset": i, "ip": "0x1"} for i in range(nframes)]
    doc["threads"] = [{"tid": 7, "name": "main", "current": False, "frames": frames}]
    return json.dumps(doc, separators=(",", ":")).encode()


def upload(sock, incident, data, total=None, pieces=None):
    total = len(data) if total is None else total
    off, n = 0, 0
    while off < len(data) and (pieces is None or n < pieces):
        piece = data[off:off + CHUNK]
        sock.sendall(frame(DUMP_DATA, s(incident) + struct.pack("<QQI", off, total, len(piece)) +
                           piece))
        off += len(piece)
        n += 1


def main():
    port, job, rank, world, mode = (int(sys.argv[1]), sys.argv[2], int(sys.argv[3]),
                                    int(sys.argv[4]), sys.argv[5])
    args = sys.argv[6:]
    if mode == "flood":
        n, total = int(args[0]), int(args[1])
        socks = []
        for i in range(n):
            sock = socket.create_connection(("127.0.0.1", port))
            hello(sock, job, rank + i, world)
            # A live id the daemon never sent, and one it might.
            incident = "live-stacks-%d" % (i + 1 if i % 2 else 900000 + i)
            sock.sendall(frame(DUMP_DATA, s(incident) + struct.pack("<QQI", 0, total, 1) + b"{"))
            socks.append(sock)
        print("ready", flush=True)
        while True:
            time.sleep(60)
    sock = socket.create_connection(("127.0.0.1", port))
    hello(sock, job, rank, world)
    print("ready", flush=True)
    big = dump(job, rank, world, "x", int(args[0])) if mode == "big" else None
    while True:
        _, _, kind, length, _ = struct.unpack("<IHHII", exact(sock, 16))
        body = exact(sock, length)
        if kind != DUMP_REQUEST:
            continue
        incident = body[2:2 + struct.unpack("<H", body[:2])[0]].decode()
        print("asked", incident, flush=True)
        if mode == "big":
            # The same bytes for every look; only the id in them differs,
            # and the daemon takes the id from the frames.
            upload(sock, incident, big)
        elif mode == "stall":
            upload(sock, incident, b"{" * 65536, total=int(args[0]), pieces=1)
        elif mode == "liar":
            upload(sock, incident, dump(job, rank + 1, world, incident, 3))
        elif mode == "whole":
            doc = data_dump()
            doc.update(job=job, incident=incident)
            upload(sock, incident, json.dumps(doc).encode())


main()
