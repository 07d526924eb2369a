#!/usr/bin/env python3
"""Probes a `serve` process the way a hostile or careless client would (issue 17's probe) and
prints one line per probe: what was sent, what came back, the server's resident memory.

    scripts/probe_http.py [--serve build/serve]      (starts its own servers on free ports)

Standard library only. Each probe starts from a fresh server where the probe needs it
(the burst needs --max-num-seqs 2 --max-queue 4; the shutdown probe kills its server)."""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Server:
    def __init__(self, serve, *args):
        self.proc = subprocess.Popen([serve, "--port", "0", "--backend", "cpu", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on http://[^ ]*:(\d+)", line)
            if m:
                self.port = int(m.group(1))
            if "ready:" in line:
                break
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stdout:
            self.log.append(line)

    def rss_mib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return 0.0

    def alive(self):
        return self.proc.poll() is None

    def stop(self):
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def request(port, method, path, body=None, headers=None, timeout=60):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=body, headers=headers or {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def raw_status(sock, timeout=10):
    sock.settimeout(timeout)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            chunk = sock.recv(4096)
            if not chunk:
                break
            got += chunk
    except OSError:
        pass
    return int(got[9:12]) if got.startswith(b"HTTP/1.") else 0


def probe_deep_json(serve):
    s = Server(serve)
    deep = '{"x":' + "[" * 100000 + "]" * 100000 + ","
    out = []
    for path, rest in [("/v1/chat/completions", '"messages":[{"role":"user","content":"hi"}],"max_tokens":4}'),
                       ("/v1/completions", '"prompt":"hi","max_tokens":4}'), ("/tokenize", '"prompt":"hi"}'),
                       ("/detokenize", '"tokens":[1]}')]:
        status, _ = request(s.port, "POST", path, deep + rest, {"Content-Type": "application/json"})
        out.append(f"{path} {status}")
    print(f"deep JSON (200 KB, 100,000 levels): {', '.join(out)}; server alive: {s.alive()}")
    s.stop()


def probe_burst(serve):
    s = Server(serve, "--max-num-seqs", "2", "--max-queue", "4")
    results = []
    lock = threading.Lock()
    body = json.dumps({"prompt": "x", "max_tokens": 16, "ignore_eos": True}).encode()

    def one():
        try:
            sock = socket.create_connection(("127.0.0.1", s.port), timeout=60)
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            st = raw_status(sock, 60)
            sock.close()
        except OSError as e:
            st = type(e).__name__
        with lock:
            results.append(str(st))

    threads = [threading.Thread(target=one) for _ in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    counts = {k: results.count(k) for k in sorted(set(results))}
    print(f"burst of 200 connections, --max-num-seqs 2 --max-queue 4: {counts}")
    s.stop()


def probe_keepalive(serve):
    s = Server(serve)
    c = http.client.HTTPConnection("127.0.0.1", s.port)
    ms = []
    for _ in range(200):
        t0 = time.perf_counter()
        c.request("GET", "/health")
        c.getresponse().read()
        ms.append((time.perf_counter() - t0) * 1e3)
    tok = []
    for _ in range(100):
        t0 = time.perf_counter()
        c.request("POST", "/tokenize", body='{"prompt":"hello"}', headers={"Content-Type": "application/json"})
        c.getresponse().read()
        tok.append((time.perf_counter() - t0) * 1e3)
    print(f"kept-alive connection: /health median {statistics.median(ms):.2f} ms (p99 {sorted(ms)[197]:.2f}), "
          f"POST /tokenize median {statistics.median(tok):.2f} ms")
    s.stop()


def probe_bombs(serve):
    s = Server(serve)
    rss0 = s.rss_mib()
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"100000\r\n" + b"a" * (1 << 20) + b"\r\n"
    sent = 0
    try:
        sock.settimeout(5)
        for _ in range(300):
            sock.sendall(chunk)
            sent += 1
    except OSError:
        pass
    st = raw_status(sock)
    sock.close()
    rss1 = s.rss_mib()
    print(f"chunked upload of 300 MB (64 MiB limit): {st} after {sent} MiB sent; RSS {rss0:.0f} -> {rss1:.0f} MiB")
    sock = socket.create_connection(("127.0.0.1", s.port))
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    line = b"X-Filler: " + b"h" * 1000 + b"\r\n"
    sent = 0
    try:
        sock.settimeout(5)
        for _ in range(200):
            sock.sendall(line * 1000)
            sent += 1
    except OSError:
        pass
    st = raw_status(sock)
    sock.close()
    print(f"200 MB of headers: {st} after {sent} MB sent; RSS {rss1:.0f} -> {s.rss_mib():.0f} MiB; "
          f"server alive: {s.alive()}")
    s.stop()


def probe_slow_clients(serve):
    s = Server(serve)
    socks = []
    for _ in range(80):
        k = socket.create_connection(("127.0.0.1", s.port))
        k.sendall(b"GET /health HTTP/1.1\r\nX-Slow: ")
        socks.append(k)
    worst = 0.0
    for _ in range(20):
        for k in socks:
            try:
                k.send(b"a")
            except OSError:
                pass
        t0 = time.perf_counter()
        request(s.port, "GET", "/health", timeout=10)
        worst = max(worst, time.perf_counter() - t0)
        time.sleep(0.05)
    print(f"80 clients trickling header bytes: /health worst {worst * 1e3:.1f} ms over 20 tries")
    t0 = time.perf_counter()
    s.proc.send_signal(signal.SIGTERM)
    try:
        code = s.proc.wait(30)
    except subprocess.TimeoutExpired:
        code = "no exit in 30 s"
    print(f"SIGTERM while they trickle: exit {code} in {(time.perf_counter() - t0) * 1e3:.0f} ms")
    for k in socks:
        k.close()


def probe_http_odds(serve):
    s = Server(serve)
    big = json.dumps({"prompt": "a" * 20000})
    st, _ = request(s.port, "POST", "/tokenize", big, {"Content-Type": "application/x-www-form-urlencoded"})
    print(f"20 KB JSON body sent as curl -d does (form encoding): {st}")
    st, body = request(s.port, "GET", "/v1/models", headers={"Range": "bytes=0-1," * 500 + "0-1"})
    _, full = request(s.port, "GET", "/v1/models")
    print(f"GET /v1/models with 501 Range parts: {st}, {len(body)} bytes (the whole body is {len(full)})")
    st, _ = request(s.port, "GET", "/v1/chat/completions")
    print(f"GET on a POST route: {st}")
    s.stop()


def probe_validation(serve):
    s = Server(serve, "--max-ctx", "64")
    cases = [
        ("min_tokens 1e20", {"prompt": "hi", "min_tokens": 100000000000000000000}),
        ("temperature 1e308", {"prompt": "hi", "temperature": 1e308}),
        ("repetition_penalty 1e308", {"prompt": "hi", "repetition_penalty": 1e308}),
        ("prompt exactly max-ctx", {"prompt": [5] * 64}),
        ("prompt + max_tokens over max-ctx", {"prompt": [5] * 60, "max_tokens": 10}),
    ]
    for name, body in cases:
        st, data = request(s.port, "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        err = json.loads(data).get("error", {})
        print(f"{name}: {st} param={err.get('param')} \"{err.get('message', '')[:110]}\"")
    s.stop()


def probe_abort_metrics(serve):
    s = Server(serve)
    body = json.dumps({"prompt": "go", "max_tokens": 3000, "ignore_eos": True, "stream": True}).encode()
    for _ in range(50):
        k = socket.create_connection(("127.0.0.1", s.port))
        k.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                  + str(len(body)).encode() + b"\r\n\r\n" + body)
        k.settimeout(10)
        k.recv(1024)
        k.close()
    time.sleep(1.0)
    _, m = request(s.port, "GET", "/metrics")
    ab = re.search(rb'finished_reason="abort"\} (\d+)', m)
    print(f"50 streaming clients that disconnect: {int(ab.group(1)) if ab else 0} counted as aborts")
    s.stop()


def probe_startup(serve):
    t0 = time.perf_counter()
    s = Server(serve)
    ready = time.perf_counter() - t0
    print(f"start-up on the bundled model: ready in {ready:.2f} s, idle RSS {s.rss_mib():.0f} MiB")
    s.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--serve", default=os.path.join(ROOT, "build", "serve"))
    a = ap.parse_args()
    for probe in (probe_startup, probe_deep_json, probe_burst, probe_keepalive, probe_bombs, probe_slow_clients,
                  probe_http_odds, probe_validation, probe_abort_metrics):
        probe(a.serve)


if __name__ == "__main__":
    main()
