"""The Chrome DevTools protocol over Chromium's --remote-debugging-pipe:
commands go in on the child's fd 3, replies and events come out on its
fd 4, each a JSON object ended by a NUL byte. Only what the player
harness needs: attach to the first page, enable Network, navigate, and
keep every Network.responseReceived.

    pipe = CdpPipe()
    proc = subprocess.Popen(args + ["--remote-debugging-pipe", "about:blank"], **pipe.popen_args())
    pipe.started()             # the parent's ends only
    pipe.open_page(url)        # attach, Network.enable, Page.navigate
    pipe.responses()           # [{"url", "protocol", "status", "mime"}]
    pipe.close()
"""

import fcntl
import json
import os
import threading
import time


class CdpPipe:
    def __init__(self):
        self._to_child_r, self._to_child_w = os.pipe()
        self._from_child_r, self._from_child_w = os.pipe()
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._replies = {}
        self._next_id = 1
        self._responses = []
        self._closed = False
        self._reader = None

    def popen_args(self):
        """Popen arguments that put the pipe on the child's fds 3 and 4."""
        r, w = self._to_child_r, self._from_child_w

        def child():
            # copies above 4 first (r or w may be 3 or 4 themselves); dup2
            # onto 3 and 4 leaves those two without close-on-exec. Python's
            # own fds are close-on-exec (PEP 446), so close_fds may be off.
            hr = fcntl.fcntl(r, fcntl.F_DUPFD_CLOEXEC, 10)
            hw = fcntl.fcntl(w, fcntl.F_DUPFD_CLOEXEC, 10)
            os.dup2(hr, 3)
            os.dup2(hw, 4)
        return {"preexec_fn": child, "close_fds": False}

    def started(self):
        """The child has its copies: close ours and start reading."""
        os.close(self._to_child_r)
        os.close(self._from_child_w)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        buf = b""
        while True:
            try:
                d = os.read(self._from_child_r, 1 << 16)
            except OSError:
                d = b""
            if not d:
                break
            buf += d
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                self._dispatch(msg)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _dispatch(self, msg):
        with self._cond:
            if "id" in msg:
                self._replies[msg["id"]] = msg
                self._cond.notify_all()
            elif msg.get("method") == "Network.responseReceived":
                resp = msg["params"]["response"]
                self._responses.append({"url": resp.get("url"), "protocol": resp.get("protocol"),
                                        "status": resp.get("status"), "mime": resp.get("mimeType")})

    def call(self, method, params=None, session=None, timeout=10):
        """Sends a command and waits for its reply's result (raises on an
        error reply, a closed pipe or the timeout)."""
        with self._cond:
            mid = self._next_id
            self._next_id += 1
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_child_w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + timeout
        with self._cond:
            while mid not in self._replies:
                left = deadline - time.time()
                if self._closed or left <= 0:
                    raise RuntimeError("no reply to %s (%s)" % (method, "pipe closed" if self._closed else "timeout"))
                self._cond.wait(left)
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise RuntimeError("%s: %s" % (method, reply["error"]))
        return reply.get("result", {})

    def open_page(self, url, timeout=15):
        """Attaches to the first page target, enables Network and
        navigates it to url."""
        deadline = time.time() + timeout
        page = None
        while page is None:
            infos = self.call("Target.getTargets").get("targetInfos", [])
            page = next((t for t in infos if t.get("type") == "page"), None)
            if page is None:
                if time.time() > deadline:
                    raise RuntimeError("no page target in %ds: %r" % (timeout, infos))
                time.sleep(0.1)
        session = self.call("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        self.call("Network.enable", session=session)
        self.call("Page.navigate", {"url": url}, session=session)

    def responses(self):
        with self._lock:
            return list(self._responses)

    def close(self):
        for fd in (self._to_child_w, self._from_child_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self._to_child_w = self._from_child_r = -1
