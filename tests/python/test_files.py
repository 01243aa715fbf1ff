"""equalize_files: outputs equal load → equalize → save of each input, names, formats."""
from __future__ import annotations

import numpy as np

import histeq
from conftest import NATURAL_DIR, REPO, rng_image


def test_files_equal_in_memory_equalization(tmp_path):
    inputs = sorted(p for p in (REPO / "samples").glob("*.png"))[:4]
    assert inputs
    reports = histeq.equalize_files(inputs, tmp_path / "out", backend="cpu", workers=2)
    assert [r["input"] for r in reports] == [str(p) for p in inputs]
    for p, r in zip(inputs, reports):
        out = tmp_path / "out" / p.name
        assert r["output"] == str(out) and out.exists()
        np.testing.assert_array_equal(histeq.load_image(out),
                                      histeq.equalize(histeq.load_image(p), backend="cpu"))
        assert r["backend"] == "cpu" and r["width"] > 0


def test_suffix_ext_and_mode(tmp_path):
    src = tmp_path / "a.bmp"
    img = rng_image((10, 12, 3), seed=3)
    histeq.save_image(img, src)
    [r] = histeq.equalize_files([src], tmp_path, suffix="-eq", ext="png", mode="gray",
                                backend="cpu")
    assert r["output"].endswith("a-eq.png") and r["output_channels"] == 1
    np.testing.assert_array_equal(histeq.load_image(r["output"]),
                                  histeq.equalize(img, mode="gray"))


def test_jpeg_input_keeps_its_extension(tmp_path):
    jpgs = list(NATURAL_DIR.glob("*.jpg")) + list((REPO / "samples").glob("*.jpg"))
    [r] = histeq.equalize_files(jpgs[:1], tmp_path, backend="cpu")
    assert r["output"].endswith(".jpg")


def test_empty_list(tmp_path):
    assert histeq.equalize_files([], tmp_path / "never") == []
    assert not (tmp_path / "never").exists()
