"""The listening end of the end-to-end tests' stand-ins (fake_central.py,
fake_daemon.py, tcp_proxy.py): a socket on an ephemeral port of
127.0.0.1, its number written to a file for the test to read.
"""
import os
import socket


def listen_and_publish(port_file, backlog, rcvbuf=None):
    """Listens on an ephemeral port of 127.0.0.1 and writes its number to
    port_file, whole at once (written aside, then renamed), so that a test
    that waits for the file to be non-empty reads a complete number.
    rcvbuf, when given, is the receive buffer every accepted connection
    inherits. Returns the listening socket."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if rcvbuf is not None:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    srv.bind(("127.0.0.1", 0))
    srv.listen(backlog)
    with open(port_file + ".tmp", "w") as f:
        f.write("%d\n" % srv.getsockname()[1])
    os.rename(port_file + ".tmp", port_file)
    return srv
