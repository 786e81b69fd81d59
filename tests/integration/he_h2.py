"""An HTTP/2 client for integration tests: python3-h2 (Debian's) over a
plain socket with prior knowledge, plus raw frames for what a client must
not send.

    from he_h2 import H2, h2, frame, frames, goaway_code, read_all, wait_goaway
    cl = H2(port, settings={h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 0})
    hdrs, body = cl.response(cl.request("/master.m3u8"))

Importing raises ImportError without python3-h2: the caller skips (77)."""

import socket
import struct
import sys
import time

from he import TLS_NAME, client_context, expect

try:
    import h2.config  # noqa: E402
    import h2.connection  # noqa: E402
    import h2.events  # noqa: E402
    import h2.settings  # noqa: E402
except ImportError:  # Debian's python3-h2 under another interpreter
    sys.path.append("/usr/lib/python3/dist-packages")
    import h2.config  # noqa: E402,F811
    import h2.connection  # noqa: E402,F811
    import h2.events  # noqa: E402,F811
    import h2.settings  # noqa: E402,F811


PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def frames(data):
    """(type, flags, stream, payload) of each whole frame in data."""
    out, i = [], 0
    while i + 9 <= len(data):
        n = int.from_bytes(data[i:i + 3], "big")
        if i + 9 + n > len(data):
            break
        out.append((data[i + 3], data[i + 4], int.from_bytes(data[i + 5:i + 9], "big") & 0x7fffffff,
                    data[i + 9:i + 9 + n]))
        i += 9 + n
    return out


def goaway_code(data):
    """The error code of the first GOAWAY in data, or None."""
    for t, _, _, p in frames(data):
        if t == 7:
            return struct.unpack(">I", p[4:8])[0]
    return None


def read_all(s, wait=5.0):
    got = b""
    s.settimeout(wait)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError:
        pass
    return got


class H2:
    """A python3-h2 client over a plain socket (prior knowledge)."""

    def __init__(self, port, settings=None, timeout=10, host="127.0.0.1", first_settings=None):
        """settings: sent after the first SETTINGS; first_settings: in it
        (those a peer may not see change, such as
        SETTINGS_NO_RFC7540_PRIORITIES, RFC 9218 2.1)."""
        self.sock = socket.create_connection((host, port), timeout=timeout)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=False, normalize_outbound_headers=False,
                                        validate_inbound_headers=False)
        self.c = h2.connection.H2Connection(config=cfg)
        if first_settings:
            self.c.local_settings = h2.settings.Settings(client=True, initial_values=first_settings)
        self.c.initiate_connection()
        if settings:
            self.c.update_settings(settings)
        self.flush()
        self.events = []
        self.goaway = None
        self.closed = False  # EOF read: the server closed
        self.send_failed = False  # a send failed; what the server sent is still read

    def flush(self):
        data = self.c.data_to_send()
        if data:
            self.sock.sendall(data)

    def send_raw(self, data):
        try:
            self.sock.sendall(data)
        except OSError:
            self.send_failed = True

    def request(self, path, method="GET", headers=(), end=True):
        sid = self.c.get_next_available_stream_id()
        hdrs = [(":method", method), (":path", path), (":scheme", "http"), (":authority", "127.0.0.1")]
        self.c.send_headers(sid, hdrs + list(headers), end_stream=end)
        try:
            self.flush()
        except OSError:
            self.send_failed = True
        return sid

    def pump(self, until, wait=10.0, ack=True):
        """Reads and handles events until until() or the connection ends."""
        deadline = time.time() + wait
        while not until() and not self.closed and time.time() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.time()))
            try:
                data = self.sock.recv(1 << 20)
            except socket.timeout:
                break
            except OSError:
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            try:
                evs = self.c.receive_data(data)
            except Exception:  # what the server sends after its GOAWAY may not parse for h2
                self.closed = True
                break
            for e in evs:
                self.events.append(e)
                if isinstance(e, h2.events.DataReceived) and ack:
                    self.c.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                if isinstance(e, h2.events.ConnectionTerminated):
                    self.goaway = e
            try:
                self.flush()
            except OSError:
                self.send_failed = True
        return until()

    def response(self, sid, wait=10.0):
        """(headers dict, body) of stream sid once it ended."""
        done = lambda: any(isinstance(e, (h2.events.StreamEnded, h2.events.StreamReset)) and e.stream_id == sid
                           for e in self.events)
        expect(self.pump(done, wait), "stream %d ended" % sid)
        hdrs, body = {}, b""
        for e in self.events:
            if isinstance(e, h2.events.ResponseReceived) and e.stream_id == sid:
                hdrs = dict(e.headers)
            if isinstance(e, h2.events.DataReceived) and e.stream_id == sid:
                body += e.data
        return hdrs, body

    def close(self):
        self.sock.close()


def get_once(port, path, wait=10.0):
    """One GET on a connection of its own, closed after: (headers, body)."""
    cl = H2(port)
    try:
        return cl.response(cl.request(path), wait=wait)
    finally:
        cl.close()


def wait_goaway(cl, wait=10.0):
    cl.pump(lambda: cl.goaway is not None, wait)
    # the close after it, not a stall: the server ends the connection
    cl.pump(lambda: False, 3.0)
    return cl.goaway


class RawH2:
    """An HTTP/2 client of raw frames (HPACK by python3-hpack) that reads on
    after a GOAWAY, which python3-h2 refuses to do: what a drain promises
    (streams up to the GOAWAY's last id finish) can be checked. Windows are
    opened wide at the start, so reading never has to answer with
    WINDOW_UPDATE; a small SO_RCVBUF and a delay per read make it slow."""

    def __init__(self, port, host="127.0.0.1", window=(1 << 30), rcvbuf=None, timeout=10, tls=False):
        """tls: over TLS with ALPN h2 (the server's tls.listen port)."""
        import hpack
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect((host, port))
        if tls:
            ctx = client_context()
            ctx.set_alpn_protocols(["h2"])
            self.sock = ctx.wrap_socket(self.sock, server_hostname=TLS_NAME)
            expect(self.sock.selected_alpn_protocol() == "h2", "ALPN chose h2")
        self.enc, self.dec = hpack.Encoder(), hpack.Decoder()
        self.next_id = 1
        self.buf = b""
        self.status, self.body, self.ended, self.resets = {}, {}, set(), {}
        self.goaway = None  # (last stream id, error code)
        self.closed = False
        self.sock.sendall(PREFACE + frame(4, 0, 0, struct.pack(">HI", 4, window - 1))
                          + frame(8, 0, 0, struct.pack(">I", window - 65536)))

    def get(self, path, headers=()):
        sid = self.next_id
        self.next_id += 2
        block = self.enc.encode([(":method", "GET"), (":path", path), (":scheme", "http"),
                                 (":authority", "127.0.0.1")] + list(headers))
        self.sock.sendall(frame(1, 0x5, sid, block))  # END_STREAM | END_HEADERS
        self.body[sid] = bytearray()
        return sid

    def _frame(self, t, flags, sid, p):
        if t == 0:  # DATA
            self.body.setdefault(sid, bytearray()).extend(p)
        elif t == 1:  # HEADERS (the server sends no CONTINUATION for our heads)
            hdrs = dict(self.dec.decode(p))
            if ":status" in hdrs:
                self.status[sid] = hdrs[":status"]
        elif t == 3:  # RST_STREAM
            self.resets[sid] = struct.unpack(">I", p[:4])[0]
        elif t == 4 and not flags & 1:  # SETTINGS: ACK it
            self.sock.sendall(frame(4, 1, 0))
        elif t == 7:  # GOAWAY
            self.goaway = (struct.unpack(">I", p[:4])[0] & 0x7fffffff, struct.unpack(">I", p[4:8])[0])
        if t in (0, 1) and flags & 1:
            self.ended.add(sid)

    def read(self, until, wait=10.0, delay=0.0, chunk=65536):
        """Reads frames until until() or EOF or wait seconds; delay
        between reads makes a slow reader. Returns until()."""
        deadline = time.time() + wait
        while not until() and not self.closed and time.time() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.time()))
            try:
                d = self.sock.recv(chunk)
            except socket.timeout:
                break
            except OSError:
                d = b""
            if not d:
                self.closed = True
                break
            self.buf += d
            while len(self.buf) >= 9:
                n = int.from_bytes(self.buf[:3], "big")
                if len(self.buf) < 9 + n:
                    break
                t, flags = self.buf[3], self.buf[4]
                sid = int.from_bytes(self.buf[5:9], "big") & 0x7fffffff
                p, self.buf = self.buf[9:9 + n], self.buf[9 + n:]
                self._frame(t, flags, sid, p)
            if delay:
                time.sleep(delay)
        return until()

    def close(self):
        self.sock.close()
