#!/usr/bin/env python3
"""Two checks of the repository's house rules (CTest repo_index, so CI runs them):

* every file under scripts/ and bench/ is indexed: its path relative to the folder (or its name
  without the extension, as studies are named) appears in backquotes in that folder's README.md,
  or its folder does as `DIR/*.EXT` (bench/results/*.json);
* no tracked file holds an absolute path of one machine (a path under the root folders home,
  root, work, tmp, mnt, opt, Users or scratch): scripts take their paths from the checkout, the
  environment or the system's temporary directory. docs/bench-log/ is exempt: the dated log keeps its commands
  as they were run.

    python3 scripts/check_repo.py [ROOT]
"""
import os
import re
import subprocess
import sys

INDEXED = ("scripts", "bench")
MACHINE_PATH = re.compile(r"(?:^|[^\w.~$/-])/(?:home|root|work|tmp|mnt|opt|Users|scratch)/")
EXEMPT = ("docs/bench-log/",)


def tracked(root):
    r = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True)
    if r.returncode == 0:
        return [f for f in r.stdout.splitlines() if os.path.isfile(os.path.join(root, f))]
    out = []  # not a git checkout: every file but the build folders
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
        out += [os.path.relpath(os.path.join(d, f), root) for f in files]
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = tracked(root)
    bad = []
    for folder in INDEXED:
        readme_path = os.path.join(root, folder, "README.md")
        readme = open(readme_path).read() if os.path.exists(readme_path) else ""
        for f in files:
            if not f.startswith(folder + "/") or f == f"{folder}/README.md" or "__pycache__" in f:
                continue
            rel = f[len(folder) + 1:]
            glob = f"{os.path.dirname(rel)}/*{os.path.splitext(rel)[1]}"
            stem = os.path.splitext(os.path.basename(rel))[0]
            named = f"`{rel}`" in readme or f"`{stem}`" in readme  # a study is named as `serve_9b`
            if not named and (os.path.dirname(rel) == "" or f"`{glob}`" not in readme):
                bad.append(f"{f}: not indexed in {folder}/README.md (name it there as `{rel}`)")
    for f in files:
        if f.startswith(EXEMPT):
            continue
        try:
            text = open(os.path.join(root, f), encoding="utf-8").read()
        except (UnicodeDecodeError, OSError):
            continue  # binary
        for n, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                bad.append(f"{f}:{n}: an absolute path of one machine: {line.strip()[:120]}")
    print("\n".join(bad) or f"repository index and paths: ok ({len(files)} files)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
