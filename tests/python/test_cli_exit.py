"""How the histeq command ends: with the NVIDIA driver's files open (after using a GPU), or with
at least 128 MB of memory in use, a child process that shares its memory takes their teardown
and the release of the memory over (src/cli/main.cpp, teardown_handoff), so that the caller gets
the status without waiting for them. The driver's file is played here by a FIFO under /dev named
like one (root can make it; those tests skip otherwise), and this process becomes the child
subreaper, so that the child, orphaned when histeq ends, is this process's to reap."""

import ctypes
import os
import select
import subprocess
import time

import numpy as np
import pytest

import histeq
from conftest import rng_image
from test_files import _cli

PR_SET_CHILD_SUBREAPER = 36


def _subreaper(on):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        pytest.skip("prctl(PR_SET_CHILD_SUBREAPER) failed")


@pytest.fixture
def driver_file():
    """A FIFO named like a driver file: (read end, write end), this process a subreaper."""
    path = f"/dev/nvidia-histeq-test-{os.getpid()}"
    _subreaper(True)
    try:
        os.mkfifo(path, 0o600)
    except OSError as e:
        _subreaper(False)
        pytest.skip(f"cannot make {path} ({e.strerror}): the test needs a writable /dev")
    r = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    w = os.open(path, os.O_WRONLY)
    try:
        yield r, w
    finally:
        _subreaper(False)
        os.close(r)
        try:
            os.close(w)
        except OSError:
            pass
        os.unlink(path)


def _children():
    """The pids whose parent is this process (an orphan of a subreaper's child included)."""
    me, found = os.getpid(), set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            found.add(int(d))
    return found


def _reap_new(before, not_pid, timeout=20.0):
    """(pid, status) of a child of this process that was not one before and is not not_pid, once
    it has ended; None if none ends within the timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in sorted(_children() - before - {not_pid}):
            got, status = os.waitpid(pid, os.WNOHANG)
            if got:
                return got, status
        time.sleep(0.01)
    return None


def _run(cli, args, fds=()):
    """Runs histeq to its end (status and pipes' end); also the children this process had
    before, and histeq's pid."""
    before = _children()
    p = subprocess.Popen([cli, *args], pass_fds=fds, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), before, p.pid


def _image(tmp_path):
    src = tmp_path / "in.png"
    histeq.save_image(src, rng_image((40, 50, 3), seed=3, high=120))
    return src


def test_with_the_driver_open_a_child_ends_after_the_run(tmp_path, driver_file):
    cli = _cli()
    r, w = driver_file
    src = _image(tmp_path)
    out = tmp_path / "out.png"
    p, before, pid = _run(cli, ["equalize", str(src), "-o", str(out), "--backend", "cpu"],
                          fds=(w,))
    os.close(w)
    assert p.returncode == 0, p.stderr
    assert str(out) in p.stdout  # the report whole: the child closed its copy of the pipes
    assert out.is_file()
    assert histeq.load_image(out).shape == (40, 50, 3)
    reaped = _reap_new(before, pid)
    assert reaped is not None, "no child took the driver's teardown over, or it never ended"
    assert os.WIFEXITED(reaped[1]) and os.WEXITSTATUS(reaped[1]) == 0
    # Every holder of the driver's file has closed it: the FIFO reads its end.
    ready, _, _ = select.select([r], [], [], 10)
    assert ready and os.read(r, 1) == b""


def test_with_the_driver_open_a_failure_keeps_its_status(tmp_path, driver_file):
    cli = _cli()
    _, w = driver_file
    p, before, pid = _run(
        cli, ["equalize", str(tmp_path / "missing.png"), "-o", str(tmp_path / "o.png")], fds=(w,))
    os.close(w)
    assert p.returncode == 1
    assert "missing.png" in p.stderr
    assert _reap_new(before, pid) is not None


def test_without_the_driver_no_child_is_made(tmp_path):
    cli = _cli()
    src = _image(tmp_path)
    _subreaper(True)
    try:
        p, before, pid = _run(
            cli, ["equalize", str(src), "-o", str(tmp_path / "out.png"), "--backend", "cpu"])
        assert p.returncode == 0, p.stderr
        assert _reap_new(before, pid, timeout=0.5) is None
    finally:
        _subreaper(False)


def test_a_run_that_leaves_much_memory_hands_its_release_to_a_child(tmp_path):
    # A folder of one 100 MP gray image: its decoded and equalized planes alone hold 200 MB,
    # which a batch keeps in its heap for the next file (a single file's path frees them); on a
    # machine short of memory the kernel may take pages back before the end (skipped there).
    with open("/proc/meminfo") as f:
        available = {k: v for k, v in (line.split(":", 1) for line in f)}.get("MemAvailable", "0")
    if int(available.split()[0]) < (1 << 20):  # kB
        pytest.skip("less than 1 GB of memory available")
    cli = _cli()
    (tmp_path / "in").mkdir()
    big = np.zeros((10000, 10000), np.uint8)
    big[::7, ::3] = 200
    histeq.save_image(tmp_path / "in" / "big.png", big)
    out = tmp_path / "out" / "big.png"
    _subreaper(True)
    try:
        p, before, pid = _run(cli, ["equalize", str(tmp_path / "in"), "-o", str(tmp_path / "out"),
                                    "--backend", "cpu"])
        assert p.returncode == 0, p.stderr
        assert str(out) in p.stdout  # the report whole: the child closed its copy of the pipes
        reaped = _reap_new(before, pid)
        assert reaped is not None, "no child took the memory's release over, or it never ended"
        assert os.WIFEXITED(reaped[1]) and os.WEXITSTATUS(reaped[1]) == 0
    finally:
        _subreaper(False)
    assert histeq.load_image(out).shape == (10000, 10000)
