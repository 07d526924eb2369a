#!/usr/bin/env python3
"""Builds what named GPU studies run and packs it for the device machine.

    python3 bench/bundle.py STUDY [STUDY...] [--baseline REF] [--jobs 2]
    python3 bench/bundle.py --check            every study is well formed (a CTest)

Here, on the workstation: builds the binaries the studies list ("binaries") in build-cuda/
(CUDA on, tests on, ccache when present), and packs them with the shared libraries the device
machine lacks (not the C runtime, the CUDA driver or cuBLAS, which it has), the commit they were
built from, and the files the studies' "extras" name, into .devbuild/bundle/bundle.tar.xz
(ignored by git; xz keeps it under the device tool's carry limit). With --baseline REF the same
binaries are also built from REF (a git worktree under .devbuild/) and packed as the baseline,
which the studies' A/B steps run in turns with the new ones.

Then on the device, carrying .devbuild/bundle:  python3 bench/run_study.py STUDY
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STUDIES = os.path.join(ROOT, "bench", "studies")
# Libraries the device machine has: the C/C++ runtime, the CUDA driver and cuBLAS; and, as its
# `ldconfig -p` showed on 2026-12-06, OpenSSL 3, zlib and libpng16 (same SONAMEs and symbol
# versions as Debian 12's; its libjpeg is .so.8, not Debian's .so.62, so that one travels).
SYSTEM_LIBS = re.compile(r"/(libc|libm|libdl|librt|libpthread|ld-linux[^/]*|libgcc_s|libstdc\+\+|libcuda|libcublas|"
                         r"libcublasLt|libssl|libcrypto|libz|libpng16)\.so")
# OpenBLAS and what only it needs: replaced by bench/tools/cblas_subset.c (the carry limit).
OPENBLAS = re.compile(r"/libopenblas[^/]*\.so")
OPENBLAS_ONLY = re.compile(r"/(libgfortran|libquadmath)\.so")
CBLAS_SUBSET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools", "cblas_subset.c")
STEP_KINDS = ("run", "tests", "serve", "python", "shell")
PLACEHOLDER = re.compile(r"\{(ckpt|data|out|scratch|root|extra|bin)(?::([A-Za-z0-9._-]+))?\}")
CKPT = re.compile(r"^(4b|9b|27b)(-fp8|-gptq|-awq)?(-vl)?$")  # the geometries and layouts make_random_checkpoint.py writes (-vl: --vision)
KEYS = {"question", "binaries", "baseline", "extras", "deadline_s", "steps", "report", "notes"}


def shared_dir():
    """The project's shared folder (peers' sources, the reference-fixture script), beside the checkout."""
    for rel in ("../shared", "../../shared"):
        d = os.path.normpath(os.path.join(ROOT, rel))
        if os.path.isdir(d):
            return d
    return None


# What a study's "extras" name: where the file or folder comes from, and its name in the bundle.
def extra_source(name):
    shared = shared_dir()
    return {
        "fla": os.path.join(shared, "peers", "fla") if shared else None,  # flash-linear-attention (MIT)
        "make_reference.py": os.path.join(shared, "scripts", "make_reference.py") if shared else None,
        "json-schema-test-suite": "/usr/share/json-schema-test-suite/tests",  # Debian's json-schema-test-suite
    }.get(name)


def tracked_tree_mb(root):
    """What the device tool copies besides the carried paths: tracked and untracked-not-ignored files."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                           capture_output=True, check=True).stdout.split(b"\0")
    return sum(os.path.getsize(os.path.join(root, f.decode())) for f in files
               if f and os.path.isfile(os.path.join(root, f.decode()))) / 1e6


def load(name):
    with open(os.path.join(STUDIES, name + ".json")) as f:
        return json.load(f)


def step_binaries(step):
    if "run" in step:
        return {step["run"]}
    if "tests" in step:
        return {t[0] for t in step["tests"]}
    if "serve" in step:
        return {step.get("server", "serve"), "bench_serve"}
    return set()


def check(name, spec):
    """Problems of one study, as lines."""
    bad = []
    for k in spec:
        if k not in KEYS:
            bad.append(f"unknown key {k!r}")
    for k in ("question", "binaries", "steps"):
        if k not in spec:
            bad.append(f"no {k!r}")
    binaries = set(spec.get("binaries", []))
    names = set()
    for step in spec.get("steps", []):
        kinds = [k for k in STEP_KINDS if k in step]
        label = step.get("name", "?")
        if len(kinds) != 1:
            bad.append(f"step {label}: one of {', '.join(STEP_KINDS)}, please (has {kinds})")
        if "name" not in step or step["name"] in names:
            bad.append(f"step {label}: a unique name, please")
        names.add(step.get("name"))
        missing = step_binaries(step) - binaries
        if missing:
            bad.append(f"step {label}: {', '.join(sorted(missing))} not in \"binaries\"")
        if "python" in step and not os.path.exists(os.path.join(ROOT, step["python"])):
            bad.append(f"step {label}: no {step['python']}")
        for m in PLACEHOLDER.finditer(json.dumps(step)):
            if m.group(1) == "ckpt" and not CKPT.match(m.group(2) or ""):
                bad.append(f"step {label}: checkpoint {m.group(2)!r} (9b, 27b, 4b, optionally -fp8, -gptq or -awq, then -vl)")
            if m.group(1) == "extra" and m.group(2) not in spec.get("extras", []):
                bad.append(f"step {label}: extra {m.group(2)!r} not in \"extras\"")
    for e in spec.get("extras", []):
        if extra_source(e) is None and e not in ("fla", "make_reference.py"):
            bad.append(f"unknown extra {e!r}")
    return [f"{name}: {b}" for b in bad]


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True).stdout.strip()


def commit_line(src):
    head = git("rev-parse", "--short=12", "HEAD", cwd=src) or "unknown"
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=src).returncode != 0
    return head + ("+changes" if dirty else "")


def build(src, build_dir, targets, jobs):
    """Configures and builds targets in src/build_dir; returns the targets that exist there."""
    if not targets:
        return []
    launcher = []
    if shutil.which("ccache"):
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
    subprocess.run(["cmake", "-S", src, "-B", build_dir, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release",
                    "-DDELTASERVE_CUDA=ON", "-DBUILD_TESTING=ON"] + launcher, check=True, stdout=subprocess.DEVNULL)
    known = subprocess.run(["ninja", "-C", build_dir, "-t", "targets", "all"], capture_output=True, text=True).stdout
    have = [t for t in targets if re.search(rf"^{re.escape(t)}:", known, re.M)]
    for t in sorted(set(targets) - set(have)):
        print(f"bundle: {t} does not exist in {src}; left out")
    if have:
        subprocess.run(["cmake", "--build", build_dir, "-j", str(jobs), "--target", *have], check=True)
    return have


def stage_binaries(build_dir, targets, dest, libdir):
    os.makedirs(dest, exist_ok=True)
    os.makedirs(libdir, exist_ok=True)
    blas = False
    for t in targets:
        shutil.copy2(os.path.join(build_dir, t), dest)
        ldd = subprocess.run(["ldd", os.path.join(build_dir, t)], capture_output=True, text=True).stdout
        for lib in re.findall(r"=> (/\S+)", ldd):
            if OPENBLAS.search(lib):
                blas = True
            elif not SYSTEM_LIBS.search(lib) and not OPENBLAS_ONLY.search(lib):
                shutil.copy(lib, os.path.join(libdir, os.path.basename(lib)))
    if blas:
        # The project's CBLAS calls in plain C instead of OpenBLAS (bench/tools/cblas_subset.c says why).
        subprocess.run(["cc", "-O3", "-shared", "-fPIC", "-Wl,-soname,libopenblas.so.0", "-o",
                        os.path.join(libdir, "libopenblas.so.0"), CBLAS_SUBSET], check=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("studies", nargs="*")
    ap.add_argument("--check", action="store_true", help="check every study in bench/studies and exit")
    ap.add_argument("--baseline", metavar="REF", help="also build the binaries from this git ref, as the baseline")
    ap.add_argument("--dest", default=os.path.join(ROOT, ".devbuild", "bundle"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build-cuda"))
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("JOBS", "2")))
    ap.add_argument("--from-build", metavar="DIR", help="pack the binaries already built in DIR (no configure, no "
                    "build; the harness's self-test packs the CPU build this way)")
    ap.add_argument("--baseline-from", metavar="DIR", help="the baseline's binaries, already built in DIR")
    ap.add_argument("--xz-level", type=int, default=6, help="xz's compression level (0: fast, for the self-test)")
    a = ap.parse_args()
    if a.check:
        names = sorted(f[:-5] for f in os.listdir(STUDIES) if f.endswith(".json"))
        bad = [line for n in names for line in check(n, load(n))]
        print("\n".join(bad) or f"{len(names)} studies: ok")
        return 1 if bad else 0
    if not a.studies:
        ap.error("name at least one study (bench/studies/*.json)")
    specs = {n: load(n) for n in a.studies}
    bad = [line for n, s in specs.items() for line in check(n, s)]
    if bad:
        sys.exit("\n".join(bad))
    targets = sorted({b for s in specs.values() for b in s["binaries"]})
    extras = sorted({e for s in specs.values() for e in s.get("extras", [])})

    stage = tempfile.mkdtemp(prefix="deltaserve-bundle-")
    try:
        build_dir = a.from_build or a.build
        built = targets if a.from_build else build(ROOT, a.build, targets, a.jobs)
        stage_binaries(build_dir, built, os.path.join(stage, "bin"), os.path.join(stage, "lib"))
        with open(os.path.join(stage, "COMMIT"), "w") as f:
            f.write(commit_line(ROOT) + "\n")
        if a.baseline_from:
            # Only A/B steps run the baseline: binaries it lacks (a test program) are left out.
            have = [t for t in targets if os.path.exists(os.path.join(a.baseline_from, t))]
            for t in sorted(set(targets) - set(have)):
                print(f"bundle: {t} is not in {a.baseline_from}; the baseline goes without it")
            stage_binaries(a.baseline_from, have, os.path.join(stage, "base", "bin"), os.path.join(stage, "lib"))
            with open(os.path.join(stage, "base", "COMMIT"), "w") as f:
                f.write(f"binaries of {os.path.basename(os.path.abspath(a.baseline_from))}\n")
        elif a.baseline:
            src = os.path.join(ROOT, ".devbuild", "baseline-src")
            if not os.path.isdir(src):
                subprocess.run(["git", "worktree", "add", "--detach", src, a.baseline], cwd=ROOT, check=True)
            else:
                subprocess.run(["git", "checkout", "--detach", a.baseline], cwd=src, check=True)
            base_build = os.path.join(src, "build-cuda")
            base_built = build(src, base_build, targets, a.jobs)
            stage_binaries(base_build, base_built, os.path.join(stage, "base", "bin"), os.path.join(stage, "lib"))
            with open(os.path.join(stage, "base", "COMMIT"), "w") as f:
                f.write(commit_line(src) + "\n")
        for e in extras:
            src = extra_source(e)
            if not src or not os.path.exists(src):
                print(f"bundle: extra {e} not found ({src}); the steps that need it will fail")
                continue
            to = os.path.join(stage, "extras", e)
            if os.path.isdir(src):
                shutil.copytree(src, to, ignore=shutil.ignore_patterns("__pycache__", ".git"))
            else:
                os.makedirs(os.path.dirname(to), exist_ok=True)
                shutil.copy(src, to)
        with open(os.path.join(stage, "STUDIES"), "w") as f:
            f.write("\n".join(a.studies) + "\n")
        os.makedirs(a.dest, exist_ok=True)
        out = os.path.join(a.dest, "bundle.tar.xz")
        # One xz stream with a dictionary wider than a binary: every binary links the same CUDA
        # library, so the second copy of it compresses to almost nothing (threaded xz cuts the
        # stream into blocks that cannot see each other).
        dict_mib = 128 if a.xz_level > 0 else 1
        subprocess.run(f"tar -C '{stage}' -cf - . | xz -T1 --lzma2=preset={a.xz_level},dict={dict_mib}MiB > '{out}'",
                       shell=True, check=True)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    # The device tool's limit is 64 MB (10^6 bytes: a 66.7 MB call was refused) for the tree and
    # the carried paths together.
    size = os.path.getsize(out) / 1e6
    rel = os.path.relpath(a.dest, ROOT)
    tree = tracked_tree_mb(ROOT)
    print(f"bundle: {out} ({size:.1f} MB; with the working tree's {tree:.1f} MB, {size + tree:.1f} of the 64 MB "
          "the device tool carries)")
    if size + tree > 63.5:
        print("bundle: too large to carry: bundle fewer studies at once")
    print(f"on the device, carrying {rel}: " + "; ".join(f"python3 bench/run_study.py {n}" for n in a.studies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
