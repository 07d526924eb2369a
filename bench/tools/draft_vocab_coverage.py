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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenize_files import tokenize_files  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenize", required=True, help="the tokenize program (programs/tokenize)")
    ap.add_argument("--tokenizer", required=True, help="a model directory or tokenizer.json(.gz)")
    ap.add_argument("--sizes", default="16384,32768,65536")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    print("| text | tokens | " + " | ".join(f"< {s:,}" for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    for path, ids in tokenize_files(a.tokenize, a.tokenizer, a.files):
        if not ids:
            print(f"draft_vocab_coverage: {path}: no tokens", file=sys.stderr)
            continue
        shares = [sum(1 for i in ids if i < s) / len(ids) for s in sizes]
        print(f"| {path} | {len(ids):,} | " + " | ".join(f"{x:.3f}" for x in shares) + " |")


if __name__ == "__main__":
    main()
