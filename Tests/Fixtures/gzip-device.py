#!/usr/bin/env python3
"""A third-party HTTP/1.1 device on stdin/stdout that answers every request with a gzip body
(Content-Encoding: gzip) and says in X-Seen-Accept-Encoding what the request asked for.
Used by the URLSession decompression tests."""
import gzip
import sys

TEXT = b"hello, compressed world\n" * 20
BODY = gzip.compress(TEXT, mtime=0)

r, w = sys.stdin.buffer, sys.stdout.buffer
while True:
    line = r.readline()
    if not line:
        break
    accept = b"-"
    while True:
        header = r.readline()
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"accept-encoding":
            accept = value.strip()
    w.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Encoding: gzip\r\n"
        b"X-Seen-Accept-Encoding: " + accept + b"\r\nContent-Length: %d\r\n\r\n" % len(BODY) + BODY
    )
    w.flush()
