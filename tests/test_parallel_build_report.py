"""bench.parallel_build's comparison with the committed sequential build: numbers equal within a float tolerance
(a mean summed in another order moves its 16th digit), a real difference named with its size."""
from __future__ import annotations


def _row(dev: float, mrr: float) -> dict:
    return {"system": "frm", "state": "ready", "build_seconds": 1.0, "training": {"curve": [[0, 0.44], [100, dev]]},
            "held_out": {"scores": {"mrr@100": mrr}}, "test": None}


def test_last_digit_noise_is_equal_and_a_moved_curve_is_named_with_its_size():
    from bench.parallel_build import compare

    (same,) = compare([_row(0.8571, 0.8138 + 3e-16)], [_row(0.8571, 0.8138)])
    assert same["equal_to_sequential"] and same["differs"] == []
    (moved,) = compare([_row(0.8565, 0.8137)], [_row(0.8571, 0.8138)])
    assert not moved["equal_to_sequential"] and moved["differs"] == ["training", "held_out"]
    assert abs(moved["largest_gap"]["training"] - 0.0006) < 1e-12
    shorter = _row(0.8571, 0.8138)
    shorter["training"]["curve"] = shorter["training"]["curve"][:1]
    (cut,) = compare([shorter], [_row(0.8571, 0.8138)])
    assert cut["differs"] == ["training"] and cut["largest_gap"]["training"] is None  # another shape: no size
