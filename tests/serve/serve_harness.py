"""Starts `memra serve` on a free port for a test and talks to it over raw HTTP."""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import time


SERVERS = []  # started servers: their logs are printed when a check fails


def fail(msg):
    print("FAIL: " + msg, flush=True)
    for srv in SERVERS:
        print("---- memra serve log (last 4000 bytes) ----\n" + srv.text()[-4000:], flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def model_path():
    p = os.environ.get("MEMRA_MODEL", "")
    if not p or not os.path.exists(p):
        fail("MEMRA_MODEL is unset or missing (%r): tools/test.sh sets it to the default "
             "model (tools/fetch_default_model.sh)" % p)
    return p


class Server:
    def __init__(self, binary, plugin, extra):
        self.log_path = os.path.join(os.environ.get("TEST_TMPDIR", "/tmp"),
                                     "memra-serve-%d.log" % len(extra))
        self.log = open(self.log_path, "w+")
        args = [binary, "-m", model_path(), "--backend", plugin, "--port", "0", "-t", "2"] + extra
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        SERVERS.append(self)
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.port is None:
            if self.proc.poll() is not None:
                fail("memra serve exited with %d:\n%s" % (self.proc.returncode, self.text()))
            m = re.search(r"on http://[0-9.]+:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
            time.sleep(0.05)
        check(self.port is not None, "memra serve did not start:\n" + self.text())

    def text(self):
        self.log.flush()
        with open(self.log_path) as f:
            return f.read()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def request(self, method, path, body=None, headers=None, timeout=120):
        """Returns (status, parsed JSON or text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        c.request(method, path, body=body, headers=h)
        r = c.getresponse()
        data = r.read().decode("utf-8")
        c.close()
        try:
            return r.status, json.loads(data)
        except ValueError:
            return r.status, data

    def metrics(self, headers=None):
        st, text = self.request("GET", "/metrics", headers=headers)
        check(st == 200, "/metrics: %d" % st)
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, v = line.rsplit(" ", 1)
                out[k] = float(v)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=30):
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("memra serve did not stop within %d s after signal %d" % (timeout, sig))
        return rc
