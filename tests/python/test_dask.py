"""The Dask example on a LocalCluster of processes with the CPU backend: every output equals
histeq.equalize of its input, whatever chunk each file landed in."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import histeq
from conftest import REPO, rng_image

pytest.importorskip("dask.distributed")
sys.path.insert(0, str(REPO / "examples"))
import dask_equalize  # noqa: E402


def _inputs(tmp_path, n=7):
    files = []
    for i in range(n):
        p = tmp_path / "in" / f"img{i}.png"
        p.parent.mkdir(exist_ok=True)
        shape = (20 + i, 30) if i % 2 else (25, 20 + i, 3)
        histeq.save_image(p, rng_image(shape, seed=i, high=100 + 20 * i))
        files.append(str(p))
    return files


def test_chunks():
    assert dask_equalize.chunks(list("abcde"), 2) == [["a", "b"], ["c", "d"], ["e"]]
    assert dask_equalize.chunks([], 3) == []
    with pytest.raises(ValueError):
        dask_equalize.chunks(["a"], 0)


def test_local_cluster_of_processes(tmp_path):
    from dask.distributed import Client, LocalCluster
    files = _inputs(tmp_path)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        reports = dask_equalize.equalize_on_cluster(client, files, str(tmp_path / "out"),
                                                    chunk=3, backend="cpu")
    assert [r["input"] for r in reports] == files
    for f, r in zip(files, reports):
        assert r["ok"] and r["backend"] == "cpu"
        np.testing.assert_array_equal(histeq.load_image(r["output"]),
                                      histeq.equalize(histeq.load_image(f), backend="cpu"))


def test_failed_file_is_reported(tmp_path):
    from dask.distributed import Client, LocalCluster
    files = _inputs(tmp_path, 3) + [str(tmp_path / "missing.png")]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        reports = dask_equalize.equalize_on_cluster(client, files, str(tmp_path / "out"),
                                                    chunk=2, backend="cpu")
        assert [r["ok"] for r in reports] == [True, True, True, False]
        assert "missing.png" in reports[3]["error"]
        with pytest.raises(FileNotFoundError, match="missing.png"):
            dask_equalize.equalize_on_cluster(client, files, str(tmp_path / "out2"), chunk=2,
                                              backend="cpu", errors="raise")
    assert (tmp_path / "out" / "img2.png").exists()  # the failed file's chunk-mate was written
    assert (tmp_path / "out2" / "img0.png").exists()  # the good chunk was written


def test_command_line(tmp_path):
    files = _inputs(tmp_path, 3)
    r = subprocess.run([sys.executable, str(REPO / "examples" / "dask_equalize.py"),
                        str(tmp_path / "out"), *files, "--chunk", "2", "--backend", "cpu",
                        "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "3 files in" in r.stdout and "0 failed" in r.stdout
    assert len(list((tmp_path / "out").glob("*.png"))) == 3
