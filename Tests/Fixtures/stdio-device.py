#!/usr/bin/env python3
"""A minimal third-party HTTP/1.1 device on stdin/stdout (not our responder): answers every
request with 200 and a small JSON body. Used by exec: device tests."""
import sys

r, w = sys.stdin.buffer, sys.stdout.buffer
while r.readline():
    while r.readline() not in (b"\r\n", b"\n", b""):
        pass
    body = b'{"device": "python on stdio"}'
    w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    w.flush()
