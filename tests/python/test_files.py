"""equalize_files (the many-files executor): outputs equal load → equalize → save of each input
and the CLI's batch byte for byte, names and formats as the CLI's, per-file failure reports."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess

import numpy as np
import pytest

import histeq
from conftest import NATURAL_DIR, REPO, rng_image


def test_files_equal_in_memory_equalization(tmp_path):
    inputs = sorted(p for p in (REPO / "samples").glob("*.png"))[:4]
    assert inputs
    reports = histeq.equalize_files(inputs, tmp_path / "out", backend="cpu", jobs=2)
    assert [r["input"] for r in reports] == [str(p) for p in inputs]
    for p, r in zip(inputs, reports):
        out = tmp_path / "out" / p.name
        assert r["ok"] and r["error"] is None
        assert r["output"] == str(out) and out.exists()
        np.testing.assert_array_equal(histeq.load_image(out),
                                      histeq.equalize(histeq.load_image(p), backend="cpu"))
        assert r["backend"] == "cpu" and r["width"] > 0 and r["decoder"]
        assert set(r["times"]) == {"read", "decode", "upload", "equalize", "download", "encode",
                                   "write"}


def test_suffix_format_and_mode(tmp_path):
    src = tmp_path / "a.bmp"
    img = rng_image((10, 12, 3), seed=3)
    histeq.save_image(src, img)
    [r] = histeq.equalize_files([src], tmp_path, suffix="-eq", format="png", mode="gray",
                                backend="cpu")
    assert r["output"].endswith("a-eq.png") and r["output_channels"] == 1
    np.testing.assert_array_equal(histeq.load_image(r["output"]),
                                  histeq.equalize(img, mode="gray"))


def test_pgm_ppm_pnm_outputs_as_the_cli_writes_them(tmp_path):
    gray, rgb = rng_image((7, 9), seed=5), rng_image((6, 8, 3), seed=6)
    histeq.save_image(tmp_path / "g.pgm", gray)
    histeq.save_image(tmp_path / "c.ppm", rgb)
    np.testing.assert_array_equal(histeq.load_image(tmp_path / "g.pgm"), gray)
    np.testing.assert_array_equal(histeq.load_image(tmp_path / "c.ppm"), rgb)
    # PGM/PPM inputs keep their format; format="pnm" writes PGM for gray, PPM for colour.
    reports = histeq.equalize_files([tmp_path / "g.pgm", tmp_path / "c.ppm"], tmp_path / "out",
                                    backend="cpu")
    assert [os.path.basename(r["output"]) for r in reports] == ["g.pgm", "c.ppm"]
    [g, c] = histeq.equalize_files([tmp_path / "g.pgm", tmp_path / "c.ppm"], tmp_path / "pnm",
                                   format="pnm", backend="cpu")
    assert open(g["output"], "rb").read(2) == b"P5" and open(c["output"], "rb").read(2) == b"P6"
    np.testing.assert_array_equal(histeq.load_image(c["output"]),
                                  histeq.equalize(rgb, backend="cpu"))
    cli = _find_cli()  # the CLI's batch writes the same bytes (when a binary is at hand)
    if cli:
        subprocess.run([cli, "equalize", str(tmp_path / "g.pgm"), str(tmp_path / "c.ppm"), "-o",
                        str(tmp_path / "cli"), "--backend", "cpu", "--quiet"], check=True)
        for name in ("g.pgm", "c.ppm"):
            assert (tmp_path / "cli" / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    with pytest.raises(ValueError, match="ppm"):
        histeq.save_image(tmp_path / "colour.pgm", rgb)


def test_jpeg_input_keeps_its_extension(tmp_path):
    jpgs = list(NATURAL_DIR.glob("*.jpg")) + list((REPO / "samples").glob("*.jpg"))
    [r] = histeq.equalize_files(jpgs[:1], tmp_path, backend="cpu")
    assert r["ok"] and r["output"].endswith(".jpg") and r["decoder"]


def test_empty_list(tmp_path):
    assert histeq.equalize_files([], tmp_path / "never") == []
    assert not (tmp_path / "never").exists()


def test_failed_file_is_reported_not_raised(tmp_path):
    good = tmp_path / "g.png"
    histeq.save_image(good, rng_image((9, 11), seed=1))
    bad = tmp_path / "n.png"
    bad.write_bytes(b"not an image")
    missing = tmp_path / "missing.png"
    reports = histeq.equalize_files([bad, good, missing], tmp_path / "out", backend="cpu")
    assert [r["ok"] for r in reports] == [False, True, False]
    assert "n.png" in reports[0]["error"] and "missing.png" in reports[2]["error"]
    # what a failed file was processed at is unknown, not a default
    assert [(r["bit_depth"], r["mode"]) for r in reports] == \
        [(None, None), (8, "gray"), (None, None)]
    assert (tmp_path / "out" / "g.png").exists()
    with pytest.raises(ValueError, match="n.png"):
        histeq.equalize_files([good, bad], tmp_path / "out2", backend="cpu", errors="raise")
    assert (tmp_path / "out2" / "g.png").exists()  # the good file was still written


def test_folders_recursive_as_cli(tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    histeq.save_image(src / "b.png", rng_image((8, 8), seed=1))
    histeq.save_image(src / "a.bmp", rng_image((8, 9), seed=2))
    histeq.save_image(src / "sub" / "c.png", rng_image((7, 8), seed=3))
    (src / "notes.txt").write_text("skipped")
    flat = histeq.equalize_files([src], tmp_path / "flat", backend="cpu")
    assert [os.path.basename(r["input"]) for r in flat] == ["a.bmp", "b.png"]
    deep = histeq.equalize_files([src], tmp_path / "deep", recursive=True, format="tga",
                                 backend="cpu")
    assert sorted(os.path.relpath(r["output"], tmp_path / "deep") for r in deep) == \
        ["a.tga", "b.tga", os.path.join("sub", "c.tga")]
    assert all(r["ok"] for r in deep)


def test_a_recursive_run_into_its_input_does_not_read_its_own_outputs(tmp_path):
    # The library's rule, the CLI's: the walk does not enter the output folder inside the input
    # (Python's own walk did, and a second run equalized the first run's outputs into out/out).
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    histeq.save_image(src / "a.png", rng_image((8, 8), seed=1))
    histeq.save_image(src / "sub" / "b.png", rng_image((9, 7), seed=2))
    for run in range(2):
        reports = histeq.equalize_files([src], src / "out", recursive=True, backend="cpu")
        assert sorted(os.path.relpath(r["input"], src) for r in reports) == \
            ["a.png", os.path.join("sub", "b.png")], run
        assert all(r["ok"] for r in reports), reports
    assert not (src / "out" / "out").exists()
    # The output folder named another way (with "..", with a trailing separator) is the same.
    again = histeq.equalize_files([src], f"{src}/sub/../out/", recursive=True, backend="cpu")
    assert len(again) == 2


def test_names_and_collisions_come_from_the_shared_planner(tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name in ("c.bmp", "c.png", os.path.join("sub", "d.jpeg")):
        histeq.save_image(src / name, rng_image((6, 5, 3), seed=4))
    # The binding's plan: (input, output, format) per file, and what could not be listed.
    items, unlisted = histeq._histeq.plan_files([str(src / "c.bmp"), str(src / "sub")],
                                                str(tmp_path / "o"), ".tga", "-eq", False)
    assert unlisted == []
    assert items == [(str(src / "c.bmp"), str(tmp_path / "o" / "c-eq.tga"), ".tga"),
                     (str(src / "sub" / "d.jpeg"), str(tmp_path / "o" / "d-eq.tga"), ".tga")]
    reports = histeq.equalize_files([src / "c.bmp", src / "sub"], tmp_path / "o", suffix="-eq",
                                    format="tga", backend="cpu")
    assert [os.path.relpath(r["output"], tmp_path / "o") for r in reports] == \
        ["c-eq.tga", "d-eq.tga"]
    own = histeq.equalize_files([src], tmp_path / "own", recursive=True, backend="cpu")
    assert sorted(os.path.relpath(r["output"], tmp_path / "own") for r in own) == \
        ["c.bmp", "c.png", os.path.join("sub", "d.jpeg")]
    # c.bmp and c.png into one format: one output, refused before any work
    with pytest.raises(ValueError, match="would both write") as e:
        histeq.equalize_files([src], tmp_path / "tga", format="tga", backend="cpu")
    assert "c.bmp" in str(e.value) and "c.png" in str(e.value) and "c.tga" in str(e.value)
    assert not (tmp_path / "tga").exists()
    # an output that is another input: refused before it could replace that input unread
    shutil.copy(tmp_path / "own" / "c.png", tmp_path / "own" / "c-eq.png")
    with pytest.raises(ValueError, match="which is the input") as e:
        histeq.equalize_files([src / "c.png", tmp_path / "own" / "c-eq.png"], tmp_path / "own",
                              suffix="-eq", backend="cpu")
    assert "--" not in str(e.value)
    (src / "still.gif").write_bytes(b"GIF89a")
    with pytest.raises(ValueError, match="pass format='png'") as e:
        histeq.equalize_files([src / "still.gif"], tmp_path / "gif", backend="cpu")
    assert "--" not in str(e.value)
    with pytest.raises(ValueError, match="suffix"):
        histeq.equalize_files([src], tmp_path / "s", suffix="/x", backend="cpu")


def test_what_cannot_be_listed_is_a_failed_report_and_the_rest_runs(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    histeq.save_image(src / "a.png", rng_image((8, 8), seed=1))
    os.symlink("loop.png", src / "loop.png")  # its type cannot be read (root too)
    missing = tmp_path / "photos"
    reports = histeq.equalize_files([src, missing], tmp_path / "out", backend="cpu")
    assert [(r["input"], r["ok"]) for r in reports] == \
        [(str(src / "loop.png"), False), (str(missing), False), (str(src / "a.png"), True)]
    assert reports[0]["error"] == f"cannot read '{src / 'loop.png'}': Too many levels of " \
        "symbolic links"
    assert reports[1]["error"] == f"no such folder (or file): '{missing}'"
    assert reports[1]["bit_depth"] is None and reports[1]["mode"] is None
    assert set(reports[0]) == set(reports[2])  # the keys of every report
    with pytest.raises(OSError) as e:
        histeq.equalize_files([src], tmp_path / "raise", backend="cpu", errors="raise")
    assert e.value.errno == errno.ELOOP and e.value.filename == str(src / "loop.png")
    assert (tmp_path / "raise" / "a.png").exists()  # the other files were still written
    with pytest.raises(FileNotFoundError, match="no such folder"):  # nothing else to do
        histeq.equalize_files([missing], tmp_path / "none", backend="cpu")
    assert not (tmp_path / "none").exists()


def _find_cli():
    for c in (os.environ.get("HISTEQ_CLI"), REPO / "build" / "histeq", shutil.which("histeq")):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return str(c)
    return None


def _cli():
    cli = _find_cli()
    if cli is None:
        pytest.skip("no histeq command-line binary (build it, or set HISTEQ_CLI)")
    return cli


@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_outputs_identical_to_cli_batch(tmp_path, backend):
    cli = _cli()
    src = tmp_path / "in"
    src.mkdir()
    for i, shape in enumerate([(40, 50), (33, 47, 3), (20, 30, 4), (64, 64, 2)]):
        histeq.save_image(src / f"i{i}.png", rng_image(shape, seed=i, high=90 + 40 * i))
    histeq.save_image(src / "j.jpg", rng_image((30, 40, 3), seed=9), quality=90)
    opts = dict(backend=backend, format="png", png_level=3)
    reports = histeq.equalize_files([src], tmp_path / "py", **opts)
    assert all(r["ok"] for r in reports), reports
    rc = subprocess.run([cli, "equalize", str(src), "-o", str(tmp_path / "cli"), "--format",
                         "png", "--png-level", "3", "--backend", backend, "--quiet"],
                        capture_output=True, text=True, timeout=300)
    assert rc.returncode == 0, rc.stderr
    names = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert names == sorted(os.path.basename(r["output"]) for r in reports)
    for n in names:
        assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "cli" / n).read_bytes(), n


def _sixteen_bit_files(folder):
    """A 16-bit gray and a 16-bit RGB PNG, and an 8-bit one beside them."""
    folder.mkdir()
    g16 = (rng_image((37, 53), seed=3).astype(np.uint16) * 257 + 11).astype(np.uint16)
    c16 = (rng_image((29, 41, 3), seed=4).astype(np.uint16) * 200).astype(np.uint16)
    histeq.save_image(folder / "g16.png", g16)
    histeq.save_image(folder / "c16.png", c16)
    histeq.save_image(folder / "g8.png", rng_image((31, 43), seed=5))
    return ["g16.png", "c16.png", "g8.png"]


@pytest.mark.parametrize("operation", ["equalize", "clahe"])
def test_the_batch_runs_the_clis_operations_and_keeps_16_bits(tmp_path, operation):
    names = _sixteen_bit_files(tmp_path / "in")
    if operation == "equalize":
        reports = histeq.equalize_files([tmp_path / "in"], tmp_path / "py", backend="cpu")
    else:
        reports = histeq.clahe_files([tmp_path / "in"], tmp_path / "py", 3.0, (4, 3),
                                     backend="cpu")
    assert all(r["ok"] for r in reports), reports
    depth = {os.path.basename(r["input"]): r["bit_depth"] for r in reports}
    assert depth == {"g16.png": 16, "c16.png": 16, "g8.png": 8}
    for n in names:  # each as the in-memory calls give it, at the file's own depth
        img = histeq.load_image(tmp_path / "in" / n, depth=None)
        if operation == "equalize":
            want = histeq.equalize(img, backend="cpu")
        else:
            want = histeq.clahe(img, 3.0, (4, 3), backend="cpu")
        got = histeq.load_image(tmp_path / "py" / n, depth=None)
        assert got.dtype == want.dtype, n
        np.testing.assert_array_equal(got, want, err_msg=n)
    cli = _cli()
    args = [cli, operation, str(tmp_path / "in"), "-o", str(tmp_path / "cli"), "--backend",
            "cpu", "--quiet"]
    if operation == "clahe":
        args += ["--clip-limit", "3", "--tile-grid-size", "4x3"]
    rc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert rc.returncode == 0, rc.stderr
    for n in names:  # byte for byte the CLI's batch
        assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "cli" / n).read_bytes(), n


def test_the_batch_depth_option(tmp_path):
    _sixteen_bit_files(tmp_path / "in")
    reports = histeq.equalize_files([tmp_path / "in"], tmp_path / "d8", backend="cpu", depth=8)
    assert all(r["ok"] and r["bit_depth"] == 8 for r in reports), reports
    assert histeq.load_image(tmp_path / "d8" / "g16.png", depth=None).dtype == np.uint8
    reports = histeq.equalize_files([tmp_path / "in"], tmp_path / "jpg", backend="cpu",
                                    format="jpg")
    failed = {os.path.basename(r["input"]) for r in reports if not r["ok"]}
    assert failed == {"g16.png", "c16.png"}  # 16 bits do not fit a JPEG: each file fails alone
    assert all("16 bits" in r["error"] for r in reports if not r["ok"])
    with pytest.raises(ValueError):
        histeq.equalize_files([tmp_path / "in"], tmp_path / "x", depth=12)
    # a clip limit of 0 or less: no clipping, as clahe() and OpenCV take it (the CLI's --clip 0)
    neg = histeq.clahe_files([tmp_path / "in"], tmp_path / "neg", -1.0, backend="cpu")
    zero = histeq.clahe_files([tmp_path / "in"], tmp_path / "zero", 0.0, backend="cpu")
    assert neg and all(r["ok"] for r in neg + zero)
    for r, z in zip(neg, zero):
        a = histeq.load_image(r["output"], depth=None)
        np.testing.assert_array_equal(a, histeq.load_image(z["output"], depth=None))
        np.testing.assert_array_equal(
            a, histeq.clahe(histeq.load_image(r["input"], depth=None), -1.0, backend="cpu"))


def test_file_names_that_are_not_utf8(tmp_path):
    """Linux file names are bytes: a name that is not UTF-8 is a path as os.fsencode gives it
    (bytes) or os.fsdecode (str with surrogate escapes), as Python's own os and open take it.
    load_image, save_image, equalize_files and match_files read and write such files (also found
    by listing a folder), report their paths as os.fsdecode gives them, and say in printable
    words why one failed."""
    img = rng_image((12, 10), seed=11)
    name = os.fsencode(tmp_path) + b"/n\xff.png"
    histeq.save_image(name, img)
    np.testing.assert_array_equal(histeq.load_image(name), img)
    np.testing.assert_array_equal(histeq.load_image(os.fsdecode(name)), img)
    g16 = np.arange(120, dtype=np.uint16).reshape(12, 10) * 500
    name16 = os.fsencode(tmp_path) + b"/w\xfe.png"
    histeq.save_image(os.fsdecode(name16), g16)
    np.testing.assert_array_equal(histeq.load_image(name16, depth=None), g16)
    out_dir = os.fsencode(tmp_path) + b"/out\xfd"
    for call in (lambda ins: histeq.equalize_files(ins, out_dir, backend="cpu"),
                 lambda ins: histeq.match_files(ins, out_dir, name16, backend="cpu")):
        for inputs in ([name], [os.fsdecode(name)], [tmp_path]):
            reports = call(inputs)
            by_name = {r["input"]: r for r in reports}
            r = by_name[os.fsdecode(name)]
            assert r["ok"], r["error"]
            assert r["output"] == os.fsdecode(out_dir + b"/n\xff.png")
            assert os.path.exists(os.fsencode(r["output"]))
    missing = os.fsencode(tmp_path) + b"/gone\xff.png"
    with pytest.raises(FileNotFoundError) as e:
        histeq.load_image(missing)
    assert e.value.filename == os.fsdecode(missing)
    str(e.value).encode("utf-8")  # printable: no lone surrogates
    bad = os.fsencode(tmp_path) + b"/bad\xff.png"
    with open(bad, "wb") as f:
        f.write(b"not an image")
    with pytest.raises(ValueError) as v:
        histeq.load_image(bad)
    str(v.value).encode("utf-8")
    [r] = histeq.equalize_files([bad], out_dir, backend="cpu")
    assert not r["ok"] and r["input"] == os.fsdecode(bad)
    r["error"].encode("utf-8")


def test_ctrl_c_stops_a_batch_and_raises_keyboardinterrupt(tmp_path):
    """Ctrl-C (here _thread.interrupt_main, as the SIGINT handler does) during equalize_files
    cancels the run: the files in progress finish, no other starts, no temporary file stays, and
    KeyboardInterrupt is raised from the call (it was raised only after every file was done)."""
    import _thread
    import signal
    import threading
    src = tmp_path / "in"
    src.mkdir()
    big = rng_image((700, 900, 3), seed=11)
    for i in range(60):
        histeq.save_image(src / f"{i:02d}.png", big)
    # Python's own SIGINT handler, whatever this process inherited (a shell's background job
    # starts with SIGINT ignored, and then interrupt_main does nothing).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            histeq.equalize_files([src], tmp_path / "out", backend="cpu", png_level=9, jobs=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    written = sorted(os.listdir(tmp_path / "out"))
    assert len(written) < 60, "cancelled: files not started are not written"
    assert all(name.endswith(".png") for name in written), written  # no temporary files
    for name in written:  # what was written is whole
        assert histeq.load_image(tmp_path / "out" / name).shape == big.shape


def test_a_batch_from_another_thread_runs_to_its_end(tmp_path):
    """Python runs signal handlers on its main thread only: a batch called from another thread
    is not watched for Ctrl-C, and runs as before."""
    import threading
    src = tmp_path / "in"
    src.mkdir()
    for i in range(4):
        histeq.save_image(src / f"{i}.png", rng_image((30, 40), seed=20 + i))
    result = {}

    def work():
        result["reports"] = histeq.equalize_files([src], tmp_path / "out", backend="cpu")
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert [r["ok"] for r in result["reports"]] == [True] * 4
