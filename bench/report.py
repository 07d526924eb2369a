#!/usr/bin/env python3
"""docs/benchmarks.md, generated from the result files in bench/results/.

    python3 bench/report.py                  write docs/benchmarks.md
    python3 bench/report.py --check          exit 1 unless docs/benchmarks.md is what this writes (a CTest)
    python3 bench/report.py update OUT...    take a study's new measurements into bench/results/
    python3 bench/report.py check-result FILE [--program P] [--rows N]
                                             check a benchmark program's --json file (a CTest)

bench/results/COMPONENT.json holds one component's table: {"component", "order", "note",
"rows": [...]}, each row one metric's current measurement:

    metric, value (a number, or null when the row is a range or a verdict), unit, also (the
    run's other figures), of_floor + floor (a fraction of which floor), peer (the peer's figure
    and ours against it), gpu, date (UTC), commit, study (bench/studies/STUDY.json measures it
    again) or command (a program run here), log (the heading of the dated log section that holds
    the run), source ("log": transcribed from the log; "study": taken from a study's output;
    "command": the output of the row's command, run by hand)

One row per metric: a new measurement replaces the row (`update` does it for the metrics a
study's "report" list names); the log keeps the history. A metric no run has measured yet is
named in a study's "report" with the component it goes to ("component": the file's name
without .json); its row appears at the first `update`. A component without rows is left out
of the report.
"""
import argparse
import json
import os
import re
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
STUDIES = os.path.join(ROOT, "bench", "studies")
REPORT = os.path.join(ROOT, "docs", "benchmarks.md")
LOG = "bench-log/2026-11-30-to-2026-12-03.md"  # relative to docs/
ROW_KEYS = ["metric", "value", "unit", "also", "of_floor", "floor", "peer", "gpu", "date", "commit", "study", "command",
            "log", "source"]
REQUIRED = ["metric", "value", "unit", "gpu", "date", "commit", "source"]
LINKING = ["README.md", "docs/architecture.md", "docs/bench-log/attention-lab.md", "bench/README.md"]


def read(rel):
    path = os.path.join(ROOT, rel)
    return open(path).read() if os.path.exists(path) else ""


def anchors(markdown):
    """GitHub's anchor of every heading of a markdown text: {heading text: anchor}."""
    out, seen = {}, {}
    in_code = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"^#{1,6} (.*?)\s*$", line)
        if not m:
            continue
        text = m.group(1)
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.setdefault(text, slug if n == 0 else f"{slug}-{n}")
    return out


def load_components():
    comps = []
    for name in sorted(os.listdir(RESULTS)):
        if name.endswith(".json"):
            with open(os.path.join(RESULTS, name)) as f:
                comps.append((name, json.load(f)))
    comps.sort(key=lambda c: (c[1]["order"], c[0]))
    return comps


def problems(comps, log_anchors):
    studies = {f[:-5] for f in os.listdir(STUDIES) if f.endswith(".json")}
    bad = []
    # A metric is a row's key (`update` finds it by name): one row per name across the report,
    # and every metric a study says it measures has its row, or names the component its first
    # measurement joins.
    every = [r.get("metric") for _, c in comps for r in c.get("rows", [])]
    bad += [f"metric {m!r} has {every.count(m)} rows" for m in sorted(set(every)) if every.count(m) > 1]
    files = {name[:-5] for name, _ in comps}
    for st in sorted(studies):
        with open(os.path.join(STUDIES, st + ".json")) as f:
            for m in json.load(f).get("report", []):
                if m.get("component") is not None and m["component"] not in files:
                    bad.append(f"study {st}: reports {m.get('metric')!r} into bench/results/{m['component']}.json, "
                               f"which does not exist")
                elif m.get("metric") not in every and m.get("component") is None:
                    bad.append(f"study {st}: reports {m.get('metric')!r}, which no row of bench/results has "
                               f"(a new metric names its \"component\")")
    for name, c in comps:
        for k in ("component", "order", "rows"):
            if k not in c:
                bad.append(f"{name}: no {k!r}")
        metrics = set()
        for r in c.get("rows", []):
            where = f"{name}: {r.get('metric', '?')!r}"
            bad += [f"{where}: no {k!r}" for k in REQUIRED if k not in r]
            bad += [f"{where}: unknown key {k!r}" for k in r if k not in ROW_KEYS]
            if r.get("metric") in metrics:
                bad.append(f"{where}: two rows of one metric (one current row per metric; the log keeps history)")
            metrics.add(r.get("metric"))
            if r.get("value") is not None and not isinstance(r["value"], (int, float)):
                bad.append(f"{where}: value must be a number or null")
            if r.get("value") is None and not r.get("also") and not r.get("peer"):
                bad.append(f"{where}: a row without a value says what was measured in 'also' or 'peer'")
            if "of_floor" in r and not (0 < r["of_floor"] <= 1.5 and r.get("floor")):
                bad.append(f"{where}: of_floor is a fraction of a named floor")
            if not re.match(r"^\d{4}-\d\d-\d\d( \d\d:\d\d)?$", r.get("date", "")):
                bad.append(f"{where}: date YYYY-MM-DD [HH:MM] (UTC)")
            if not (r.get("study") or r.get("command")):
                bad.append(f"{where}: a study or a command that measures it")
            if r.get("study") and r["study"] not in studies:
                bad.append(f"{where}: no study {r['study']!r} in bench/studies")
            if r.get("source") == "log" and r.get("log") not in log_anchors:
                bad.append(f"{where}: log heading {r.get('log')!r} is not a heading of docs/{LOG}")
    return bad


def number(v):
    if isinstance(v, int) or (isinstance(v, float) and v.is_integer() and abs(v) >= 100):
        return f"{int(v):,}"
    return f"{v:,}"


def cell(text):
    return str(text).replace("|", "\\|")


def render(comps, log_anchors):
    comps = [(name, c) for name, c in comps if c["rows"]]  # nothing measured yet: no section
    out = [
        "# Benchmarks",
        "",
        "<!-- Generated by bench/report.py from bench/results/*.json: edit those, then run "
        "`python3 bench/report.py` (CTest bench_report checks this file is its output). -->",
        "",
        "The current figure of every measured metric, one row each, with the GPU, date (UTC) and commit",
        "of its run and the study that measures it again (bench/README.md: `python3 bench/bundle.py",
        "STUDY` on the workstation, `python3 bench/run_study.py STUDY` on the GPU machine). A metric",
        f"links to the section of [the dated log]({LOG}) that holds its run: the method, the raw",
        "tables, the comparisons made in the same call and the reasoning; earlier figures stay there,",
        "never here. \"of floor\" is the figure over the hardware floor named beside it, measured by the",
        "same program in the same run; \"peer\" is the named peer's figure and ours against it.",
        "",
        "Contents: " + " · ".join(f"[{c['component']}](#{anchors('# ' + c['component'])[c['component']]})"
                                  for _, c in comps if c["rows"]),
    ]
    for _, c in comps:
        if not c["rows"]:
            continue
        out += ["", f"## {c['component']}", ""]
        if c.get("note"):
            out += [c["note"], ""]
        out += ["| metric | value | of floor | peer | GPU | date | commit | measured by |",
                "|---|---|---|---|---|---|---|---|"]
        for r in c["rows"]:
            metric = cell(r["metric"])
            if r.get("log") in log_anchors:
                metric = f"[{metric}]({LOG}#{log_anchors[r['log']]})"
            sep = "" if r["unit"].startswith("x") else " "  # 2.6x faster, 210 tok/s
            value = f"{number(r['value'])}{sep}{r['unit']}".strip() if r.get("value") is not None else ""
            if r.get("also"):
                value = f"{value} ({r['also']})" if value else r["also"]
            floor = f"{100 * r['of_floor']:.0f}% ({r['floor']})" if "of_floor" in r else ""
            how = f"study `{r['study']}`" if r.get("study") else f"`{r['command']}`"
            out.append(f"| {metric} | {cell(value)} | {floor} | {cell(r.get('peer', ''))} | {r['gpu']} | {r['date']} | "
                       f"{r['commit']} | {how} |")
    return "\n".join(out) + "\n"


def generate():
    with open(os.path.join(ROOT, "docs", LOG)) as f:
        log_anchors = anchors(f.read())
    comps = load_components()
    bad = problems(comps, log_anchors)
    if bad:
        sys.exit("bench/results has problems:\n" + "\n".join(bad))
    return render(comps, log_anchors)


# ---- a study's measurements into the rows


def study_values(out_dir):
    """{(step, client or metric): (value, row of the result file or None, result file)} of a study's output."""
    manifest = json.load(open(os.path.join(out_dir, "study.json")))
    raw = tempfile.mkdtemp(prefix="deltaserve-report-")
    with tarfile.open(os.path.join(out_dir, "results.tar.gz")) as t:
        t.extractall(raw)
    found = {}
    for step in manifest["steps"]:
        for f in step.get("files", []):
            if f.get("variant", "new") != "new":
                continue
            path = os.path.join(raw, manifest["study"], os.path.basename(f.get("json", "")))
            if not f.get("json") or not os.path.exists(path):
                continue
            j = json.load(open(path))
            if "client" in f:
                found[(step["name"], f["client"])] = (j, None)
            for r in j.get("results", []):
                found[(step["name"], r["metric"])] = (j, r)
    return manifest, found


def update(out_dirs):
    comps = dict(load_components())
    changed = 0
    for out_dir in out_dirs:
        manifest, found = study_values(out_dir)
        spec = json.load(open(os.path.join(STUDIES, manifest["study"] + ".json")))
        date = manifest["machine"].get("date", "")[:16]
        card = manifest["machine"].get("gpu", "")
        gpu = next((k for k in ("H200", "H100") if k in card), card.split(",")[0])
        for m in spec.get("report", []):
            key = (m["step"], m.get("client") or m.get("select"))
            if key not in found:
                print(f"update: {manifest['study']}: no {key} in {out_dir}")
                continue
            j, r = found[key]
            new = {"metric": m["metric"]}
            if r is None:  # a bench_serve result
                new.update(value=round(j["output_throughput"], 1), unit="output tok/s",
                           also=f"TTFT p50 {j['median_ttft_ms']:.0f} ms, TPOT p50 {j['median_tpot_ms']:.1f} ms")
            else:
                v = r["value"]
                new.update(value=round(v) if v >= 100 else round(v, 1) if v >= 10 else round(v, 3), unit=r["unit"])
                if "of_floor" in r:
                    new.update(of_floor=round(r["of_floor"], 2), floor=r.get("floor", ""))
                if m.get("peer_step") and (m["peer_step"], m["select"]) in found:
                    base = found[(m["peer_step"], m["select"])][1]["value"]
                    if m.get("peer_name"):  # a peer program: the peer column, with its figure
                        new["peer"] = f"{r['value'] / base:.2f}x {m['peer_name']} ({base:.4g} {r['unit']})"
                    else:
                        new["also"] = f"{r['value'] / base:.2f}x {m['peer_step']}"
            head, plus, local = manifest["commit"].partition("+")
            new.update(gpu=gpu, date=date, commit=head[:7] + plus + local,
                       study=manifest["study"], source="study")
            for name, c in comps.items():
                for i, row in enumerate(c["rows"]):
                    if row["metric"] == m["metric"]:
                        c["rows"][i] = new
                        changed += 1
                        break
                else:
                    continue
                break
            else:
                if m.get("component") in {n[:-5] for n in comps}:
                    comps[m["component"] + ".json"]["rows"].append(new)
                    changed += 1
                else:
                    print(f"update: no row {m['metric']!r} in bench/results (add it to a component first)")
    for name, c in comps.items():
        with open(os.path.join(RESULTS, name), "w") as f:
            f.write(json.dumps(c, indent=1) + "\n")
    print(f"update: {changed} rows; now run `python3 bench/report.py`")


def check_result(path, program, rows):
    j = json.load(open(path))
    bad = [f"no {k!r}" for k in ("program", "command", "date", "version", "commit", "results") if k not in j]
    if program and j.get("program") != program:
        bad.append(f"program {j.get('program')!r}, expected {program!r}")
    for r in j.get("results", []):
        if list(r)[:3] != ["metric", "value", "unit"] or not isinstance(r["value"], (int, float)):
            bad.append(f"row {r} does not start with metric, value (a number), unit")
    if rows is not None and len(j.get("results", [])) != rows:
        bad.append(f"{len(j.get('results', []))} rows, expected {rows}")
    if bad:
        sys.exit(f"{path}: " + "; ".join(bad))
    print(f"{path}: {len(j['results'])} rows of {j['program']}: ok")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare docs/benchmarks.md with the generator's output")
    sub = ap.add_subparsers(dest="cmd")
    up = sub.add_parser("update", help="take a study's measurements (its OUT folder) into bench/results")
    up.add_argument("out", nargs="+")
    cr = sub.add_parser("check-result", help="check a benchmark program's result file")
    cr.add_argument("file")
    cr.add_argument("--program")
    cr.add_argument("--rows", type=int)
    a = ap.parse_args()
    if a.cmd == "update":
        return update(a.out)
    if a.cmd == "check-result":
        return check_result(a.file, a.program, a.rows)
    text = generate()
    if a.check:
        current = open(REPORT).read() if os.path.exists(REPORT) else ""
        if current != text:
            sys.exit("docs/benchmarks.md is not the output of bench/report.py: run `python3 bench/report.py` "
                     "(edit bench/results/*.json, never the report)")
        # The README and the docs link the report's tables: every such link must land.
        have = set(anchors(text).values())
        broken = [f"{doc}: #{m}" for doc in LINKING for m in re.findall(r"benchmarks\.md#([\w-]+)", read(doc))
                  if m not in have]
        if broken:
            sys.exit("links into docs/benchmarks.md that name no heading:\n" + "\n".join(broken))
        print(f"docs/benchmarks.md: generated, {text.count(chr(10))} lines")
        return 0
    with open(REPORT, "w") as f:
        f.write(text)
    print(f"wrote docs/benchmarks.md ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
