#!/usr/bin/env python3
"""What share of a text's tokens a pruned MTP drafting vocabulary can propose.

    python3 bench/tools/draft_vocab_coverage.py --tokenize build-rel/tokenize \
        --tokenizer DIR_OR_TOKENIZER_JSON [--sizes 16384,32768,65536] FILE...

`draft_vocab_size` N (scheduler/speculative_config.h) drafts only among token ids [0, N): a
position whose true next token lies past N is never drafted right, so the share of a text's
tokens below N bounds the acceptance a pruned vocabulary keeps (per position, roughly
acceptance x share). Tokenizes each FILE with our own tokenizer program and prints, per file,
its token count and the share below each size. A .gz tokenizer.json is unpacked to a
temporary file first.
"""
import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile


def encode(tokenize, tokenizer, text):
    line = json.dumps({"text": text}) + "\n"
    out = subprocess.run([tokenize, "--tokenizer", tokenizer], input=line, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ids"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenize", required=True, help="the tokenize program (programs/tokenize)")
    ap.add_argument("--tokenizer", required=True, help="a model directory or tokenizer.json(.gz)")
    ap.add_argument("--sizes", default="16384,32768,65536")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    tmp = None
    tokenizer = a.tokenizer
    if tokenizer.endswith(".gz"):
        tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
        with gzip.open(tokenizer, "rb") as f:
            shutil.copyfileobj(f, tmp)
        tmp.close()
        tokenizer = tmp.name
    try:
        print("| text | tokens | " + " | ".join(f"< {s:,}" for s in sizes) + " |")
        print("|---|---|" + "---|" * len(sizes))
        for path in a.files:
            with open(path, encoding="utf-8", errors="replace") as f:
                ids = encode(a.tokenize, tokenizer, f.read())
            if not ids:
                print(f"draft_vocab_coverage: {path}: no tokens", file=sys.stderr)
                continue
            shares = [sum(1 for i in ids if i < s) / len(ids) for s in sizes]
            print(f"| {path} | {len(ids):,} | " + " | ".join(f"{x:.3f}" for x in shares) + " |")
    finally:
        if tmp:
            os.unlink(tmp.name)


if __name__ == "__main__":
    main()
