"""Shared fixtures of the histeq Python tests: where the sample images and the OpenCV goldens are
(../shared beside the clone in CI, /work/shared on the project machines, else the copies in the
repository), and whether a CUDA device, PyTorch or CuPy is usable (GPU tests skip otherwise)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import histeq

REPO = Path(__file__).resolve().parents[2]


def _first_dir(*cands: Path) -> Path:
    for c in cands:
        if c.is_dir() and any(c.glob("*.png")):
            return c
    return cands[-1]


GOLDEN_DIR = _first_dir(REPO.parent / "shared" / "golden" / "opencv-4.6",
                        Path("/work/shared/golden/opencv-4.6"),
                        REPO / "tests" / "data" / "golden-opencv-4.6")
NATURAL_DIR = _first_dir(REPO.parent / "shared" / "natural", Path("/work/shared/natural"),
                         REPO / "samples")


def golden_pairs():
    """(name, input path, golden path) for every PNG input that has a golden."""
    out = []
    for g in sorted(GOLDEN_DIR.glob("*.png")):
        src = NATURAL_DIR / g.name
        if not src.exists():
            src = REPO / "samples" / g.name
        if src.exists():
            out.append((g.stem, src, g))
    return out


@pytest.fixture(scope="session")
def cuda():
    if not histeq.cuda_available():
        pytest.skip(f"no usable CUDA device: {histeq._cuda_why()}")
    return True


@pytest.fixture(scope="session")
def torch_cuda(cuda):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    return torch


@pytest.fixture(scope="session")
def cupy_cuda(cuda):
    cupy = pytest.importorskip("cupy")
    try:
        if cupy.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("cupy sees no CUDA device")
    except Exception as e:  # noqa: BLE001 — any CUDA init failure means: skip
        pytest.skip(f"cupy cannot use CUDA: {e}")
    return cupy


def rng_image(shape, seed=0, low=0, high=256):
    return np.random.default_rng(seed).integers(low, high, size=shape, dtype=np.uint8)
