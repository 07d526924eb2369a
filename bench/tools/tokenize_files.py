"""Token ids of text files through our own tokenize program (programs/tokenize), for the
drafting-vocabulary tools (draft_vocab_coverage.py, make_draft_token_map.py).

    for path, ids in tokenize_files(tokenize_program, tokenizer, paths): ...

`tokenizer` is a model directory or a tokenizer.json, or a .gz of one (unpacked to a temporary
file for the duration).
"""
import contextlib
import gzip
import json
import os
import shutil
import subprocess
import tempfile


@contextlib.contextmanager
def _plain(tokenizer):
    if not tokenizer.endswith(".gz"):
        yield tokenizer
        return
    tmp = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    try:
        with gzip.open(tokenizer, "rb") as f:
            shutil.copyfileobj(f, tmp)
        tmp.close()
        yield tmp.name
    finally:
        os.unlink(tmp.name)


def tokenize_files(tokenize, tokenizer, paths):
    """Yields (path, ids) for each file, read as UTF-8 (bad bytes replaced)."""
    with _plain(tokenizer) as plain:
        for path in paths:
            with open(path, encoding="utf-8", errors="replace") as f:
                line = json.dumps({"text": f.read()}) + "\n"
            out = subprocess.run([tokenize, "--tokenizer", plain], input=line, capture_output=True, text=True,
                                 check=True).stdout
            yield path, json.loads(out.strip().splitlines()[-1])["ids"]
