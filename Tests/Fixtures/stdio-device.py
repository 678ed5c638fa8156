#!/usr/bin/env python3
"""A minimal third-party HTTP/1.1 device on stdin/stdout (not our responder): answers every
request with 200 and a small JSON body; a request for /slow is answered after 10 s. Used by
exec: device tests."""
import sys
import time

r, w = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = r.readline()
    if not line:
        break
    while r.readline() not in (b"\r\n", b"\n", b""):
        pass
    if line.split()[1:2] == [b"/slow"]:
        time.sleep(10)
    body = b'{"device": "python on stdio"}'
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    w.flush()
