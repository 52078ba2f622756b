"""core pins torch's vectorised CPU kernels and oneDNN's ISA (core/cpu_kernels.py): one model per seed and commit on
every host."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PROBE = "import torch; print(torch.backends.cpu.get_cpu_capability())"


def _capability(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "ATEN_CPU_CAPABILITY"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**clean, **env}, capture_output=True,
                         text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def _host_has_avx2() -> bool:
    try:
        return " avx2" in open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return False


@pytest.mark.skipif(not _host_has_avx2(), reason="the host has no AVX2: torch runs its default kernels anyway")
@pytest.mark.parametrize("first", ["import core", "import bench.reporting", "import ui"])
def test_every_entry_package_pins_the_avx2_kernels_before_torch_loads(first):
    """``core`` (and bench and ui, which import it) ask for the AVX2 kernels before torch is imported: on an
    AVX-512 host torch would otherwise pick its AVX-512 ones and train other models (BENCHMARKS.md)."""
    assert _capability(f"{first}; {PROBE}") == "AVX2"
    assert _capability(f"{first}; import os; print(os.environ['ONEDNN_MAX_CPU_ISA'])") == "AVX2"


def test_a_user_choice_of_kernels_is_kept_and_a_late_pin_changes_nothing():
    """``ATEN_CPU_CAPABILITY`` set by the user wins; once torch is loaded the pin leaves the environment alone."""
    assert _capability(f"import core; {PROBE}", ATEN_CPU_CAPABILITY="default") == "DEFAULT"
    code = ("import os, torch; from core.cpu_kernels import pin_cpu_kernels; pin_cpu_kernels(); "
            "print(os.environ.get('ATEN_CPU_CAPABILITY', 'unset'))")
    assert _capability(code) == "unset"
