#!/usr/bin/env python3
"""Runs several GPU studies in one device call, each within its own deadline, and packs their
outputs into two files.

    python3 bench/run_studies.py gpu_engine:170 int4_fixture:100 video_fixture:70 [--bundle DIR]

Why: a device call has one machine start and at most 10 minutes, so the studies that one bundle
carries (`bench/bundle.py A B C`) belong in one call; but the device tool returns at most 8
files, and run_study.py writes 3 a study. Each study's output folder (summary.md, study.json,
results.tar.gz: run_study.py) goes into OUT/studies.tar.gz, one folder a study; OUT/summary.md
is their summaries one after another (also printed). Here, after the call:
`tar -xzf OUT/studies.tar.gz -C DIR` and `python3 bench/report.py update DIR/NAME ...`.
Only the outputs are packed, never the scratch folder (its checkpoints are gigabytes).
"""
import argparse
import os
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("studies", nargs="+", metavar="NAME:SECONDS", help="a study and its deadline")
    ap.add_argument("--bundle", help="the carried bundle folder (run_study.py's default otherwise)")
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(HERE, "..", ".devbuild", "out"))
    a = ap.parse_args()
    plan = []
    for item in a.studies:
        name, _, seconds = item.partition(":")
        if not os.path.exists(os.path.join(HERE, "studies", name + ".json")) or not seconds.isdigit():
            sys.exit(f"run_studies: {item!r}: expected NAME:SECONDS with NAME in bench/studies")
        plan.append((name, int(seconds)))
    os.makedirs(a.out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="deltaserve-studies-")
    summaries = []
    for name, seconds in plan:
        cmd = [sys.executable, os.path.join(HERE, "run_study.py"), name, "--deadline", str(seconds),
               "--out", os.path.join(work, name)]
        if a.bundle:
            cmd += ["--bundle", a.bundle]
        with open(os.path.join(work, name + ".log"), "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT).returncode
        path = os.path.join(work, name, "summary.md")
        text = open(path).read() if os.path.exists(path) else f"(no summary: see {name}.log)\n"
        summaries.append(f"## {name} (deadline {seconds} s, exit {rc})\n\n{text}")
        # Packed after each study: a call cut short keeps what finished.
        with tarfile.open(os.path.join(a.out, "studies.tar.gz"), "w:gz") as t:
            for entry in sorted(os.listdir(work)):
                t.add(os.path.join(work, entry), arcname=entry)
        with open(os.path.join(a.out, "summary.md"), "w") as f:
            f.write("\n".join(summaries))
    print("\n".join(summaries))


if __name__ == "__main__":
    main()
