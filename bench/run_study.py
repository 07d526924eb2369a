#!/usr/bin/env python3
"""Runs one named GPU study (bench/studies/NAME.json) on the machine it is on.

    python3 bench/run_study.py NAME [--bundle .devbuild/bundle] [--out DIR] [--deadline 560]

On the device machine, from the root of the copy of the working tree, with the bundle that
`bench/bundle.py NAME` made here carried (`.devbuild/bundle`): the binaries are unpacked into a
scratch folder, the random-weight checkpoints the study names are written there (and kept for
the next call on the same machine), and the study's steps run in order, each within what is
left of the deadline. bench/README.md describes the study format; in short, a step is one of

    {"name": N, "run": PROGRAM, "args": [...]}          a bundle binary (benchmark, test, refcheck)
    {"name": N, "tests": [[BINARY, ARG...], ...]}       GPU test binaries, one summary line each
    {"name": N, "serve": [FLAGS], "clients": [...]}     serve + bench_serve runs (and commands) against it
    {"name": N, "python": SCRIPT, "args": [...]}        a Python script (peers, checkpoint tools)
    {"name": N, "shell": COMMAND}                       a shell command

with "{ckpt:9b}" / "{ckpt:27b-fp8}" / "{ckpt:9b-gptq}" / "{ckpt:9b-vl}" (random checkpoints; -vl: with the vision tower), "{data}" (tests/data), "{out}" (the
raw results), "{bin}" (the bundle's binaries), "{scratch}" and "{extra:NAME}" (files the bundle
carries) replaced in arguments.
A step with "ab": true runs the bundle's baseline binaries (`bundle.py --baseline REF`) and the
new ones in turns (base, new, new, base for "rounds": 2), so drift cancels in the ratios.

Output, in OUT (default $OUT, else .devbuild/out/NAME): summary.md (every step's line and
tables; printed last), study.json (the study, the machine, each step's files and status) and
results.tar.gz (every log and result file, packed again after each step so a run cut short
keeps what it did). bench/report.py reads study.json and the result files.
"""
import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
from datetime import datetime, timezone

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PORT = 18080
# What each program takes to write its result file.
JSON_FLAG = {"bench_serve": "--result-json"}


class Study:
    def __init__(self, args):
        self.name = args.study
        with open(os.path.join(ROOT, "bench", "studies", self.name + ".json")) as f:
            self.spec = json.load(f)
        self.start = time.monotonic()
        self.deadline = args.deadline or self.spec.get("deadline_s", 560)
        self.out = os.path.abspath(args.out or os.environ.get("OUT") or os.path.join(ROOT, ".devbuild", "out", self.name))
        self.scratch = os.path.abspath(args.scratch or os.path.join(tempfile.gettempdir(), "deltaserve-study"))
        self.raw = os.path.join(self.scratch, "raw", self.name)
        shutil.rmtree(self.raw, ignore_errors=True)
        os.makedirs(self.raw)
        os.makedirs(self.out, exist_ok=True)
        self.summary = []
        self.records = []
        self.bundle = None
        self.env = dict(os.environ)
        self.checkpoints = {}  # name -> Thread writing it, or None once written

    # ---- time
    def left(self):
        return int(self.deadline - (time.monotonic() - self.start))

    # ---- output
    def note(self, line=""):
        print(line, flush=True)
        self.summary.append(line)

    def flush(self):
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write("\n".join(self.summary) + "\n")
        manifest = {"study": self.name, "question": self.spec.get("question", ""), "machine": self.machine,
                    "commit": self.commit, "base_commit": self.base_commit, "steps": self.records}
        with open(os.path.join(self.out, "study.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        with tarfile.open(os.path.join(self.out, "results.tar.gz"), "w:gz") as t:
            t.add(self.raw, arcname=self.name)

    # ---- bundle and machine
    def unpack(self, bundle_dir):
        tar = os.path.join(bundle_dir, "bundle.tar.xz")
        if not os.path.exists(tar):
            sys.exit(f"run_study: no bundle at {tar} (make it with `python3 bench/bundle.py {self.name}` and carry "
                     f"{os.path.relpath(bundle_dir, ROOT)})")
        dest = os.path.join(self.scratch, "bundle")
        stamp = f"{os.path.getsize(tar)} {os.path.getmtime(tar)}"
        stamp_file = os.path.join(dest, ".unpacked")
        if not (os.path.exists(stamp_file) and open(stamp_file).read() == stamp):
            shutil.rmtree(dest, ignore_errors=True)
            os.makedirs(dest)
            subprocess.run(f"xz -dc {shlex.quote(tar)} | tar -C {shlex.quote(dest)} -xf -", shell=True, check=True)
            with open(stamp_file, "w") as f:
                f.write(stamp)
        self.bundle = dest
        libs = [os.path.join(dest, "lib")] + self.cublas_dirs()
        self.env["LD_LIBRARY_PATH"] = ":".join(libs + [p for p in [os.environ.get("LD_LIBRARY_PATH")] if p])
        self.env["DELTASERVE_TEST_DATA_DIR"] = os.path.join(ROOT, "tests", "data")
        self.commit = self.read(os.path.join(dest, "COMMIT"))
        self.base_commit = self.read(os.path.join(dest, "base", "COMMIT")) if self.has_base() else ""

    @staticmethod
    def read(path):
        return open(path).read().strip() if os.path.exists(path) else ""

    @staticmethod
    def cublas_dirs():
        """cuBLAS comes with the machine's CUDA (or its Python wheels), not with the bundle."""
        cands = [os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), d) for d in ("lib64", "targets/x86_64-linux/lib")]
        try:
            import nvidia.cublas  # the wheel PyTorch installs
            cands.append(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))
        except Exception:
            pass
        return [d for d in cands if os.path.exists(os.path.join(d, "libcublas.so.13"))][:1]

    def has_base(self):
        return self.bundle is not None and os.path.isdir(os.path.join(self.bundle, "base", "bin"))

    def binary(self, name, variant="new"):
        d = os.path.join(self.bundle, "base", "bin") if variant == "base" else os.path.join(self.bundle, "bin")
        path = os.path.join(d, name)
        if not os.path.exists(path):
            raise StepError(f"{name} is not in the bundle's {'baseline ' if variant == 'base' else ''}binaries "
                            f"(bundle.py takes a study's \"binaries\")")
        return path

    def describe_machine(self):
        def sh(cmd):
            r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            return r.stdout.strip()
        gpu = sh("nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1")
        self.machine = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "gpu": gpu,
                        "cpus": os.cpu_count(), "cuda": sh("nvcc --version | grep -o 'release [0-9.]*'")}
        self.note(f"# {self.name}: {self.spec.get('question', '')}")
        self.note(f"{self.machine['date']}; {gpu}; {os.cpu_count()} CPUs; bundle {self.commit}"
                  + (f", baseline {self.base_commit}" if self.base_commit else ""))

    # ---- checkpoints
    def checkpoint_names(self):
        text = json.dumps(self.spec.get("steps", []))
        return sorted(set(re.findall(r"\{ckpt:([a-z0-9.-]+)\}", text)))

    def start_checkpoints(self):
        """Writes the study's checkpoints in the background, one after another. Those of earlier
        studies stay for the next call unless this one must write one: then they go first (the
        disk holds one 27B checkpoint, not two)."""
        names = self.checkpoint_names()
        root = os.path.join(self.scratch, "checkpoints")
        os.makedirs(root, exist_ok=True)
        todo = [n for n in names if not os.path.exists(os.path.join(root, n, ".complete"))]
        for d in os.listdir(root) if todo else []:
            if d not in names:
                shutil.rmtree(os.path.join(root, d), ignore_errors=True)
        for n in names:
            self.checkpoints[n] = None if n not in todo else "pending"
        if not todo:
            return

        def write_all():
            for n in todo:
                path = os.path.join(root, n)
                shutil.rmtree(path, ignore_errors=True)
                size, *kinds = n.split("-")
                t0 = time.monotonic()
                log = os.path.join(self.raw, f"checkpoint_{n}.log")
                tools = os.path.join(ROOT, "bench", "tools")
                cmd = [sys.executable, os.path.join(tools, "make_random_checkpoint.py"), "--size", size, "--out", path]
                for layout in ("fp8", "gptq", "awq"):
                    if layout in kinds:
                        cmd.append("--" + layout)
                tok = [sys.executable, os.path.join(tools, "make_checkpoint_tokenizer.py"), "--out", path]
                if "vl" in kinds:  # the released vision tower, and the template that renders images
                    cmd.append("--vision")
                    tok += ["--template-dir", os.path.join(ROOT, "tests", "data", "tiny-qwen35-vl")]
                with open(log, "w") as f:
                    try:
                        ok = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, timeout=max(60, self.left()),
                                            env=dict(self.env, PYTHONUNBUFFERED="1")).returncode == 0
                        ok = ok and subprocess.run(tok, stdout=f, stderr=subprocess.STDOUT).returncode == 0
                    except subprocess.TimeoutExpired:
                        ok = False
                if ok:
                    open(os.path.join(path, ".complete"), "w").close()
                self.checkpoints[n] = "written" if ok else "failed"
                self.note(f"checkpoint {n}: {'written' if ok else 'FAILED'} in {time.monotonic() - t0:.0f} s")

        th = threading.Thread(target=write_all, daemon=True)
        th.start()
        self.checkpoint_thread = th

    def checkpoint(self, name):
        th = getattr(self, "checkpoint_thread", None)
        while th is not None and th.is_alive() and self.checkpoints.get(name) == "pending" and self.left() > 0:
            time.sleep(1)
        path = os.path.join(self.scratch, "checkpoints", name)
        if not os.path.exists(os.path.join(path, ".complete")):
            raise StepError(f"checkpoint {name} is not there ({self.checkpoints.get(name)})")
        return path

    # ---- placeholders
    def expand(self, value):
        if isinstance(value, list):
            return [self.expand(v) for v in value]
        if not isinstance(value, str):
            return str(value)

        def sub(m):
            kind, _, arg = m.group(1).partition(":")
            if kind == "ckpt":
                return self.checkpoint(arg)
            if kind == "data":
                return os.path.join(ROOT, "tests", "data")
            if kind == "out":
                return self.raw
            if kind == "scratch":
                return self.scratch
            if kind == "root":
                return ROOT
            if kind == "extra":
                return os.path.join(self.bundle, "extras", arg)
            if kind == "bin":
                return os.path.join(self.bundle, "bin")
            return m.group(0)
        return re.sub(r"\{((?:ckpt|data|out|scratch|root|extra|bin)(?::[A-Za-z0-9._-]+)?)\}", sub, value)

    # ---- running things
    def call(self, cmd, log, timeout, env=None, append=False):
        """Runs cmd (a list) with its output in log; returns (exit code, seconds). 124: timed out."""
        timeout = max(1, min(timeout, self.left() - 5))
        t0 = time.monotonic()
        with open(log, "a" if append else "w") as f:
            f.write("$ " + " ".join(shlex.quote(c) for c in cmd) + "\n")
            f.flush()
            p = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env or self.env, cwd=ROOT,
                                 start_new_session=True)
            try:
                rc = p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = 124
                f.write(f"\n(stopped after {timeout} s)\n")
        return rc, time.monotonic() - t0

    def step_env(self, step):
        env = dict(self.env)
        for k, v in step.get("env", {}).items():
            env[k] = self.expand(v)
        if "pythonpath" in step:
            env["PYTHONPATH"] = ":".join(self.expand(step["pythonpath"]) + [p for p in [env.get("PYTHONPATH")] if p])
        return env

    def variants(self, step):
        """("new",) or, for an A/B step with a baseline in the bundle, base and new in turns."""
        if not step.get("ab") or not self.has_base():
            return [("new", "")]
        order = []
        for r in range(int(step.get("rounds", 2))):
            pair = [("base", f".base{r + 1}"), ("new", f".new{r + 1}")]
            order += pair if r % 2 == 0 else pair[::-1]
        return order

    def run_program(self, step, name):
        files = []
        for variant, suffix in self.variants(step):
            prog = step["run"]
            binary = self.binary(prog, variant)
            args = self.expand(step.get("args", []))
            out = os.path.join(self.raw, name + suffix)
            if step.get("json", True) and self.takes_json(binary, prog):
                args += [JSON_FLAG.get(prog, "--json"), out + ".json"]
            rc, secs = self.call([binary] + args, out + ".txt", step.get("timeout", self.left()), self.step_env(step))
            files.append({"variant": variant, "log": out + ".txt", "json": out + ".json", "rc": rc})
            self.note(f"{name}{suffix}: {prog} rc={rc} in {secs:.0f} s ({self.left()} s left)")
            self.tables(out + ".json", name + suffix)
        return files

    def takes_json(self, binary, prog):
        """A baseline built before a program had --json runs without it."""
        if prog in JSON_FLAG:
            return True
        r = subprocess.run([binary, "--help"], capture_output=True, text=True, env=self.env)
        return "--json" in r.stdout + r.stderr

    def run_tests(self, step, name):
        files = []
        for i, t in enumerate(step["tests"]):
            t = self.expand(t)
            log = os.path.join(self.raw, f"{name}_{i}_{t[0]}.txt")
            rc, secs = self.call([self.binary(t[0])] + t[1:], log, step.get("timeout", 240), self.step_env(step))
            text = open(log, errors="replace").read()
            last = [ln for ln in text.splitlines() if re.match(r"^(All tests passed|test cases:)", ln)]
            self.note(f"{' '.join(t)}: rc={rc} in {secs:.0f} s: {last[-1] if last else text.strip()[-160:]}")
            files.append({"log": log, "rc": rc})
        return files

    def run_python(self, step, name):
        log = os.path.join(self.raw, name + ".txt")
        cmd = [sys.executable, os.path.join(ROOT, step["python"])] + self.expand(step.get("args", []))
        out = os.path.join(self.raw, name + ".json")
        if step.get("json"):  # a peer that writes a program's result file (a report's peer_step)
            cmd += ["--json", out]
        env = dict(self.step_env(step), PYTHONUNBUFFERED="1")
        rc, secs = self.call(cmd, log, step.get("timeout", self.left()), env)
        self.note(f"{name}: {step['python']} rc={rc} in {secs:.0f} s")
        if step.get("show"):
            self.show(log, step["show"])
        if step.get("json"):
            self.tables(out, name)
            return [{"log": log, "json": out, "rc": rc}]
        return [{"log": log, "rc": rc}]

    def run_shell(self, step, name):
        log = os.path.join(self.raw, name + ".txt")
        rc, secs = self.call(["bash", "-c", self.expand(step["shell"])], log, step.get("timeout", self.left()),
                             self.step_env(step))
        self.note(f"{name}: rc={rc} in {secs:.0f} s")
        if step.get("show"):
            self.show(log, step["show"])
        return [{"log": log, "rc": rc}]

    def show(self, log, pattern):
        """The log's lines that match pattern, into the summary."""
        for line in open(log, errors="replace").read().splitlines():
            if re.search(pattern, line):
                self.note("    " + line)

    def metrics(self, port, pattern):
        try:
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        except Exception:
            return {}
        out = {}
        for line in text.splitlines():
            if not line.startswith("#") and re.search(pattern, line):
                key, _, value = line.rpartition(" ")
                try:
                    out[key] = float(value)
                except ValueError:
                    pass
        return out

    def run_serve(self, step, name):
        files = []
        for variant, suffix in self.variants(step):
            files += self.serve_once(step, name + suffix, variant)
        return files

    def serve_once(self, step, name, variant):
        model = self.expand(step.get("model", "{ckpt:9b}"))
        backend = step.get("backend", "cuda")
        flags = ["--model", model, "--backend", backend, "--port", str(PORT)]
        if backend == "cuda" and "--kv-cache-memory" not in step["serve"] and "--gpu-memory-utilization" not in step["serve"]:
            flags += ["--gpu-memory-utilization", "0.9"]
        flags += self.expand(step["serve"])
        log = os.path.join(self.raw, f"{name}_serve.log")
        t0 = time.monotonic()
        with open(log, "w") as f:
            f.write("$ serve " + " ".join(shlex.quote(a) for a in flags) + "\n")
            f.flush()
            server = subprocess.Popen([self.binary(step.get("server", "serve"), variant)] + flags, stdout=f, stderr=subprocess.STDOUT,
                                      env=self.step_env(step), cwd=ROOT, start_new_session=True)
        files = [{"variant": variant, "log": log}]
        try:
            while True:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{PORT}/health", timeout=2).status == 200:
                        break
                except Exception:
                    pass
                if server.poll() is not None or self.left() < 30:
                    self.note(f"{name}: serve did not come up: {open(log, errors='replace').read()[-300:]}")
                    return files
                time.sleep(1)
            facts = [ln for ln in open(log, errors="replace").read().splitlines()
                     if re.search(r"weights|K/V cache|state slots|fit at once", ln)]
            self.note(f"{name}: serve up in {time.monotonic() - t0:.0f} s" + "".join(f"\n    {ln[-160:]}" for ln in facts[:4]))
            bench = [self.binary("bench_serve", variant), "--base-url", f"http://127.0.0.1:{PORT}", "--no-progress"]
            if step.get("warmup"):
                rc, _ = self.call(bench + self.expand(step["warmup"]), os.path.join(self.raw, f"{name}_warmup.txt"),
                                  120)
                self.note(f"{name}: warm-up rc={rc}")
            for client in step.get("clients", []):
                cname = f"{name}_{client['name']}"
                if self.left() < client.get("needs_s", 40):
                    self.note(f"{cname}: no time left")
                    continue
                before = self.metrics(PORT, step["metrics"]) if "metrics" in step else {}
                out = os.path.join(self.raw, cname)
                if "command" in client:  # a shell command against the server (BASE_URL)
                    env = dict(self.step_env(step), BASE_URL=f"http://127.0.0.1:{PORT}")
                    rc, secs = self.call(["bash", "-c", self.expand(client["command"])], out + ".txt",
                                         client.get("timeout", self.left()), env)
                else:
                    args = self.expand(client["args"]) + ["--label", f"{self.name} {cname}", "--result-json", out + ".json"]
                    rc, secs = self.call(bench + args, out + ".txt", client.get("timeout", self.left() - 20))
                after = self.metrics(PORT, step["metrics"]) if "metrics" in step else {}
                if before or after:
                    with open(out + ".metrics.json", "w") as f:
                        json.dump({k: after[k] - before.get(k, 0.0) for k in after}, f, indent=1)
                files.append({"variant": variant, "client": client["name"], "log": out + ".txt", "json": out + ".json",
                              "rc": rc})
                self.note(f"{cname}: rc={rc} in {secs:.0f} s ({self.left()} s left)")
        finally:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=40)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        return files

    # ---- tables for the summary
    def tables(self, path, label):
        if not os.path.exists(path):
            return
        try:
            j = json.load(open(path))
        except ValueError:
            return
        rows = j.get("results", [])
        if rows:
            self.note(f"| {label} | value | of floor |\n|---|---|---|")
            for r in rows[:40]:
                frac = next((r[k] for k in ("of_floor", "of_gemm_rate", "of_copy_bw", "of_bytes_floor") if k in r), None)
                self.note(f"| {r['metric']} | {r['value']:.4g} {r['unit']} | {'' if frac is None else f'{100 * frac:.0f}%'} |")

    def serving_table(self):
        rows = [(rec, f) for rec in self.records for f in rec.get("files", []) if "client" in f]
        rows = [(rec, f) for rec, f in rows if os.path.exists(f["json"])]
        if not rows:
            return
        self.note("\n| run | done | failed | out tok/s | total tok/s | TTFT p50 ms | TPOT p50 ms | ITL p99 ms |\n"
                  "|---|---|---|---|---|---|---|---|")
        for rec, f in rows:
            j = json.load(open(f["json"]))
            self.note(f"| {os.path.basename(f['json'])[:-5]} | {j['completed']} | {j['failed']} | "
                      f"{j['output_throughput']:.0f} | {j['total_token_throughput']:.0f} | {j['median_ttft_ms']:.1f} | "
                      f"{j['median_tpot_ms']:.2f} | {j['p99_itl_ms']:.1f} |")

    def ab_table(self):
        """New over base for every metric both variants measured (means over rounds)."""
        pairs = {}
        for rec in self.records:
            for f in rec.get("files", []):
                if f.get("variant") not in ("base", "new") or not os.path.exists(f.get("json", "")):
                    continue
                j = json.load(open(f["json"]))
                vals = {r["metric"]: r["value"] for r in j.get("results", [])}
                if "output_throughput" in j:
                    vals = {"out tok/s": j["output_throughput"], "TPOT p50": j["median_tpot_ms"],
                            "TTFT p50": j["median_ttft_ms"]}
                key = rec["name"] + (f" {f['client']}" if "client" in f else "")
                for m, v in vals.items():
                    pairs.setdefault((key, m), {"base": [], "new": []})[f["variant"]].append(v)
        rows = [(k, v) for k, v in pairs.items() if v["base"] and v["new"]]
        if not rows:
            return
        self.note("\n| step | metric | base | new | new / base |\n|---|---|---|---|---|")
        for (step, m), v in rows:
            b, n = sum(v["base"]) / len(v["base"]), sum(v["new"]) / len(v["new"])
            self.note(f"| {step} | {m} | {b:.4g} | {n:.4g} | {n / b if b else float('nan'):.3f} |")

    # ---- the study
    def run(self, bundle_dir):
        self.commit = self.base_commit = ""
        self.machine = {}
        self.unpack(bundle_dir)
        self.describe_machine()
        self.flush()
        self.start_checkpoints()
        kinds = {"run": self.run_program, "tests": self.run_tests, "serve": self.run_serve, "python": self.run_python,
                 "shell": self.run_shell}
        for step in self.spec["steps"]:
            name = step["name"]
            kind = next((k for k in kinds if k in step), None)
            rec = {"name": name, "kind": kind, "files": []}
            self.records.append(rec)
            need = step.get("needs_s", 30)
            if self.left() < need:
                self.note(f"{name}: skipped, {self.left()} s left (needs {need})")
                rec["status"] = "skipped"
                continue
            if "requires" in step and not shutil.which(step["requires"]):
                self.note(f"{name}: skipped, no {step['requires']} on this machine")
                rec["status"] = "skipped"
                continue
            try:
                rec["files"] = kinds[kind](step, name)
                rec["status"] = "ran"
            except StepError as e:
                self.note(f"{name}: {e}")
                rec["status"] = "failed"
            self.flush()
        self.serving_table()
        self.ab_table()
        self.flush()
        print("==== summary")
        print("\n".join(self.summary))


class StepError(Exception):
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("study", help="a name in bench/studies (without .json)")
    ap.add_argument("--bundle", default=os.path.join(ROOT, ".devbuild", "bundle"), help="the carried bundle folder")
    ap.add_argument("--out", help="where results go (default: $OUT, else .devbuild/out/STUDY)")
    ap.add_argument("--scratch", help="binaries, checkpoints and raw results (default: the system's temp dir)")
    ap.add_argument("--deadline", type=int, help="seconds for the whole study (default: the study's deadline_s or 560)")
    Study(ap.parse_args()).run(ap.parse_args().bundle)


if __name__ == "__main__":
    main()
