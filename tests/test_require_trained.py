"""The trained first stages refuse a half-built model folder the same way (``core.artifacts.require_trained``): no
checkpoint is "not built" with the build command, a checkpoint without metrics.json is "still training"."""
from __future__ import annotations

import pytest

from core.errors import MissingArtifactError


@pytest.mark.parametrize("system", ["dual-encoder", "densetrans", "sdml-cnn"])
def test_a_folder_without_a_finished_training_is_never_served(system, tiny_data, fresh_var):
    from core.data.datasets import load_dataset
    from core.registry import system_dir, system_module

    ds = load_dataset("qqp-bimpm")
    module = system_module(system)
    with pytest.raises(MissingArtifactError, match=f"python -m core train --system {system} --dataset qqp-bimpm") as err:
        module.load(ds)
    assert "still training" not in str(err.value)
    folder = system_dir(ds.name, system, None)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pt").write_bytes(b"\x00half a checkpoint")
    with pytest.raises(MissingArtifactError, match=r"still training \(no metrics.json yet\)"):
        module.load(ds)


def test_require_trained_by_hand(tmp_path):
    from core.artifacts import require_trained

    with pytest.raises(MissingArtifactError, match="make it"):
        require_trained(tmp_path, "the toy model", "make it")
    (tmp_path / "model.pt").write_bytes(b"x")
    with pytest.raises(MissingArtifactError, match="still training"):
        require_trained(tmp_path, "the toy model", "make it")
    (tmp_path / "metrics.json").write_text("{}")
    require_trained(tmp_path, "the toy model", "make it")  # a finished training: served
