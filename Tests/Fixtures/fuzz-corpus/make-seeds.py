#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (scripts/fuzz copies them into its work directory).
Run again after changing it; the files are committed. Each target's input layout is described
in Sources/Tools/accessory-http-fuzz (control bytes first, then data)."""
import gzip, os, random, struct

here = os.path.dirname(os.path.abspath(__file__))

def put(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), "wb") as f:
        f.write(data)

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def frame(kind, nonce, seq, payload):
    """docs/framing.md section 1."""
    header = bytes([0xAC, 0xCE, 0x55, 0xED, 1, kind, 0, 0]) + struct.pack(">QII", nonce, seq, len(payload))
    header += struct.pack(">I", crc32c(header))
    return header + payload + struct.pack(">I", crc32c(header + payload))

# response: options byte (1 HEAD, 2 streamed, 4 decompress), abandon-after byte, then reads,
# each a length byte (0: the whole rest) and its bytes.
responses = {
    "content-length": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "chunked-trailers": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\nDigest: x\r\n\r\n",
    "continue-then-ok": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
    "no-content": b"HTTP/1.1 204 No Content\r\n\r\n",
    "not-modified": b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
    "close-delimited": b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil the end",
    "redirect": b"HTTP/1.1 302 Found\r\nLocation: /other\r\nContent-Length: 0\r\n\r\n",
    "challenge": b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Digest realm="a", nonce="n", qop="auth"\r\nContent-Length: 0\r\n\r\n',
    "cl-and-te": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "two-cl": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
    "obs-fold": b"HTTP/1.1 200 OK\r\nX-A: 1\r\n folded\r\nContent-Length: 0\r\n\r\n",
    "bare-lf": b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    "status-2OO": b"HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n",
    "switching": b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    "te-gzip-chunked": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
    "stray-after": b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n",
}
for name, body in responses.items():
    put("response", name, bytes([0, 0, 0]) + body)
put("response", "split-1-byte", bytes([2, 3]) + b"".join(bytes([1, c]) for c in responses["chunked"]))
put("response", "head", bytes([1, 0, 0]) + b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n")
zipped = gzip.compress(b"compressed body " * 8, mtime=0)
put("response", "gzip", bytes([4, 0, 0]) + b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: "
    + str(len(zipped)).encode() + b"\r\n\r\n" + zipped)

# http2-response: options byte (streams - 1 in the low bits, 0x10 = no SETTINGS preface added),
# cancels byte (bit n: an exchange gives up after read n), then reads; the device's frames.
def h2(kind, flags, stream, payload=b""):
    """RFC 9113 section 4.1: length (24 bits), type, flags, stream ID."""
    return struct.pack(">I", len(payload))[1:] + bytes([kind, flags]) + struct.pack(">I", stream) + payload

status_200, status_204, status_100 = b"\x88", b"\x89", b"\x08\x03100"  # HPACK: indexed, indexed, literal
trailer = b"\x00\x03x-t\x01v"
settings_ack = h2(4, 1, 0)
put("http2-response", "ok-body", bytes([0, 0, 0]) + settings_ack + h2(1, 4, 1, status_200) + h2(0, 1, 1, b"hello"))
put("http2-response", "three-streams", bytes([2, 0, 0]) + settings_ack + h2(1, 4, 1, status_200)
    + h2(0, 0, 1, b"a" * 100) + h2(1, 5, 1, trailer) + h2(1, 4, 3, status_204) + h2(0, 1, 3)
    + h2(3, 0, 5, struct.pack(">I", 2)) + h2(7, 0, 0, struct.pack(">II", 3, 0)))
put("http2-response", "informational-then-final", bytes([0, 0, 7]) + h2(1, 4, 1, status_100)
    + h2(8, 0, 0, struct.pack(">I", 1000)) + h2(6, 0, 0, b"12345678") + h2(1, 4, 1, status_200)
    + h2(0, 1, 1, b"x" * 5000))
put("http2-response", "cancelled-mid-body", bytes([1, 0xFF, 16]) + h2(1, 4, 1, status_200) + h2(0, 0, 1, b"b" * 300)
    + h2(1, 4, 3, status_200) + h2(0, 1, 3, b"c" * 300) + h2(0, 1, 1, b"d"))

# request: the bytes a host sends, as they are.
requests = {
    "get": b"GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n",
    "post-length": b"POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    "post-chunked": b"POST /upload HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "pipelined": b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
    "http10": b"GET / HTTP/1.0\r\n\r\n",
    "no-host": b"GET / HTTP/1.1\r\n\r\n",
    "expect": b"PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    "cl-and-te": b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "h2-preface": b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]),
    "session-get": frame(1, 0x1122334455667788, 0, bytes([1, 0, 0, 0]) + struct.pack(">I", 16384))
    + frame(3, 0x1122334455667788, 1, b"GET /status HTTP/1.1\r\nHost: a\r\n\r\n"),
    "hello-mid-request": b"POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc"
    + frame(1, 0x99, 0, bytes([1, 0, 0, 0]) + struct.pack(">I", 16384)),
}
# HTTP/2 requests (prior knowledge): HPACK :method GET / POST, :scheme http, :path / (static
# table 2, 3, 6, 4) and :authority "a" (a literal, indexed).
h2_preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + h2(4, 0, 0) + settings_ack
h2_get, h2_post = b"\x82\x86\x84\x41\x01a", b"\x83\x86\x84\x41\x01a"
requests["h2-get"] = h2_preface + h2(1, 5, 1, h2_get)
requests["h2-post-trailers"] = (h2_preface + h2(1, 4, 1, h2_post) + h2(0, 0, 1, b"hello") + h2(1, 5, 1, trailer)
    + h2(1, 5, 3, h2_get))
requests["h2-reset-mid-body"] = (h2_preface + h2(1, 4, 1, h2_post) + h2(0, 0, 1, b"x" * 300)
    + h2(3, 0, 1, struct.pack(">I", 8)) + h2(8, 0, 0, struct.pack(">I", 1000)) + h2(1, 5, 3, h2_get))
for name, body in requests.items():
    put("request", name, body)

# The session targets read control bytes throughout; seeded with fixed random inputs of
# several sizes, and a few inputs that are mostly well-formed frames (piece kinds 1 and 5).
rng = random.Random(20261127)
for target in ("session-reader", "session-responder", "session-opener"):
    for size in (16, 64, 256, 1024):
        put(target, "random-%d" % size, bytes(rng.randrange(256) for _ in range(size)))
    put(target, "frames", bytes([0] * 16) + bytes([5, 2, 1, 2]) + bytes([1, 3, 2, 0, 8]) + b"GET / HT"
        + bytes([1, 4, 2, 0]) + bytes([6]))

auth = [
    b'Digest realm="accessory", nonce="abc", qop="auth", algorithm=SHA-256, opaque="x"',
    b'Basic realm="x", charset="UTF-8"',
    b'Bearer abc==, Digest nonce=1, realm=r',
    b'Newauth realm="apps", type=1, title="Login to \\"apps\\"", Basic realm="simple"',
    b'Digest realm="a", nonce="n", algorithm=MD5-sess, qop="auth,auth-int", stale=true, userhash=true',
]
for index, text in enumerate(auth):
    put("auth", "challenge-%d" % index, text)

specs = [
    b"emulator", b"stdio", b"serial:/dev/ttyACM0?baud=115200&session=on&http=2",
    b"usb:1209:0001?serial=ABC&interface=1&session=on", b"unix:/run/acc.sock?http=2",
    b"exec:python3 peer.py", b"exec?independent:cat", b"tcp:127.0.0.1:8080", b"tcp:[::1]:80",
    b"sha256:" + b"ab" * 32, b"serial:/dev/ttyUSB0?baud=9600&data=7&parity=even&stop=2&flow=rtscts",
    b"aoa", b"aoa:18d1:4ee7?manufacturer=Acme&model=Meter&uri=https://acme.example/m?x=1&port=1-2&session=on",
]
for index, text in enumerate(specs):
    put("spec", "spec-%d" % index, text)

configs = [
    b"# settings\ndevice = serial:/dev/ttyACM0?baud=115200\nhost = printer.local\ntimeout = 2.5\nsession = auto\nhttp = 2\n",
    b"[usb 1209:0001]\nzlp = off\ntitle-case-headers = yes\nmax-transfer-size = 8192\nclaim-delay = 0.2\nmax-interfaces = 2\ninterface-class = 0xff\n",
    b"[bridge printer]\ndevice = usb:1209:0001\nlisten = unix:/run/accessory-http/printer.sock\nlisten = tcp:127.0.0.1:8080\n"
    b"queue-timeout = 30\nresponse-timeout = 60\nidle-release = 2\nclient-idle-timeout = 60\ngrace = 10\n"
    b"socket-mode = 0660\nsocket-group = plugdev\nallow-remote = no\nhost = printer\n",
    b"device = emulator\r\n[bridge a]\r\ndevice = stdio\r\nlisten = unix:/tmp/a\r\n[usb 04b8:0e28]\r\nzlp = on\r\n",
]
for index, text in enumerate(configs):
    put("config", "config-%d" % index, text)

# TLS: reads as length byte + bytes. An alert, a handshake record header, a ClientHello start.
for target in ("tls-client", "tls-server"):
    put(target, "alert", bytes([0, 0x15, 3, 3, 0, 2, 2, 40]))
    put(target, "handshake-header", bytes([0, 0x16, 3, 3, 0, 4, 2, 0, 0, 0]))
    put(target, "client-hello-start", bytes([0, 0x16, 3, 1, 0, 0x30, 1, 0, 0, 0x2c, 3, 3]) + bytes(32))
