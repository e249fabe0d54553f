#!/usr/bin/env python3
"""Stops one thread of another process, and only that one, until told.

    freeze_thread.py TID

Ptrace stops the thread it seizes and leaves the process's other threads
running, which no signal can do (SIGSTOP stops every thread). Prints
"frozen" once the thread is stopped; a line on stdin, or stdin closing,
lets it go. Needs CAP_SYS_PTRACE or a Yama ptrace_scope of 0.
"""
import ctypes
import os
import sys

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long


def ptrace(req, tid):
    if libc.ptrace(req, tid, None, None) != 0:
        err = ctypes.get_errno()
        sys.exit(f"freeze_thread: ptrace({req:#x}, {tid}): {os.strerror(err)}")


def main():
    tid = int(sys.argv[1])
    ptrace(PTRACE_SEIZE, tid)
    ptrace(PTRACE_INTERRUPT, tid)
    os.waitpid(tid, WALL)
    print("frozen", flush=True)
    sys.stdin.readline()
    ptrace(PTRACE_DETACH, tid)


if __name__ == "__main__":
    main()
