"""make_reference.py (the shared HF fixture generator) loaded as a module, for the fixture
makers beside this file that reuse its references()."""
import importlib.util
import json
import os
import sys
import tempfile


def load_make_reference(path):
    """make_reference.py as a module. It reads its tokenizer assets at import, which
    references() does not need: a stub stands in when they are absent."""
    if not path or not os.path.exists(path):
        sys.exit(f"error: make_reference.py not found at {path!r} (give --make-reference or MAKE_REFERENCE)")
    assets = os.environ.get("ASSETS", ".assets")
    if not os.path.exists(os.path.join(assets, "qwen3-tokenizer_config.json")):
        assets = tempfile.mkdtemp(prefix="fixture-assets-")
        with open(os.path.join(assets, "qwen3-tokenizer_config.json"), "w") as f:
            json.dump({"chat_template": ""}, f)
        os.environ["ASSETS"] = assets
    spec = importlib.util.spec_from_file_location("make_reference", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Checks:
    """A fixture maker's cross-checks, reported rather than fatal: check(what, fn) runs fn (a
    list of problems; an exception counts as one, since an API difference of the machine's torch
    must not cost the fixture), prints a WARNING per problem and one 'checked:' line, and keeps
    the problems in .problems."""

    def __init__(self):
        self.problems = []

    def __call__(self, what, fn):
        try:
            bad = fn()
        except Exception as e:
            bad = [f"could not check: {type(e).__name__}: {e}"]
        for b in bad:
            self.problems.append(f"{what}: {b}")
            print(f"WARNING: {what}: {b}")
        print(f"checked: {what}: {'ok' if not bad else f'{len(bad)} problem(s)'}")
