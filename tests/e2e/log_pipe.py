#!/usr/bin/env python3
"""The reader of a daemon's stderr that stops reading, as a stalled journald
or a paused `flightrecd 2>&1 | less` does, for the stop-deadline test.

  log_pipe.py FIFO OUT STALL
      opens FIFO (the daemon's stderr) for reading, shrinks the pipe to one
      page, copies what arrives into OUT, and once the file STALL exists
      stops reading (the pipe stays open, so the daemon's next writes block
      once it is full) until killed.
"""

import fcntl
import os
import select
import sys

F_SETPIPE_SZ = 1031


def main():
    fifo, out, stall = sys.argv[1:4]
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    fcntl.fcntl(fd, F_SETPIPE_SZ, 4096)
    with open(out, "ab", buffering=0) as f:
        while not os.path.exists(stall):
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                data = os.read(fd, 65536)
                if data:
                    f.write(data)
                else:
                    select.select([], [], [], 0.1)  # the daemon is gone
        f.write(b"log_pipe: stopped reading\n")
    select.select([], [], [])


if __name__ == "__main__":
    main()
