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

from he import expect

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

    def __init__(self, port, settings=None, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding="utf-8",
                                        validate_outbound_headers=False, normalize_outbound_headers=False,
                                        validate_inbound_headers=False)
        self.c = h2.connection.H2Connection(config=cfg)
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


def wait_goaway(cl, wait=10.0):
    cl.pump(lambda: cl.goaway is not None, wait)
    # the close after it, not a stall: the server ends the connection
    cl.pump(lambda: False, 3.0)
    return cl.goaway
