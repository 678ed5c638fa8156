#!/usr/bin/env python3
"""Runs a command whose stdout is a pipe nobody reads, and reports how it ended.

usage: unread-stdout.py MODE COMMAND...

stdout is a pipe, or with "-socket" appended to MODE a stream socket (socketpair). With
"-stderr" appended, the pipe nobody reads is stderr instead, stdout goes to /dev/null, and
the stderr line printed at the end is empty. MODE
"exit": time the command from the first byte it writes (its exchange is under way by
then, so start-up is not counted) to its exit. MODE "interrupt": wait until the pipe is full
(the command is blocked writing), send SIGINT, and time from the signal to the exit. Prints
one line, "STATUS SECONDS" (STATUS as Python's returncode: -N for signal N; "hung" when the
command was still running 30 s on and was killed; "silent" when it wrote nothing for 30 s),
then the command's stderr. The command is always reaped.
"""
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
import termios
import time

mode, _, kind = sys.argv[1].partition("-")
if kind == "socket":
    ours, theirs = socket.socketpair()
    read_end, write_end = ours.detach(), theirs.detach()
    full = 1 << 16  # far below any socket's buffer: once there, the writer is well under way
else:
    read_end, write_end = os.pipe()
    full = fcntl.fcntl(read_end, 1032)  # F_GETPIPE_SZ: 64 KiB by default, more with big pages
if kind == "stderr":
    child = subprocess.Popen(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=write_end)
else:
    child = subprocess.Popen(sys.argv[2:], stdout=write_end, stderr=subprocess.PIPE)
os.close(write_end)


def pending():
    return struct.unpack("i", fcntl.ioctl(read_end, termios.FIONREAD, b"\0\0\0\0"))[0]


# "exit": the first byte; "interrupt": a pipe nearly full (the writer blocks in it within the
# 0.2 s below).
wanted = 1 if mode == "exit" else full * 3 // 4
give_up = time.monotonic() + 30
while pending() < wanted and child.poll() is None and time.monotonic() < give_up:
    time.sleep(0.005)
status = None
if pending() < wanted and child.poll() is None:
    status = "silent"
if mode == "interrupt":
    time.sleep(0.2)  # into the wait for room
    child.send_signal(signal.SIGINT)
start = time.monotonic()
try:
    child.wait(timeout=30)
except subprocess.TimeoutExpired:
    child.kill()
    child.wait()
    status = status or "hung"
elapsed = time.monotonic() - start
print(status or child.returncode, "%.3f" % elapsed)
print(child.stderr.read().decode(errors="replace") if child.stderr else "")
os.close(read_end)
