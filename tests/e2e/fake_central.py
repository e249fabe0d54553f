#!/usr/bin/env python3
"""A hostile central daemon for a node daemon's end-to-end tests
(flightrecd --upstream; protocol/PROTOCOL.md, "Node daemons").

fake_central.py PORT_FILE fetch-flood FRAMES
fake_central.py PORT_FILE request-again JOB N
fake_central.py PORT_FILE look JOB N VERSION...

Listens on an ephemeral port of 127.0.0.1 (written to PORT_FILE once
bound) and runs without a token: the node daemon's NODE_HELLO is the whole
handshake. On the first node daemon's connection, after its NODE_HELLO,
it never reads again and sends FRAMES NODE_FETCH frames for an incident
the node never made, as fast as the node takes them. Each asks the node
for an answer (a failure) far larger than the request. Prints "hello"
once the NODE_HELLO came, then "sent N" when all went, or "blocked N"
when the node took nothing more for 3 s; then holds the connection open
until killed.

request-again reads everything the node sends. Once the node lists ranks
of JOB (NODE_RANKS), it asks for incident "first" of JOB (NODE_DUMP_REQUEST), then N times for another incident of
the same job while the node still answers the first ("again-1" ...), then
NODE_FETCH of an incident the node never made ("marker"): the node answers
in order, so once the marker's failure comes every answer to the requests
before it has come too. Prints "again K" then, K the frames (NODE_SUMMARY
or NODE_DUMP_DONE) that answered the again-* requests.

look waits until the node has listed N ranks of JOB (NODE_RANKS); then,
for each VERSION, says it in a WELCOME and asks the node for JOB's stacks
(NODE_LOOK_REQUEST, look K for the K-th), and prints "look K VERSION
flags F" for each NODE_LOOK_STACKS frame of the answer (F in hex), up to
the one with LAST.
"""
import os
import select
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from abuse_agent import recv_exact, s  # noqa: E402
from port_file import listen_and_publish  # noqa: E402

MAGIC = 0x43455246
NODE_HELLO, NODE_RANKS, NODE_DUMP_REQUEST, NODE_SUMMARY, NODE_DUMP_DONE, NODE_FETCH = 13, 14, 17, 18, 19, 20
WELCOME, NODE_LOOK_REQUEST, NODE_LOOK_STACKS = 22, 24, 25


def frame(kind, payload, version=4):
    return struct.pack("<IHHII", MAGIC, version, kind, len(payload), 0) + payload


def read_until(sock, want):
    while True:
        _, _, kind, length, _ = struct.unpack("<IHHII", recv_exact(sock, 16))
        recv_exact(sock, length)
        if kind == want:
            return


def say(text):
    print(text, flush=True)


def fetch_flood(conn, frames):
    one = frame(NODE_FETCH, s("no-such-incident") + s("no-such-job") + struct.pack("<I", 7))
    batch = one * 4096
    data = memoryview(batch * (frames // 4096) + one * (frames % 4096))
    conn.setblocking(False)
    sent, stalled = 0, None
    while sent < len(data):
        _, writable, _ = select.select([], [conn], [], 0.2)
        if not writable:
            stalled = stalled or time.monotonic()
            if time.monotonic() - stalled > 3:
                say("blocked %d" % (sent // len(one)))
                return
            continue
        stalled = None
        try:
            sent += conn.send(data[sent:sent + (1 << 20)])
        except BlockingIOError:
            pass
    say("sent %d" % frames)


def request_again(conn, job, n):
    def request(incident):
        conn.sendall(frame(NODE_DUMP_REQUEST, s(incident) + s(job) + s("central") + s("") +
                           struct.pack("<BQ", 0, 0)))

    while True:
        _, _, kind, length, _ = struct.unpack("<IHHII", recv_exact(conn, 16))
        payload = recv_exact(conn, length)
        n_id = struct.unpack_from("<H", payload)[0] if kind == NODE_RANKS else 0
        if kind == NODE_RANKS and payload[2:2 + n_id].decode() == job:
            break
    request("first")
    for k in range(1, n + 1):
        request("again-%d" % k)
    conn.sendall(frame(NODE_FETCH, s("marker") + s(job) + struct.pack("<I", 0)))
    again = 0
    while True:
        _, _, kind, length, _ = struct.unpack("<IHHII", recv_exact(conn, 16))
        payload = recv_exact(conn, length)
        if kind not in (NODE_SUMMARY, NODE_DUMP_DONE):
            continue
        n_id = struct.unpack_from("<H", payload)[0]
        incident = payload[2:2 + n_id].decode()
        if incident.startswith("again-"):
            again += 1
        elif incident == "marker":
            say("again %d" % again)
            return


def look(conn, job, n, versions):
    held = 0
    while held < n:
        _, _, kind, length, _ = struct.unpack("<IHHII", recv_exact(conn, 16))
        payload = recv_exact(conn, length)
        n_id = struct.unpack_from("<H", payload)[0] if kind == NODE_RANKS else 0
        if kind == NODE_RANKS and payload[2:2 + n_id].decode() == job:
            held += struct.unpack_from("<I", payload, 2 + n_id + 4 + 1)[0]
    for k, version in enumerate(versions, 1):
        conn.sendall(frame(WELCOME, struct.pack("<H", version), 5) +
                     frame(NODE_LOOK_REQUEST, struct.pack("<Q", k) + s(job) +
                           struct.pack("<BII", 0, 0xffffffff, 0), 5))
        while True:
            _, _, kind, length, _ = struct.unpack("<IHHII", recv_exact(conn, 16))
            payload = recv_exact(conn, length)
            if kind != NODE_LOOK_STACKS:
                continue
            n_id = struct.unpack_from("<H", payload, 8)[0]
            flags = payload[8 + 2 + n_id]
            say("look %d %d flags %x" % (k, version, flags))
            if flags & 1:
                break


def main():
    port_file, mode = sys.argv[1], sys.argv[2]
    srv = listen_and_publish(port_file, 4)
    conn, _ = srv.accept()
    read_until(conn, NODE_HELLO)
    say("hello")
    if mode == "fetch-flood":
        fetch_flood(conn, int(sys.argv[3]))
    elif mode == "request-again":
        request_again(conn, sys.argv[3], int(sys.argv[4]))
    elif mode == "look":
        look(conn, sys.argv[3], int(sys.argv[4]), [int(v) for v in sys.argv[5:]])
    else:
        sys.exit("unknown mode " + mode)
    while True:
        time.sleep(1)


main()
