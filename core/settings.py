"""Every ``QRS_*`` environment variable, read in one place and typed.

``settings()`` returns a frozen :class:`Settings` built from the ``QRS_*`` variables of the environment. It is
read once and cached; when a ``QRS_*`` variable changes (tests set them with ``monkeypatch.setenv``) the next
call reads them again, so no caller holds a stale value. A value is parsed when its property is read, so a
malformed ``QRS_MILVUS_TIMEOUT`` fails where Milvus is used, with one line naming the variable
(:class:`SettingsError`), and leaves every other part of the app working.

``VARIABLES`` names each variable once, with its default and meaning; the README's table lists the same set
(tests/test_settings.py checks it), and no module outside this one reads a ``QRS_*`` variable.
The UI's ``.streamlit/secrets.toml`` (``[qrs]`` owners / trusted_header, ``[auth]`` OIDC) is read by Streamlit
(``ui.auth``); the environment variable wins over the secrets entry.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import StudioError

PREFIX = "QRS_"
DEFAULT_DB_LOCK_TIMEOUT = 10.0  # seconds a judgments write waits for the database lock
DEFAULT_PAGE_WAIT = 2.0  # seconds a page waits for a system's first load before drawing without it
MAX_DB_LOCK_TIMEOUT = 3600.0
DEFAULT_MILVUS_TIMEOUT = 5.0  # seconds to connect to Milvus
DEFAULT_MAX_TEXT_CHARS = 20_000  # longest text a dataset file may hold; QQP's longest is 756
DEFAULT_IMPORT_MAX_ROWS = 5_000_000  # rows (lines) one file of an import may hold
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class SettingsError(StudioError):
    """A malformed ``QRS_*`` value: names the variable, what it must be, and what it got."""


@dataclass(frozen=True)
class Variable:
    """One ``QRS_*`` variable as the README documents it."""

    name: str
    default: str
    meaning: str


VARIABLES: tuple[Variable, ...] = (
    Variable("QRS_VAR", "`var/` in the repository", "artifacts folder: indexes, checkpoints, caches, runs, "
             "status files, the judgments SQLite, user systems (tests point it at a temp folder)"),
    Variable("QRS_DATA", "`data/` in the repository", "folder of the bundled datasets"),
    Variable("QRS_DATASET", "`qqp-bimpm`", "the dataset the app opens with"),
    Variable("QRS_AUTOBUILD", "`1`", "`0` stops the app from building the missing default systems of its own "
             "dataset (`QRS_DATASET`) in the background; another dataset builds only from Home's button"),
    Variable("QRS_PAGE_WAIT", f"`{DEFAULT_PAGE_WAIT:g}`", "seconds a page waits for a system's first load in "
             "this server before drawing without it (the load goes on in the background and the page fills in; ≥ 0)"),
    Variable("QRS_DB_URL", "`sqlite:///$QRS_VAR/judgments.sqlite`", "SQLAlchemy URL of the judgments "
             "database (`sqlite:///PATH` or `postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE`)"),
    Variable("QRS_DB_LOCK_TIMEOUT", f"`{DEFAULT_DB_LOCK_TIMEOUT:g}`", "seconds a judgment write waits for the "
             f"database lock (0 < s ≤ {MAX_DB_LOCK_TIMEOUT:g})"),
    Variable("QRS_BACKEND", "`faiss`", "where the first stage is served from: `faiss` (in process) or `milvus`"),
    Variable("QRS_MILVUS_URI", "unset", "Milvus server or cluster (e.g. `http://127.0.0.1:19530`); unset: "
             "Milvus is not offered"),
    Variable("QRS_MILVUS_TOKEN", "empty", "Milvus token (`user:password`)"),
    Variable("QRS_MILVUS_TIMEOUT", f"`{DEFAULT_MILVUS_TIMEOUT:g}`", "seconds to connect to Milvus (> 0)"),
    Variable("QRS_MINILM_BACKEND", "`auto`", "MiniLM encoder: `auto` (ONNX Runtime fp32 on CPU, torch on CUDA), "
             "`torch`, `onnx`, `onnx-int8` (1.55× faster than fp32 here, test MAP@100 −0.0017, opt-in)"),
    Variable("QRS_DEVICE", "CUDA when present, else CPU", "torch device for training and encoding "
             "(e.g. `cpu`, `cuda:0`)"),
    Variable("QRS_MAX_TEXT_CHARS", f"`{DEFAULT_MAX_TEXT_CHARS}`", "longest text (characters) a dataset file "
             "may hold; longer ones are refused with file and line"),
    Variable("QRS_IMPORT_MAX_ROWS", f"`{DEFAULT_IMPORT_MAX_ROWS}`", "most rows (lines) one file of an imported "
             "dataset may hold; a larger file is refused in one line before anything is written"),
    Variable("QRS_TRUSTED_HEADER", "unset", "request header set by an authenticating reverse proxy "
             "(e.g. `X-Forwarded-User`); else `trusted_header` under `[qrs]` in `.streamlit/secrets.toml`"),
    Variable("QRS_OWNERS", "unset", "comma-separated campaign owners; else `owners` under `[qrs]` in "
             "`.streamlit/secrets.toml`"),
    Variable("QRS_RESEARCHERS", "unset", "comma-separated researchers who may open the ranking pages when login is "
             "on; else `researchers` under `[qrs]` in `.streamlit/secrets.toml`"),
    Variable("QRS_USER", "the OS login name", "the user's name in single-user mode (no login)"),
    Variable("QRS_ALLOWED_HOSTS", "`localhost,127.0.0.1,::1`", "comma-separated host names `serve.py` answers "
             "(the request's `Host`, port aside; `*` any): set the lab's name before `--server.address 0.0.0.0`; "
             "other hosts get a 400 (DNS rebinding)"),
    Variable("QRS_RAY_ADDRESS", "unset", "Ray cluster the heavy work (builds, encoding, experiments) joins "
             "(`HOST:6379` of `ray start --head`); unset: Ray is started here for the work and stopped after"),
    Variable("QRS_RAY_CPUS", "the machine's cores", "CPUs of the Ray started here (a build job reserves one per torch thread)"),
    Variable("QRS_BENCH_VAR", "`/tmp/qrs-bench-var`", "artifacts folder `bench/milvus_scale.py` uses when "
             "`QRS_VAR` holds no built glove-mean"),
)
NAMES = frozenset(v.name for v in VARIABLES)


@dataclass(frozen=True)
class Settings:
    """The ``QRS_*`` variables as set (``env``), each read through a typed property (unset: the default)."""

    env: Mapping[str, str] = field(default_factory=dict)

    def raw(self, name: str) -> str:
        """The stripped value of a known variable, "" when unset."""
        if name not in NAMES:
            raise KeyError(f"{name} is not a known setting (core.settings.VARIABLES)")
        return self.env.get(name, "").strip()

    def _number(self, name: str, default: float, must: str, ok) -> float:  # noqa: ANN001 - a predicate
        raw = self.raw(name)
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{name}: must be {must}, got {raw!r}") from None
        if not ok(value):
            raise SettingsError(f"{name}: must be {must}, got {raw!r}")
        return value

    # ------------------------------------------------------------------ folders
    @property
    def var(self) -> Path | None:
        """``QRS_VAR``: the artifacts folder, None for the default (``core.paths.var_dir``)."""
        return Path(self.raw("QRS_VAR")) if self.raw("QRS_VAR") else None

    @property
    def data(self) -> Path | None:
        """``QRS_DATA``: the bundled datasets folder, None for the default (``core.paths.data_dir``)."""
        return Path(self.raw("QRS_DATA")) if self.raw("QRS_DATA") else None

    # ------------------------------------------------------------------ app
    @property
    def dataset(self) -> str | None:
        return self.raw("QRS_DATASET") or None

    @property
    def autobuild(self) -> bool:
        raw = self.raw("QRS_AUTOBUILD").lower()
        if raw in ("", *_TRUE):
            return True
        if raw in _FALSE:
            return False
        raise SettingsError(f"QRS_AUTOBUILD: must be 1 or 0, got {raw!r}")

    @property
    def page_wait(self) -> float:
        """``QRS_PAGE_WAIT``: seconds a page waits for a first load (``ui.background_loads``)."""
        return self._number("QRS_PAGE_WAIT", DEFAULT_PAGE_WAIT, "a number of seconds ≥ 0", lambda v: v >= 0)

    # ------------------------------------------------------------------ judgments database
    @property
    def db_url(self) -> str | None:
        return self.raw("QRS_DB_URL") or None

    @property
    def db_lock_timeout(self) -> float:
        return self._number("QRS_DB_LOCK_TIMEOUT", DEFAULT_DB_LOCK_TIMEOUT,
                            f"a number of seconds between 0 and {MAX_DB_LOCK_TIMEOUT:g}",
                            lambda v: 0 < v <= MAX_DB_LOCK_TIMEOUT)

    # ------------------------------------------------------------------ serving
    @property
    def backend(self) -> str | None:
        """``QRS_BACKEND`` as set (the loader checks it against its backends), None when unset."""
        return self.raw("QRS_BACKEND") or None

    @property
    def milvus_uri(self) -> str:
        return self.raw("QRS_MILVUS_URI")

    @property
    def milvus_token(self) -> str:
        return self.env.get("QRS_MILVUS_TOKEN", "")

    @property
    def milvus_timeout(self) -> float:
        return self._number("QRS_MILVUS_TIMEOUT", DEFAULT_MILVUS_TIMEOUT, "a positive number of seconds",
                            lambda v: v > 0)

    @property
    def minilm_backend(self) -> str:
        return self.raw("QRS_MINILM_BACKEND") or "auto"

    @property
    def device(self) -> str | None:
        return self.raw("QRS_DEVICE") or None

    # ------------------------------------------------------------------ data files
    @property
    def max_text_chars(self) -> int:
        raw = self.raw("QRS_MAX_TEXT_CHARS")
        if not raw:
            return DEFAULT_MAX_TEXT_CHARS
        try:
            value = int(raw)
        except ValueError:
            raise SettingsError(f"QRS_MAX_TEXT_CHARS: must be a whole number of characters, got {raw!r}") from None
        if value < 1:
            raise SettingsError(f"QRS_MAX_TEXT_CHARS: must be at least 1, got {raw!r}")
        return value

    @property
    def import_max_rows(self) -> int:
        """``QRS_IMPORT_MAX_ROWS``: rows one file of an import may hold (``core.data.imports``)."""
        return int(self._number("QRS_IMPORT_MAX_ROWS", DEFAULT_IMPORT_MAX_ROWS, "a whole number of rows (1 or more)",
                                lambda v: v >= 1 and v == int(v)))

    # ------------------------------------------------------------------ users (the UI)
    @property
    def trusted_header(self) -> str:
        return self.raw("QRS_TRUSTED_HEADER")

    @property
    def owners(self) -> str:
        """``QRS_OWNERS`` as written (a comma list; ``ui.auth`` splits it), "" when unset."""
        return self.raw("QRS_OWNERS")

    @property
    def researchers(self) -> str:
        """``QRS_RESEARCHERS`` as written (a comma list), "" when unset."""
        return self.raw("QRS_RESEARCHERS")

    def people(self, role: str) -> str:
        """``owners`` or ``researchers`` as written in the environment, "" when unset."""
        return {"owners": self.owners, "researchers": self.researchers}[role]

    @property
    def user(self) -> str | None:
        return self.raw("QRS_USER") or None

    @property
    def allowed_hosts(self) -> tuple[str, ...]:
        """``QRS_ALLOWED_HOSTS``: the host names the server answers (lower-cased), loopback names when unset."""
        raw = self.raw("QRS_ALLOWED_HOSTS") or "localhost,127.0.0.1,::1"
        hosts = tuple(h.strip().lower() for h in raw.split(",") if h.strip())
        bad = [h for h in hosts
               if any(c.isspace() or c in "/@" for c in h) or (h != "*" and "*" in h.removeprefix("*."))]
        if bad:
            raise SettingsError("QRS_ALLOWED_HOSTS: host names (`*`, `*.lab.org` allowed), no scheme, path or "
                                f"user, got {bad[0]!r}")
        return hosts

    # ------------------------------------------------------------------ executor
    @property
    def ray_address(self) -> str:
        return self.raw("QRS_RAY_ADDRESS")

    @property
    def ray_cpus(self) -> int | None:
        """``QRS_RAY_CPUS``: CPUs of the embedded Ray, None for the machine's cores."""
        raw = self.raw("QRS_RAY_CPUS")
        if not raw:
            return None
        if not raw.isdigit() or int(raw) < 1:
            raise SettingsError(f"QRS_RAY_CPUS: must be a whole number of CPUs (1 or more), got {raw!r}")
        return int(raw)

    # ------------------------------------------------------------------ benchmarks
    @property
    def bench_var(self) -> Path:
        return Path(self.raw("QRS_BENCH_VAR") or "/tmp/qrs-bench-var")


_cached: tuple[tuple[tuple[str, str], ...], Settings] | None = None


def settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of ``environ`` (default ``os.environ``); cached until a ``QRS_*`` variable changes."""
    global _cached
    source = os.environ if environ is None else environ
    key = tuple(sorted((k, v) for k, v in source.items() if k.startswith(PREFIX)))
    if _cached is None or _cached[0] != key:
        _cached = (key, Settings(dict(key)))
    return _cached[1]
