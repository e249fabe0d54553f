#!/usr/bin/env python3
"""A TCP proxy between flightrec agents and the daemon, for fault tests.

Usage: tcp_proxy.py PORT_FILE TARGET_PORT CONTROL_DIR [HALF_CUT_TYPE]

Listens on an ephemeral port of 127.0.0.1 (written to PORT_FILE once
bound) and forwards every connection to 127.0.0.1:TARGET_PORT, one thread
per direction. It reads the agent's frames on their way up to learn which
rank a connection carries (from its HELLO), and prints one line per event:
"hello RANK CONN" when a connection says HELLO, "cut RANK CONN" when it is
cut. Creating CONTROL_DIR/cut-RANK cuts that rank's live connections (both
sockets closed at once, as a network failure would) and removes the file.

With HALF_CUT_TYPE (a message type), the first connection's first frame
of that type on its way up is not forwarded: the client's side is closed
there and the daemon's side kept open, as a path that fails silently
leaves it ("half-cut CONN"). A node daemon's link to its central daemon
broken mid-incident so (HALF_CUT_TYPE 18, its first NODE_SUMMARY)
reconnects before the central daemon sees the old connection go.
"""
import os, socket, struct, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from port_file import listen_and_publish  # noqa: E402

port_file, target, control = sys.argv[1], int(sys.argv[2]), sys.argv[3]
half_cut_type = int(sys.argv[4]) if len(sys.argv) > 4 else None
held = []  # the daemon's side of a half-cut connection, kept open
lock = threading.Lock()
conns = {}  # id -> [rank or None, client socket, upstream socket]
next_id = 0


def say(line):
    with lock:
        print(line, flush=True)


def close_pair(cid):
    with lock:
        entry = conns.pop(cid, None)
    if entry:
        for s in entry[1:]:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
    return entry


def upward(cid, src, dst):
    """Agent to daemon: forwards, and finds the rank in the HELLO."""
    buf = b''
    found = False
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
            if found:
                continue
            buf += data
            while len(buf) >= 16:
                _, _, type_, length, _ = struct.unpack('<IHHII', buf[:16])
                if len(buf) < 16 + length:
                    break
                payload, buf = buf[16:16 + length], buf[16 + length:]
                if type_ == 1:
                    jlen, = struct.unpack('<H', payload[:2])
                    rank, = struct.unpack('<I', payload[2 + jlen:6 + jlen])
                    with lock:
                        if cid in conns:
                            conns[cid][0] = rank
                    say('hello %d %d' % (rank, cid))
                    found = True
                    break
    except OSError:
        pass
    close_pair(cid)


def upward_half_cut(cid, src, dst):
    """Forwards frame by frame until the first of half_cut_type."""
    buf = b''
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            buf += data
            out = b''
            while len(buf) >= 16:
                _, _, type_, length, _ = struct.unpack('<IHHII', buf[:16])
                if len(buf) < 16 + length:
                    break
                if type_ == half_cut_type:
                    dst.sendall(out)
                    with lock:
                        conns.pop(cid, None)
                        held.append(dst)
                    src.shutdown(socket.SHUT_RDWR)
                    src.close()
                    say('half-cut %d' % cid)
                    return
                out, buf = out + buf[:16 + length], buf[16 + length:]
            dst.sendall(out)
    except OSError:
        pass
    close_pair(cid)


def downward(cid, src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    close_pair(cid)


def controller():
    while True:
        for name in os.listdir(control):
            if not name.startswith('cut-'):
                continue
            rank = int(name[4:])
            with lock:
                victims = [cid for cid, e in conns.items() if e[0] == rank]
            for cid in victims:
                if close_pair(cid):
                    say('cut %d %d' % (rank, cid))
            os.unlink(os.path.join(control, name))
        time.sleep(0.05)


listener = listen_and_publish(port_file, 128)
threading.Thread(target=controller, daemon=True).start()
while True:
    client, _ = listener.accept()
    try:
        up = socket.create_connection(('127.0.0.1', target))
    except OSError:
        client.close()
        continue
    with lock:
        cid = next_id
        next_id += 1
        conns[cid] = [None, client, up]
    half_cut = half_cut_type is not None and cid == 0
    threading.Thread(target=upward_half_cut if half_cut else upward, args=(cid, client, up),
                     daemon=True).start()
    threading.Thread(target=downward, args=(cid, up, client), daemon=True).start()
