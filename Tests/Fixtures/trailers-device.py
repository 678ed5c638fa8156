#!/usr/bin/env python3
"""A third-party HTTP/1.1 device on stdin/stdout for the trailer tests, written from RFC 9112
§7.1 (the chunked transfer coding and its trailer section), not from this package's code.

It answers every request chunked (in two chunks) with the request's body, or `python device`
and a line break when there was none, then the trailer fields X-Body-Length (the request body's
length) and X-Seen-Trailers (the request's trailer fields as `name=value`, names lowercased,
joined by `; `, or `none`). A request it cannot parse strictly gets 400 naming what was wrong,
and the device exits."""
import string
import sys

r, w = sys.stdin.buffer, sys.stdout.buffer


def fail(why):
    body = why.encode("utf-8", "replace") + b"\n"
    w.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
    w.flush()
    sys.exit(1)


def line():
    data = r.readline(65536)
    if not data.endswith(b"\r\n"):
        fail("a line without CRLF: %r" % data[:80])
    return data[:-2]


def field_lines():
    fields = []
    while True:
        text = line()
        if text == b"":
            return fields
        name, colon, value = text.partition(b":")
        if not colon or not name or name.strip() != name:
            fail("a malformed field line: %r" % text[:80])
        fields.append((name.decode("ascii").lower(), value.strip().decode("latin-1")))


def chunked_body():
    body = b""
    while True:
        size_text = line().split(b";")[0]
        if not size_text or any(chr(c) not in string.hexdigits for c in size_text):
            fail("a bad chunk size: %r" % size_text[:80])
        size = int(size_text, 16)
        if size == 0:
            return body, field_lines()
        data = r.read(size)
        if len(data) != size:
            fail("the line ended inside a chunk")
        body += data
        if r.read(2) != b"\r\n":
            fail("a chunk not followed by CRLF")


while True:
    start = r.readline(65536)
    if not start:
        break
    if not start.endswith(b"\r\n") or len(start[:-2].split(b" ")) != 3:
        fail("a bad request line: %r" % start[:80])
    head = dict(field_lines())
    coding, length = head.get("transfer-encoding"), head.get("content-length")
    trailers = []
    if coding is not None:
        if coding.lower() != "chunked" or length is not None:
            fail("unexpected framing: Transfer-Encoding %r, Content-Length %r" % (coding, length))
        body, trailers = chunked_body()
    elif length is not None:
        body = r.read(int(length))
    else:
        body = b""
    seen = "; ".join("%s=%s" % field for field in trailers) or "none"
    answer = body or b"python device\n"
    half = len(answer) // 2
    w.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
        b"Trailer: X-Body-Length, X-Seen-Trailers\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    for part in (answer[:half], answer[half:]):
        if part:
            w.write(b"%x\r\n" % len(part) + part + b"\r\n")
    w.write(b"0\r\nX-Body-Length: %d\r\nX-Seen-Trailers: %s\r\n\r\n" % (len(body), seen.encode("latin-1")))
    w.flush()
