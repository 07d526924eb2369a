#!/usr/bin/env python3
"""Writes a token map for MTP drafting: the N most frequent token ids of a corpus.

    python3 bench/tools/make_draft_token_map.py --tokenize build-rel/tokenize \
        --tokenizer MODEL_DIR --size 65536 --out map.json CORPUS_FILE...

serve --speculative-config '{"method": "mtp", "num_speculative_tokens": 3,
"draft_token_map": "map.json"}' then drafts only among those ids (the module's lm_head reads
N gathered rows instead of the vocabulary's), like SGLang's --speculative-token-map. Where a
traffic's tokens are not the vocabulary's first ids (CJK text: bench-log 2026-12-07, "How much
of a text a pruned drafting vocabulary covers"), a map counted from that traffic covers what
draft_vocab_size's prefix misses. Tokenizes each file with our own tokenizer program (one
line of JSON a file), counts ids, keeps the `--size` most frequent (ties: the lower id), and
fills up to `--size` with the lowest ids not yet taken; prints the corpus's coverage by the map.
Ids are written sorted, so the model gathers them in few copies.
"""
import argparse
import collections
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenize_files import tokenize_files  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenize", required=True, help="the tokenize program (programs/tokenize)")
    ap.add_argument("--tokenizer", required=True, help="a model directory or tokenizer.json(.gz)")
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--vocab", type=int, default=0, help="the model's vocabulary (fill ids stay below it; 0: "
                    "the largest id seen + 1)")
    ap.add_argument("--out", required=True)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    counts = collections.Counter()
    for _, ids in tokenize_files(a.tokenize, a.tokenizer, a.files):
        counts.update(ids)
    total = sum(counts.values())
    ranked = sorted(counts, key=lambda t: (-counts[t], t))[: a.size]
    chosen = set(ranked)
    vocab = a.vocab or (max(counts) + 1 if counts else a.size)
    fill = (t for t in range(vocab) if t not in chosen)
    while len(chosen) < min(a.size, vocab):
        chosen.add(next(fill))
    covered = sum(counts[t] for t in chosen)
    with open(a.out, "w") as f:
        json.dump(sorted(chosen), f)
    print(f"make_draft_token_map: {len(chosen)} ids to {a.out}; {len(counts)} distinct ids in {total} tokens, "
          f"{covered / max(total, 1):.3f} of them in the map")


if __name__ == "__main__":
    main()
