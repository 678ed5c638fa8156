#!/usr/bin/env python3
"""session-peer.py - an independent implementation of docs/framing.md (session layer, v1).

Written from the specification alone, as a reference for device firmware authors and as a
test peer for the Swift package. Python 3.11 standard library only.

  session-peer.py serve [--slow-bytes]   responder ("device") on stdin/stdout, with a tiny
                                         HTTP/1.1 server: GET /status, GET /bytes/N, POST /echo
  session-peer.py probe                  opener-side test driver; talks to a responder on
                                         stdin/stdout, prints "ok NAME" / "FAIL NAME: why" on
                                         stderr, exits 0 only if every check passed
  session-peer.py selftest               CRC-32C check value, the byte-exact examples of §7,
                                         and a few in-process checks of the responder

Choices where the spec is silent or ambiguous are marked "CHOICE" below.
Set SESSION_PEER_DEBUG=1 to log to stderr. Nothing but protocol bytes ever goes to stdout.
"""
import os
import re
import select
import struct
import sys
import time
from collections import deque, namedtuple

# ---------------------------------------------------------------------------------------
# §1 Frame layout
# ---------------------------------------------------------------------------------------
MAGIC = b'\xac\xce\x55\xed'
FORMAT = 1
HELLO, HELLO_ACK, DATA, PING, PONG, CLOSE = 1, 2, 3, 4, 5, 6
FRAME_TYPES = {HELLO: 'HELLO', HELLO_ACK: 'HELLO_ACK', DATA: 'DATA', PING: 'PING',
               PONG: 'PONG', CLOSE: 'CLOSE'}
HDR_FMT = '>4sBBHQIII'          # magic, format, type, flags, nonce, sequence, length, header CRC
HEADER_LEN = 28
OVERHEAD = 32                   # header + 4-byte frame CRC trailer
MAX_FRAME = 16384               # largest whole frame; also what we announce
MIN_FRAME = 64                  # smallest max_frame a peer may announce (§2)
MAX_PAYLOAD = MAX_FRAME - OVERHEAD   # 16352
HELLO_MAX_PAYLOAD = 64          # §6: a HELLO candidate has length 8 ... 64
VERSION = 1
CLOSE_END, CLOSE_INTEGRITY, CLOSE_PROTOCOL, CLOSE_SHUTDOWN = 1, 2, 3, 4

DEBUG = os.environ.get('SESSION_PEER_DEBUG') == '1'


def log(*args):
    if DEBUG:
        print('session-peer[%d]:' % os.getpid(), *args, file=sys.stderr, flush=True)


def _crc_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    return table


CRC_TABLE = _crc_table()


def crc32c(data, crc=0):
    """CRC-32C (Castagnoli), table driven. crc32c(b, crc32c(a)) == crc32c(a + b)."""
    c = crc ^ 0xFFFFFFFF
    t = CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def encode_frame(ftype, nonce, seq, payload=b''):
    head = struct.pack('>4sBBHQII', MAGIC, FORMAT, ftype, 0, nonce, seq & 0xFFFFFFFF,
                       len(payload))
    head += crc32c(head).to_bytes(4, 'big')
    return head + payload + crc32c(payload, crc32c(head)).to_bytes(4, 'big')


Header = namedtuple('Header', 'ftype nonce seq length')
Frame = namedtuple('Frame', 'ftype nonce seq payload')
NEED, BAD, OK = 'need', 'bad', 'ok'


def parse_header(buf, pos, max_payload, only_type=None):
    """Look at the header starting at buf[pos]. Returns (NEED, None) when more bytes are
    needed to decide, (BAD, why) as soon as the bytes cannot be a valid header, or
    (OK, Header). Each field is checked as soon as its bytes are there, so a reader never
    waits for bytes of something that is already known to be invalid."""
    avail = len(buf) - pos
    head = bytes(buf[pos:pos + HEADER_LEN])
    n = min(avail, 4)
    if head[:n] != MAGIC[:n]:
        return BAD, 'bad magic'
    if avail > 4 and head[4] != FORMAT:
        return BAD, 'bad format %d' % head[4]
    if avail > 5:
        if head[5] not in FRAME_TYPES:
            return BAD, 'unknown type %d' % head[5]
        if only_type is not None and head[5] != only_type:
            return BAD, 'not a %s' % FRAME_TYPES[only_type]
    if avail >= 24 and int.from_bytes(head[20:24], 'big') > max_payload:
        return BAD, 'length %d too big' % int.from_bytes(head[20:24], 'big')
    if avail < HEADER_LEN:
        return NEED, None
    _, _, ftype, _flags, nonce, seq, length, hcrc = struct.unpack(HDR_FMT, head)
    if crc32c(head[:24]) != hcrc:
        return BAD, 'bad header CRC'
    return OK, Header(ftype, nonce, seq, length)


def payload_problem(ftype, p):
    """§2 / §5: the payload sizes and values each type requires. None when fine."""
    if ftype in (HELLO, HELLO_ACK):
        # CHOICE: HELLO is limited to 8...64 bytes everywhere (§6), HELLO_ACK only needs 8.
        if len(p) < 8 or (ftype == HELLO and len(p) > HELLO_MAX_PAYLOAD):
            return 'bad %s length %d' % (FRAME_TYPES[ftype], len(p))
        version, max_frame = struct.unpack('>B3xI', p[:8])
        if version == 0:                  # CHOICE: there is no version 0
            return 'version 0'
        if not MIN_FRAME <= max_frame <= MAX_FRAME:
            return 'max_frame %d out of range' % max_frame
    elif ftype in (PING, PONG) and len(p) > 8:
        return '%s payload of %d bytes' % (FRAME_TYPES[ftype], len(p))
    elif ftype == CLOSE and not 4 <= len(p) <= 204:
        return 'CLOSE payload of %d bytes' % len(p)
    return None


def parse_frame(buf, pos, max_payload, only_type=None):
    """Like parse_header, for the whole frame: (NEED, None), (BAD, why) or (OK, (Frame, end))
    where end is the index just past the frame."""
    st, hdr = parse_header(buf, pos, max_payload, only_type)
    if st != OK:
        return st, hdr
    end = pos + OVERHEAD + hdr.length
    if len(buf) < end:
        return NEED, None
    body = bytes(buf[pos:end - 4])
    if crc32c(body) != int.from_bytes(buf[end - 4:end], 'big'):
        return BAD, 'bad frame CRC'
    payload = body[HEADER_LEN:]
    why = payload_problem(hdr.ftype, payload)
    if hdr.nonce == 0:                    # CHOICE: "never 0" makes a nonce-0 frame invalid
        why = 'nonce 0'
    if why:
        return BAD, why
    return OK, (Frame(hdr.ftype, hdr.nonce, hdr.seq, payload), end)


def hello_payload(max_version=VERSION, max_frame=MAX_FRAME):
    return struct.pack('>B3xI', max_version, max_frame)


def close_payload(reason, text, peer_payload):
    room = max(0, min(200, peer_payload - 4))       # the text must fit the peer's max_frame
    return bytes([reason, 0, 0, 0]) + text.encode()[:room]


# ---------------------------------------------------------------------------------------
# The HTTP/1.1 server that runs in plain mode and inside sessions
# ---------------------------------------------------------------------------------------
PATTERN = bytes(i % 251 for i in range(251 + 16384))   # byte i of /bytes/N is i % 251


def pattern_chunks(n, slow):
    """The body of GET /bytes/N, generated lazily in 16 KiB pieces."""
    i = 0
    while i < n:
        if slow and i:
            time.sleep(0.001)
        k = min(16384, n - i)
        yield PATTERN[i % 251:i % 251 + k]
        i += k


class Source:
    """The bytes of one response, pulled lazily by the writer at most n at a time."""

    def __init__(self, pieces):
        self.pieces = iter(pieces)
        self.pending = memoryview(b'')

    def read(self, n):
        out = bytearray()
        while len(out) < n:
            if not self.pending:
                piece = next(self.pieces, None)
                if piece is None:
                    break
                self.pending = memoryview(piece)
            take = self.pending[:n - len(out)]
            out += take
            self.pending = self.pending[len(take):]
        return bytes(out)


REASONS = {200: 'OK', 400: 'Bad Request', 404: 'Not Found'}


class HttpServer:
    MAX_HEAD = 16384
    MAX_BODY = 64 << 20

    def __init__(self, slow=False):
        self.buf = bytearray()
        self.slow = slow

    def reset(self):
        self.buf.clear()

    def feed(self, data):
        self.buf += data

    def response(self, code, ctype, length, body_pieces, close):
        head = 'HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n%s\r\n' % (
            code, REASONS[code], ctype, length, 'Connection: close\r\n' if close else '')
        return Source(_chain(head.encode(), body_pieces)), close

    def bad_request(self):
        self.buf.clear()
        return self.response(400, 'text/plain', 12, [b'bad request\n'], True)

    def next_response(self):
        """(Source, close) for the next complete request, or None if more input is needed."""
        while self.buf[:2] == b'\r\n':           # RFC 9112 §2.2: ignore empty lines first
            del self.buf[:2]
        end = self.buf.find(b'\r\n\r\n')
        if end < 0:
            return self.bad_request() if len(self.buf) > self.MAX_HEAD else None
        lines = bytes(self.buf[:end]).decode('latin-1').split('\r\n')
        parts = lines[0].split(' ')
        if (len(parts) != 3 or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", parts[0])
                or not parts[1].startswith('/') or parts[2] not in ('HTTP/1.1', 'HTTP/1.0')):
            return self.bad_request()
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(':')
            if not sep or not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", name):
                return self.bad_request()
            name, value = name.lower(), value.strip(' \t')
            if name == 'content-length' and headers.get(name, value) != value:
                return self.bad_request()
            headers[name] = headers[name] + ', ' + value if name in headers and \
                name != 'content-length' else value
        if 'transfer-encoding' in headers:       # bodies by Content-Length only
            return self.bad_request()
        cl = headers.get('content-length', '0')
        if not re.fullmatch(r'[0-9]{1,12}', cl) or int(cl) > self.MAX_BODY:
            return self.bad_request()
        total = end + 4 + int(cl)
        if len(self.buf) < total:
            return None
        body = bytes(self.buf[end + 4:total])
        del self.buf[:total]
        tokens = [t.strip().lower() for t in headers.get('connection', '').split(',')]
        close = 'close' in tokens or (version == 'HTTP/1.0' and 'keep-alive' not in tokens)
        log('http', method, target, 'close' if close else 'keep-alive')
        m = re.fullmatch(r'/bytes/([0-9]{1,12})', target)
        if method == 'GET' and target == '/status':
            return self.response(200, 'application/json', 34,
                                 [b'{"model":"session-peer","ok":true}'], close)
        if method == 'GET' and m:
            n = int(m.group(1))
            return self.response(200, 'application/octet-stream', n,
                                 pattern_chunks(n, self.slow), close)
        if method == 'POST' and target == '/echo':
            return self.response(200, 'application/octet-stream', len(body), [body], close)
        return self.response(404, 'text/plain', 10, [b'not found\n'], close)


def _chain(first, rest):
    yield first
    yield from rest


# ---------------------------------------------------------------------------------------
# The responder (§3 - §6)
# ---------------------------------------------------------------------------------------
PLAIN, SESSION, HUNTING = 'PLAIN', 'SESSION', 'HUNTING'
RAW = 0                       # queue entry kind for plain-mode output (frames use their type)
HOLD_TIMEOUT = 0.5            # CHOICE: see Responder.release_held


class Responder:
    def __init__(self, slow=False):
        self.http = HttpServer(slow)
        self.state = PLAIN
        self.rx = bytearray()          # input not yet consumed (in PLAIN: a held candidate)
        self.last_input = time.monotonic()
        self.nonce = 0                 # current (or last) session
        self.tx_seq = 0                # number of our next frame
        self.rx_seq = 0                # number we expect on the opener's next frame
        self.peer_payload = MAX_PAYLOAD
        self.queue = deque()           # output not yet encoded: (RAW|frame type, bytes)
        self.cur = bytearray()         # the one unit being written now (partly written)
        self.source = None             # the response being produced, lazily
        self.close_after = False

    # ---- input --------------------------------------------------------------------
    def process_input(self):
        pos, stalled = 0, False
        while pos < len(self.rx) and not stalled:
            if self.state == SESSION:
                pos, stalled = self.session_input(pos)
            else:
                pos, stalled = self.watch_input(pos)
        del self.rx[:pos]

    def watch_input(self, pos):
        """PLAIN and HUNTING (§6): look for a valid HELLO; other bytes go to the HTTP parser
        (PLAIN) or away (HUNTING). A candidate starts at an AC byte and is held back until
        it is a valid HELLO or cannot be one."""
        j = self.rx.find(0xAC, pos)
        upto = len(self.rx) if j < 0 else j
        if self.state == PLAIN and upto > pos:
            self.http.feed(self.rx[pos:upto])
        if j < 0:
            return upto, False
        st, val = parse_frame(self.rx, j, HELLO_MAX_PAYLOAD, only_type=HELLO)
        if st == NEED:
            return j, True                     # hold the candidate, wait for more input
        if st == BAD:
            # CHOICE: only the AC byte is released; the bytes after it are scanned again,
            # since a real HELLO may begin inside a failed candidate.
            if self.state == PLAIN:
                self.http.feed(self.rx[j:j + 1])
            return j + 1, False
        frame, end = val
        self.restart(frame)
        return end, False

    def release_held(self):
        """CHOICE (not in the spec): a candidate held in PLAIN mode for HOLD_TIMEOUT without
        new input is released to the HTTP parser, so that a plain request whose last bytes
        happen to be AC, AC CE, ... is not held back forever."""
        log('releasing a held candidate of', len(self.rx), 'bytes')
        self.http.feed(self.rx[:1])
        del self.rx[:1]
        self.process_input()

    def session_input(self, pos):
        st, val = parse_frame(self.rx, pos, MAX_PAYLOAD)
        if st == NEED:
            return pos, True
        if st == BAD:
            self.integrity_error(val)
            return pos + 1, False              # hunt from the next byte (see watch_input)
        f, end = val
        if f.ftype == HELLO:                   # any valid HELLO restarts (§3, §5)
            self.restart(f)
        elif f.nonce != self.nonce:
            log('discarding stale', FRAME_TYPES[f.ftype], 'of nonce %016x' % f.nonce)
        elif f.seq != self.rx_seq:
            self.integrity_error('sequence %d, expected %d' % (f.seq, self.rx_seq))
        else:
            self.rx_seq = (self.rx_seq + 1) & 0xFFFFFFFF
            if f.ftype == DATA:
                self.http.feed(f.payload)
            elif f.ftype == PING:              # after the frames already queued (§4)
                self.queue.append((PONG, f.payload))
            elif f.ftype == CLOSE:
                log('CLOSE %d received' % f.payload[0])
                self.abandon(keep_partial_frame=False)
                self.state = PLAIN             # CHOICE: whatever the reason (§4)
            # PONG and HELLO_ACK: nothing to do (CHOICE: they still use up a number)
        return end, False

    # ---- state changes ----------------------------------------------------------------
    def abandon(self, keep_partial_frame):
        """Drop every byte not yet handed to the transport, and the HTTP state."""
        self.queue.clear()
        self.source, self.close_after = None, False
        self.http.reset()
        if not keep_partial_frame:
            self.cur.clear()

    def restart(self, hello):
        max_version, max_frame = struct.unpack('>B3xI', hello.payload[:8])
        log('HELLO nonce %016x max_frame %d: restart (was %s)' % (hello.nonce, max_frame,
                                                                   self.state))
        # §3: nothing of the abandoned work may follow the HELLO_ACK. A frame that was
        # partly written is cut short too (the spec says "every byte not yet handed to
        # the transport"); an opener hunting for its HELLO_ACK must cope with that anyway.
        self.abandon(keep_partial_frame=False)
        self.state = SESSION
        self.nonce, self.tx_seq, self.rx_seq = hello.nonce, 0, 1
        self.peer_payload = min(MAX_PAYLOAD, max_frame - OVERHEAD)
        self.queue.append((HELLO_ACK, hello_payload(min(max_version, VERSION), MAX_FRAME)))

    def integrity_error(self, why):
        log('integrity error:', why, '-> CLOSE 02, hunting')
        # The frame being written (if any) is finished, so that the opener can read the
        # CLOSE that follows it; everything queued after it is dropped.
        self.abandon(keep_partial_frame=True)
        self.queue.append((CLOSE, close_payload(CLOSE_INTEGRITY, why, self.peer_payload)))
        self.state = HUNTING

    # ---- output ---------------------------------------------------------------------------
    def pump(self):
        """Produce output lazily: keep a few units queued, no more."""
        while len(self.queue) < 4:
            if self.source is None:
                if self.state == HUNTING:
                    return
                r = self.http.next_response()
                if r is None:
                    return
                self.source, self.close_after = r
            in_session = self.state == SESSION
            chunk = self.source.read(self.peer_payload if in_session else 16384)
            if chunk:
                self.queue.append((DATA if in_session else RAW, chunk))
                continue
            self.source = None                 # the response is complete
            if self.close_after:
                self.close_after = False
                self.http.reset()              # plain mode: "close" = forget this client
                if in_session:                 # §2: CLOSE 01 = Connection: close
                    self.queue.append((CLOSE, close_payload(CLOSE_END, '', 0)))
                    self.state = PLAIN

    def write_some(self):
        """Write at most one unit (one frame, or 16 KiB of plain output)."""
        if not self.cur:
            if not self.queue:
                return
            kind, data = self.queue.popleft()
            if kind == RAW:
                self.cur = bytearray(data)
            else:
                self.cur = bytearray(encode_frame(kind, self.nonce, self.tx_seq, data))
                log('send', FRAME_TYPES[kind], 'seq', self.tx_seq, 'len', len(data))
                self.tx_seq = (self.tx_seq + 1) & 0xFFFFFFFF
        n = os.write(1, self.cur)
        del self.cur[:n]

    def run(self):
        while True:
            self.pump()
            timeout = None
            if self.state == PLAIN and self.rx:
                timeout = max(0.0, self.last_input + HOLD_TIMEOUT - time.monotonic())
            r, w, _ = select.select([0], [1] if (self.cur or self.queue) else [], [], timeout)
            if not r and self.state == PLAIN and self.rx and \
                    time.monotonic() >= self.last_input + HOLD_TIMEOUT:
                self.release_held()            # only when no input is waiting
            if r:                              # input first: a HELLO cancels pending output
                data = os.read(0, 65536)
                if not data:
                    log('EOF')
                    return 0
                self.last_input = time.monotonic()
                self.rx += data
                self.process_input()
                self.pump()
            if w and (self.cur or self.queue):
                self.write_some()


def serve(args):
    try:
        return Responder(slow='--slow-bytes' in args).run()
    except (BrokenPipeError, ConnectionResetError):
        return 0


# ---------------------------------------------------------------------------------------
# The probe: an opener that checks a responder
# ---------------------------------------------------------------------------------------
class Fail(Exception):
    pass


class Link:
    """stdin/stdout of the probe, with an input buffer. Sending also reads, so that
    neither side can block the other with full buffers."""

    def __init__(self):
        self.rx = bytearray()

    def _read(self):
        data = os.read(0, 65536)
        if not data:
            raise Fail('EOF from the responder')
        self.rx += data

    def fill(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([0], [], [], left)[0]:
            raise Fail('timed out waiting for the responder')
        self._read()

    def send(self, data, deadline, split=False):
        view = memoryview(bytes(data))
        while view:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Fail('timed out sending')
            r, w, _ = select.select([0], [1], [], left)
            if r:
                self._read()
            if w:
                n = os.write(1, view[:1 if split else 16384])
                view = view[n:]
                if split:
                    time.sleep(0.001)          # make the 1-byte writes arrive separately


class Session:
    def __init__(self, link, nonce, max_frame):
        self.link, self.nonce = link, nonce
        self.tx = 1                            # HELLO was our number 0
        self.rx = 1                            # HELLO_ACK was theirs
        self.peer_payload = min(MAX_PAYLOAD, max_frame - OVERHEAD)

    def send(self, ftype, payload, deadline, split=False, seq=None, bad_crc=False):
        frame = bytearray(encode_frame(ftype, self.nonce, self.tx if seq is None else seq,
                                       payload))
        if bad_crc:
            frame[-1] ^= 0x5A
        self.tx = (self.tx if seq is None else seq) + 1
        self.link.send(frame, deadline, split)

    def send_data(self, data, deadline, split=False):
        for i in range(0, len(data), self.peer_payload):
            self.send(DATA, data[i:i + self.peer_payload], deadline, split)

    def read_frame(self, deadline):
        """The next frame, which must be a valid frame of this session, in sequence."""
        rx = self.link.rx
        while True:
            st, val = parse_frame(rx, 0, MAX_PAYLOAD)
            if st == OK:
                break
            if st == BAD:
                raise Fail('invalid frame from the responder: %s' % val)
            self.link.fill(deadline)
        f, end = val
        del rx[:end]
        if f.nonce != self.nonce:
            raise Fail('%s of a foreign session' % FRAME_TYPES[f.ftype])
        if f.seq != self.rx:
            raise Fail('%s with sequence %d, expected %d' % (FRAME_TYPES[f.ftype], f.seq,
                                                             self.rx))
        self.rx += 1
        return f

    def request(self, req, deadline, split=False):
        self.send_data(req, deadline, split)
        buf = bytearray()
        while True:
            f = self.read_frame(deadline)
            if f.ftype == DATA:
                buf += f.payload
                resp = parse_response(buf)
                if resp:
                    return resp
            elif f.ftype == PING:
                self.send(PONG, f.payload, deadline, split)
            elif f.ftype == CLOSE:
                raise Fail('CLOSE %02d before the response was complete' % f.payload[0])
            elif f.ftype != PONG:
                raise Fail('unexpected %s in the session' % FRAME_TYPES[f.ftype])


def find_hello_ack(buf, nonce):
    """§3 step 1: discard everything but the valid HELLO_ACK with our nonce and sequence 0.
    Every magic is tried, including ones inside frames that were cut short, so an ACK is
    never swallowed as the payload of a stale frame. Returns the Frame or None (and drops
    the bytes that can no longer matter)."""
    i, keep = 0, max(0, len(buf) - 3)          # a magic may be split across reads
    while True:
        j = buf.find(MAGIC, i)
        if j < 0:
            break
        st, hdr = parse_header(buf, j, MAX_PAYLOAD)
        if st == OK and hdr.ftype == HELLO_ACK and hdr.nonce == nonce and hdr.seq == 0:
            st, val = parse_frame(buf, j, MAX_PAYLOAD)
            if st == OK:
                del buf[:val[1]]
                return val[0]
        if st == NEED:
            keep = min(keep, j)
        i = j + 1
    del buf[:keep]
    return None


def start_session(link, deadline, split=False):
    nonce = new_nonce()
    link.send(encode_frame(HELLO, nonce, 0, hello_payload()), deadline, split)
    return await_ack(link, nonce, deadline)


def await_ack(link, nonce, deadline):
    while True:
        ack = find_hello_ack(link.rx, nonce)
        if ack:
            break
        link.fill(deadline)
    version, max_frame = struct.unpack('>B3xI', ack.payload[:8])
    if version != VERSION:
        raise Fail('HELLO_ACK chose version %d' % version)
    return Session(link, nonce, max_frame)


def new_nonce():
    while True:
        n = int.from_bytes(os.urandom(8), 'big')
        if n:
            return n


def parse_response(buf):
    """A complete HTTP/1.1 response at the start of buf: (status, headers, body, used), or
    None if incomplete. Raises Fail if it is not HTTP."""
    end = buf.find(b'\r\n\r\n')
    if end < 0:
        if len(buf) >= 5 and not buf.startswith(b'HTTP/'):
            raise Fail('not an HTTP response: %r' % bytes(buf[:40]))
        return None
    lines = bytes(buf[:end]).decode('latin-1').split('\r\n')
    m = re.fullmatch(r'HTTP/1\.[01] ([0-9]{3})( .*)?', lines[0])
    if not m:
        raise Fail('bad status line %r' % lines[0][:60])
    status = int(m.group(1))
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(':')
        headers[name.strip().lower()] = value.strip()
    pos = end + 4
    if 'chunked' in headers.get('transfer-encoding', '').lower():
        body = bytearray()
        while True:
            eol = buf.find(b'\r\n', pos)
            if eol < 0:
                return None
            size = int(bytes(buf[pos:eol]).split(b';')[0], 16)
            if size == 0:                        # then trailers up to an empty line
                t_end = buf.find(b'\r\n\r\n', eol) if buf[eol + 2:eol + 4] != b'\r\n' \
                    else eol
                return None if t_end < 0 else (status, headers, bytes(body), t_end + 4)
            if len(buf) < eol + 2 + size + 2:
                return None
            body += buf[eol + 2:eol + 2 + size]
            pos = eol + 2 + size + 2
    length = int(headers.get('content-length', '0'))
    if len(buf) < pos + length:
        return None
    return status, headers, bytes(buf[pos:pos + length]), pos + length


STATUS_REQ = b'GET /status HTTP/1.1\r\nHost: x\r\n\r\n'


def expect_200(resp, what='GET /status'):
    if resp[0] != 200:
        raise Fail('%s answered %d' % (what, resp[0]))


class Probe:
    def __init__(self):
        self.link = Link()
        self.session = None

    def need_session(self, deadline):
        if self.session is None:
            self.session = start_session(self.link, deadline)
        return self.session

    def plain_request(self, req, deadline):
        self.link.send(req, deadline)
        while True:
            resp = parse_response(self.link.rx)
            if resp:
                del self.link.rx[:resp[3]]
                return resp
            self.link.fill(deadline)

    # ---- the checks, in order ----------------------------------------------------
    def check_plain(self, dl):
        expect_200(self.plain_request(STATUS_REQ, dl))

    def check_start(self, dl):
        self.session = None
        self.need_session(dl)

    def check_request(self, dl):
        expect_200(self.need_session(dl).request(STATUS_REQ, dl))

    def check_ping(self, dl):
        s = self.need_session(dl)
        payload = os.urandom(8)
        s.send(PING, payload, dl)
        f = s.read_frame(dl)
        if f.ftype != PONG or f.payload != payload:
            raise Fail('got %s %s instead of PONG %s' % (FRAME_TYPES[f.ftype],
                                                        f.payload.hex(), payload.hex()))

    def check_garbage_restart(self, dl):
        self.need_session(dl)
        junk = bytearray()
        while len(junk) < 1000:
            junk += bytes(b for b in os.urandom(1000) if b != 0xAC)
        self.session = None
        self.link.send(junk[:1000], dl)
        expect_200(self.need_session(dl).request(STATUS_REQ, dl))

    def check_abandon(self, dl):
        s = self.need_session(dl)
        s.send_data(b'GET /bytes/1000000000 HTTP/1.1\r\nHost: x\r\n\r\n', dl)
        buf = bytearray()
        while True:
            f = s.read_frame(dl)
            if f.ftype != DATA:
                raise Fail('%s during the long response' % FRAME_TYPES[f.ftype])
            buf += f.payload
            end = buf.find(b'\r\n\r\n')
            if end >= 0 and len(buf) - end - 4 >= 100000:
                break
        if not buf.startswith(b'HTTP/1.1 200'):
            raise Fail('GET /bytes answered %r' % bytes(buf[:20]))
        # The body's bytes (and whether it is chunked) depend on the responder under test:
        # only the peer's own `serve` promises the i % 251 pattern, so it is not checked here.
        self.session = None
        s = self.need_session(dl)
        expect_200(s.request(STATUS_REQ, min(dl, time.monotonic() + 2)))

    def _expect_close_02(self, s, dl):
        f = s.read_frame(min(dl, time.monotonic() + 2))
        if f.ftype != CLOSE or f.payload[0] != CLOSE_INTEGRITY:
            raise Fail('expected CLOSE 02, got %s %s' % (FRAME_TYPES[f.ftype],
                                                        f.payload[:1].hex()))
        self.session = None
        expect_200(self.need_session(dl).request(STATUS_REQ, dl))

    def check_crc_error(self, dl):
        s = self.need_session(dl)
        s.send(DATA, STATUS_REQ, dl, bad_crc=True)
        self._expect_close_02(s, dl)

    def check_bad_sequence(self, dl):
        s = self.need_session(dl)
        s.send(DATA, STATUS_REQ, dl, seq=s.tx + 1)
        self._expect_close_02(s, dl)

    def check_hello_flood(self, dl):
        self.session = None
        nonces = set()
        while len(nonces) < 200:
            nonces.add(new_nonce())
        nonces = list(nonces)
        self.link.send(b''.join(encode_frame(HELLO, n, 0, hello_payload()) for n in nonces),
                       dl)
        self.session = await_ack(self.link, nonces[-1], dl)
        expect_200(self.session.request(STATUS_REQ, dl))

    def check_split(self, dl):
        self.session = start_session(self.link, dl, split=True)
        expect_200(self.session.request(STATUS_REQ, dl, split=True))

    def check_close(self, dl):
        s = self.need_session(dl)
        s.send(CLOSE, close_payload(CLOSE_END, '', 0), dl)
        self.session = None
        expect_200(self.plain_request(STATUS_REQ, dl))

    CHECKS = [('plain', check_plain), ('start', check_start), ('request', check_request),
              ('ping', check_ping), ('garbage-restart', check_garbage_restart),
              ('abandon', check_abandon), ('crc-error', check_crc_error),
              ('bad-sequence', check_bad_sequence), ('hello-flood', check_hello_flood),
              ('split', check_split), ('close', check_close)]

    def run(self):
        failed = 0
        for name, check in self.CHECKS:
            try:
                check(self, time.monotonic() + 5.0)
                print('ok', name, file=sys.stderr, flush=True)
            except Exception as e:              # noqa: BLE001 - report, go on
                why = str(e) if isinstance(e, Fail) else '%s: %s' % (type(e).__name__, e)
                print('FAIL %s: %s' % (name, why), file=sys.stderr, flush=True)
                failed += 1
                self.session = None
        print('%d of %d checks passed' % (len(self.CHECKS) - failed, len(self.CHECKS)),
              file=sys.stderr, flush=True)
        return 1 if failed else 0


# ---------------------------------------------------------------------------------------
# selftest: CRC check value, §7 byte for byte, and the responder's state machine
# ---------------------------------------------------------------------------------------
SPEC_EXAMPLES = [   # (type, sequence, payload, the hex of §7)
    (HELLO, 0, hello_payload(),
     'acce55ed010100000123456789abcdef0000000000000008d88f12320100000000004000a8f9118f'),
    (HELLO_ACK, 0, hello_payload(),
     'acce55ed010200000123456789abcdef0000000000000008162eb1ea0100000000004000e8eea279'),
    (DATA, 1, b'GET /status HTTP/1.1\r\nHost: accessory\r\n\r\n',
     'acce55ed010300000123456789abcdef000000010000002945d29f7c474554202f73746174757320485454'
     '502f312e310d0a486f73743a206163636573736f72790d0a0d0afcd39ee9'),
    (DATA, 1, b'HTTP/1.1 204 No Content\r\n\r\n',
     'acce55ed010300000123456789abcdef000000010000001b940aa63a485454502f312e3120323034204e'
     '6f20436f6e74656e740d0a0d0aa930f81b'),
    (PING, 2, bytes(7) + b'\x07',
     'acce55ed010400000123456789abcdef0000000200000008fea35ff300000000000000072e0a3d5f'),
    (PONG, 2, bytes(7) + b'\x07',
     'acce55ed010500000123456789abcdef0000000200000008479813140000000000000007ff1ec422'),
    (CLOSE, 3, b'\x01\x00\x00\x00',
     'acce55ed010600000123456789abcdef0000000300000004fc6b10b00100000008e1d2cf'),
]


def selftest():
    results = []

    def check(name, cond):
        results.append(bool(cond))
        print('%s %s' % ('ok' if cond else 'FAIL', name), file=sys.stderr)

    check('crc32c check value 0xE3069283', crc32c(b'123456789') == 0xE3069283)
    nonce = 0x0123456789ABCDEF
    for ftype, seq, payload, hexed in SPEC_EXAMPLES:
        enc = encode_frame(ftype, nonce, seq, payload)
        name = '§7 %s seq %d' % (FRAME_TYPES[ftype], seq)
        check(name + ' encodes byte for byte', enc.hex() == hexed)
        st, val = parse_frame(bytearray(bytes.fromhex(hexed)), 0, MAX_PAYLOAD)
        check(name + ' parses back', st == OK and val[0] == Frame(ftype, nonce, seq, payload))
        bad = bytearray(enc)
        bad[-5] ^= 1
        check(name + ' rejected when damaged', parse_frame(bad, 0, MAX_PAYLOAD)[0] == BAD)

    # The responder's state machine, without any I/O (nothing is written in here).
    hello = encode_frame(HELLO, nonce, 0, hello_payload())
    r = Responder()
    r.rx += b'POST /echo HTTP/1.1\r\nContent-Length: 3\r\n\r\n\xac\xce\x00'
    r.process_input()
    r.pump()
    check('plain: a failed candidate goes to HTTP',
          b''.join(d for _, d in r.queue).endswith(b'\r\n\r\n\xac\xce\x00'))
    r.rx += b'GET /bytes/100000 HTTP/1.1\r\n\r\n\xac' + hello[:20]
    r.process_input()
    r.pump()
    check('plain: a partial HELLO is held back (the stray AC is not)',
          len(r.rx) == 20 and r.http.buf == b'\xac' and r.queue)
    r.rx += hello[20:]
    r.process_input()
    check('plain: a HELLO restarts, dropping the response',
          r.state == SESSION and list(r.queue) == [(HELLO_ACK, hello_payload())])
    r.queue.clear()
    r.rx += encode_frame(DATA, nonce, 2, b'x')
    r.process_input()
    check('session: a sequence gap gives CLOSE 02 and HUNTING',
          r.state == HUNTING and r.queue[0][0] == CLOSE and r.queue[0][1][0] == 2)
    r.queue.clear()
    r.rx += b'\xac\xac' + hello
    r.process_input()
    check('hunting: a HELLO right after a stray AC is found', r.state == SESSION)
    print('selftest: %d of %d passed' % (sum(results), len(results)), file=sys.stderr)
    return 0 if all(results) else 1


def main(argv):
    if len(argv) >= 2 and argv[1] == 'serve':
        return serve(argv[2:])
    if len(argv) == 2 and argv[1] == 'probe':
        try:
            return Probe().run()
        except BrokenPipeError:
            return 1
    if len(argv) == 2 and argv[1] == 'selftest':
        return selftest()
    print('usage: session-peer.py serve [--slow-bytes] | probe | selftest', file=sys.stderr)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
