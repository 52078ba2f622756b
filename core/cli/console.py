"""What every verb of ``python -m core`` shares: a tqdm progress bar, argparse that reports a usage error in one
line, whole numbers >= 1, ``--option key=value`` pairs, the ``--dataset`` and ``--backend`` arguments, the
two-step deletion of the ``delete`` verbs (``confirmed_deletion``), and an output free of control characters
(``printable_stdout``: stored texts are printed as they are, but never an ESC, OSC or BEL a terminal would run)."""
from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm

from core.data.datasets import DEFAULT_DATASET
from core.data.text import strip_control
from core.errors import StudioError


_ASCII_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f]")  # what strip_control drops from ASCII text


def printable(text: str) -> str:
    """``text`` without control and format characters (ESC, BEL, C1, bidi overrides); tab and newline kept."""
    if text.isascii() and _ASCII_CONTROL.search(text) is None:
        return text  # the common case, without a look at each character
    return strip_control(text)


class PrintableStream:
    """A text stream writing through another one, each write through ``printable``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@contextmanager
def printable_stdout() -> Iterator[None]:
    """While the block runs, what is printed to ``sys.stdout`` has no control characters (a verb prints stored
    query texts and names: an imported ESC sequence must not reach the terminal)."""
    before = sys.stdout
    sys.stdout = PrintableStream(before)
    try:
        yield
    finally:
        sys.stdout = before


class TqdmProgress:
    """A ``progress(fraction, message)`` callback drawing one tqdm bar."""

    def __init__(self, desc: str, lazy: bool = False) -> None:
        """``lazy``: draw the bar only when something reports progress (a load that finds everything built
        prints nothing)."""
        self.desc, self.bar, self.done = desc, None, 0
        if not lazy:
            self._open()

    def _open(self) -> None:
        self.bar = tqdm(total=1000, desc=self.desc, unit="‰", leave=True, dynamic_ncols=True,
                        bar_format="{l_bar}{bar}| {elapsed}<{remaining} {postfix}")

    def __call__(self, fraction: float, message: str) -> None:
        if self.bar is None:
            self._open()
        target = int(max(0.0, min(1.0, fraction)) * 1000)
        if target > self.done:
            self.bar.update(target - self.done)
            self.done = target
        self.bar.set_postfix_str(message[-60:], refresh=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def parse_options(pairs: list[str]) -> dict:
    """``--option key=value`` pairs as a dict, numbers read as int or float."""
    out = {}
    for item in pairs or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise StudioError(f"--option takes key=value, got {item!r}")
        try:
            out[key] = int(value)
        except ValueError:
            try:
                out[key] = float(value)
            except ValueError:
                out[key] = value
    return out


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (``-k -3`` and ``--k 0`` are refused)."""
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error as one ``error:`` line (exit code 2), like every other error."""

    def error(self, message: str):  # noqa: ANN201 - argparse's signature
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def with_dataset(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--dataset`` (default ``DEFAULT_DATASET``) to a verb's parser."""
    p.add_argument("--dataset", default=DEFAULT_DATASET, help=f"dataset name (default {DEFAULT_DATASET})")
    return p


def backend_options(args: argparse.Namespace) -> dict:
    """``--backend milvus [--milvus-index hnsw]`` as loader options (nothing for the default faiss)."""
    if not args.backend or args.backend == "faiss":
        return {}
    return {"backend": args.backend, "milvus_index": args.milvus_index}


def confirmed_deletion(plan, confirm: str | None, delete: Callable[..., object],  # noqa: ANN001
                       error: type[StudioError], again: str) -> int:
    """A ``delete`` verb on a ``core.judging.deletion`` plan: without ``--confirm`` print what would go and refuse
    with ``error`` (exit 2, nothing deleted; ``again`` says how to repeat it); with it, ``delete(confirm=...)``
    and print what went and its audit record."""
    if confirm is None:
        print(f"would delete {plan.describe()}")
        raise error(f"nothing was deleted: repeat with --confirm {again}")
    record = delete(confirm=confirm)
    print(f"deleted {plan.describe()}; audit: {record.actor} at {record.at:%Y-%m-%d %H:%M:%S} UTC")
    return 0
