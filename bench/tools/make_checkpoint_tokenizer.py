#!/usr/bin/env python3
"""Gives a random-weight checkpoint (make_random_checkpoint.py) a tokenizer the server can serve it with.

    python3 bench/tools/make_checkpoint_tokenizer.py --out CHECKPOINT_DIR

A random model emits any id below its vocab_size (248,320 for Qwen3.5), so the tokenizer
must spell every one of them, or streamed replies lose text and chunks. This writes, into
the checkpoint directory: tokenizer.json = the bundled Qwen3 tokenizer
(tests/data/qwen3-tokenizer-ref: 151,643 BPE tokens + 26 added ones) laid out as Qwen3.5's
(BPE tokens below 248,044, the added tokens from 248,044 on: <|endoftext|> 248044,
<|im_start|> 248045, <|im_end|> 248046, which is what the checkpoint's eos ids name), with
"filler" tokens spelling " tok<ID>" for every id Qwen3 lacks; tokenizer_config.json and
chat_template.jinja from the bundled tiny model. Filler tokens have no merges, so encoding
text never produces them; they only decode. For benchmarks only, like the checkpoint.
"""
import argparse
import gzip
import json
import os
import shutil



def repo_root():
    """The repository above this script, or the working directory (a staged copy of the script)."""
    for d in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."), os.getcwd()):
        if os.path.isdir(os.path.join(d, "tests", "data")):
            return d
    return os.getcwd()


ROOT = repo_root()
FIRST_ADDED = 248044  # Qwen3.5: ids of the added tokens start here


def build(base, vocab_size):
    vocab = dict(base["model"]["vocab"])
    taken = set(vocab)
    used_ids = set(vocab.values())
    added = []
    for i, tok in enumerate(sorted(base["added_tokens"], key=lambda t: t["id"])):
        added.append(dict(tok, id=FIRST_ADDED + i))
    added_ids = {t["id"] for t in added}
    for i in range(vocab_size):
        if i in used_ids or i in added_ids:
            continue
        spelling = "\u0120tok%d" % i  # byte-level for " tok<ID>"
        assert spelling not in taken, spelling
        vocab[spelling] = i
    out = dict(base)
    out["model"] = dict(base["model"], vocab=vocab)
    out["added_tokens"] = added
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="the checkpoint directory (its config.json gives vocab_size)")
    ap.add_argument("--base", default=os.path.join(ROOT, "tests/data/qwen3-tokenizer-ref/tokenizer.json.gz"))
    ap.add_argument("--template-dir", default=os.path.join(ROOT, "tests/data/tiny-qwen35"))
    args = ap.parse_args()
    with open(os.path.join(args.out, "config.json")) as f:
        cfg = json.load(f)
    vocab_size = cfg.get("text_config", cfg)["vocab_size"]
    with gzip.open(args.base, "rt", encoding="utf-8") as f:
        base = json.load(f)
    tok = build(base, vocab_size)
    with open(os.path.join(args.out, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
    for name in ("tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(args.template_dir, name), os.path.join(args.out, name))
    ids = set(tok["model"]["vocab"].values()) | {t["id"] for t in tok["added_tokens"]}
    assert ids == set(range(vocab_size)), "the tokenizer must spell every id below vocab_size"
    print("tokenizer: %d ids (%d BPE, %d added, %d filler) in %s" % (
        len(ids), len(base["model"]["vocab"]), len(tok["added_tokens"]),
        vocab_size - len(base["model"]["vocab"]) - len(tok["added_tokens"]), args.out))


if __name__ == "__main__":
    main()
