#!/usr/bin/env python3
"""Every feature at once against a running serve, from many clients, for the sanitizer builds.

    scripts/stress_mix.py --port P [--seconds 120] [--clients 12] [--models m1,m2]
                          [--api-key K] [--vision] [--runtime-loras DIR1,DIR2]

Each client loops over a random mix: chat (plain, streaming, sampled), streams the client
abandons mid-reply, completions with n=2 and logprobs, json_schema outputs, Anthropic
Messages, Responses, /metrics and /v1/models, malformed bodies, and, when asked, data: URL
images (--vision) and runtime LoRA loads/unloads with requests for those adapters
(--runtime-loras; serve needs --allow-runtime-lora and --api-key). --models spreads requests
over the base model and adapters served with --lora-modules. Prints the HTTP statuses
counted, the latency quantiles, and the gauges that must be back to 0 when nothing runs; it
exits 1 if any request got a 5xx or a connection error, or a gauge is not back to 0. Run
serve from build-asan/ or build-tsan/ (scripts/test.sh builds both) and read its log for the
sanitizers' reports. Standard library only.
"""
import argparse
import base64
import http.client
import json
import random
import socket
import struct
import sys
import threading
import time
import zlib

p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
p.add_argument("--port", type=int, required=True)
p.add_argument("--host", default="127.0.0.1")
p.add_argument("--seconds", type=float, default=120)
p.add_argument("--clients", type=int, default=12)
p.add_argument("--models", default="", help="comma-separated model names (default: the server's)")
p.add_argument("--api-key", default="")
p.add_argument("--vision", action="store_true")
p.add_argument("--runtime-loras", default="")
args = p.parse_args()

lock = threading.Lock()
statuses = {}
latencies = []
SYSTEM = "You are a careful assistant. " * 40  # long enough to share prefix-cache blocks


def count(key):
    with lock:
        statuses[key] = statuses.get(key, 0) + 1


def png(w, h, seed):
    r = random.Random(seed)
    raw = b"".join(b"\x00" + bytes(r.randrange(256) for _ in range(w * 3)) for _ in range(h))

    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
            chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def request(method, path, body=None, cut_after=None):
    c = http.client.HTTPConnection(args.host, args.port, timeout=600)
    headers = {"Content-Type": "application/json"}
    if args.api_key:
        headers["Authorization"] = "Bearer " + args.api_key
    if body is not None and not isinstance(body, str):
        body = json.dumps(body)
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    if cut_after is not None:  # read a little, then leave
        r.read(cut_after)
        c.sock.shutdown(socket.SHUT_RDWR)
        c.close()
        return "left"
    r.read()
    c.close()
    return str(r.status)


def one(rng, models, loras):
    model = rng.choice(models)
    messages = [{"role": "system", "content": SYSTEM if rng.random() < 0.5 else "be brief"},
                {"role": "user", "content": "question %d about %s" % (rng.randrange(50), rng.choice("abcdefgh"))}]
    chat = {"model": model, "messages": messages, "max_tokens": rng.randrange(1, 24)}
    kind = rng.randrange(12)
    if kind == 0:
        return request("POST", "/v1/chat/completions", chat)
    if kind == 1:
        return request("POST", "/v1/chat/completions", dict(chat, stream=True, stream_options={"include_usage": True}))
    if kind == 2:
        return request("POST", "/v1/chat/completions", dict(chat, stream=True, max_tokens=200, ignore_eos=True),
                       cut_after=rng.randrange(1, 400))
    if kind == 3:
        return request("POST", "/v1/completions", {"model": model, "prompt": SYSTEM[: rng.randrange(10, 600)],
                                                   "max_tokens": 8, "n": 2, "logprobs": 2})
    if kind == 4:
        schema = {"type": "object", "required": ["a"],
                  "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 5}}}
        return request("POST", "/v1/chat/completions",
                       dict(chat, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}))
    if kind == 5:
        return request("POST", "/v1/messages", {"model": model, "max_tokens": 8, "stream": rng.random() < 0.5,
                                                "messages": [{"role": "user", "content": "hi %d" % rng.randrange(9)}]})
    if kind == 6:
        return request("POST", "/v1/responses", {"model": model, "input": "say %d" % rng.randrange(99), "max_output_tokens": 8})
    if kind == 7:
        return request("GET", rng.choice(["/metrics", "/v1/models", "/health"]))
    if kind == 8:
        return "bad:" + request("POST", "/v1/chat/completions", rng.choice(['{"messages": [', '{"messages": 3}', "[]", '{"model": 1}']))
    if kind == 9 and args.vision:
        img = base64.b64encode(png(rng.choice([16, 40, 64]), rng.choice([16, 32, 48]), rng.randrange(4))).decode()
        content = [{"type": "text", "text": "what is this"},
                   {"type": "image_url", "image_url": {"url": "data:image/png;base64," + img}}]
        return request("POST", "/v1/chat/completions", {"model": model, "messages": [{"role": "user", "content": content}],
                                                        "max_tokens": 6, "stream": rng.random() < 0.5})
    if kind == 10 and loras:
        name = "rt%d" % rng.randrange(2)
        if rng.random() < 0.5:
            return "load:" + request("POST", "/v1/load_lora_adapter", {"lora_name": name, "lora_path": rng.choice(loras)})
        return "unload:" + request("POST", "/v1/unload_lora_adapter", {"lora_name": name})
    if kind == 11 and loras:
        return "runtime-adapter:" + request("POST", "/v1/chat/completions", dict(chat, model="rt%d" % rng.randrange(2)))
    return request("POST", "/v1/chat/completions", dict(chat, temperature=1.0, top_p=0.9, seed=rng.randrange(99)))


def client(i, models, loras):
    rng = random.Random(i)
    end = time.time() + args.seconds
    while time.time() < end:
        t0 = time.time()
        try:
            count(one(rng, models, loras))
        except Exception as e:  # a dropped connection or a timeout is a failure of the server
            count("error:" + type(e).__name__)
        with lock:
            latencies.append(time.time() - t0)


def main():
    models = [m for m in args.models.split(",") if m]
    if not models:
        c = http.client.HTTPConnection(args.host, args.port, timeout=60)
        c.request("GET", "/v1/models", headers={"Authorization": "Bearer " + args.api_key} if args.api_key else {})
        models = [json.loads(c.getresponse().read())["data"][0]["id"]]
    loras = [d for d in args.runtime_loras.split(",") if d]
    threads = [threading.Thread(target=client, args=(i, models, loras)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("statuses:", json.dumps(statuses, sort_keys=True))
    lat = sorted(latencies) or [0.0]
    print("requests %d: latency p50 %.2f s, p90 %.2f s, max %.2f s" %
          (len(lat), lat[len(lat) // 2], lat[int(len(lat) * 0.9)], lat[-1]))
    failed = sum(n for k, n in statuses.items() if k.split(":")[-1].startswith("5") or k.startswith("error"))
    time.sleep(2)  # the abandoned streams' cancellations land
    c = http.client.HTTPConnection(args.host, args.port, timeout=60)
    c.request("GET", "/metrics")
    metrics = c.getresponse().read().decode()
    for line in metrics.splitlines():
        if line.startswith(("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                            "deltaserve:state_slots_used", "deltaserve:lora_slots_pinned")):
            print(line)
            if float(line.rsplit(" ", 1)[1]) != 0:
                failed += 1
    print("failures:", failed)
    return 1 if failed else 0


sys.exit(main())
