"""The README's Python examples, run as written (as the doc_examples CTest entry runs its
command-line examples): each ```python block of README.md runs in a fresh folder holding a copy
of samples/. A block marked <!-- examples: skip (needs a GPU and PyTorch) --> on the line
before its fence runs only where torch with CUDA is there, and is skipped with that reason
elsewhere."""
import pathlib
import re
import shutil

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _blocks():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    blocks, marker, i = [], "", 0
    while i < len(lines):
        line = lines[i]
        if line.strip() == "```python":
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].strip() != "```":
                body.append(lines[i])
                i += 1
            m = re.search(r"<!--\s*examples:\s*skip\s*\((.*)\)\s*-->", marker)
            blocks.append((start, "\n".join(body) + "\n", m.group(1) if m else ""))
            marker = ""
        elif line.strip():
            marker = line
        i += 1
    return blocks


BLOCKS = _blocks()


def _cuda_torch():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def test_the_readme_has_python_examples():
    assert any(not why for _, _, why in BLOCKS), "no runnable ```python block in README.md"


@pytest.mark.parametrize("line,code,why", BLOCKS, ids=[f"README.md:{b[0]}" for b in BLOCKS])
def test_readme_example_runs(line, code, why, tmp_path, monkeypatch):
    if why and not ("GPU" in why and _cuda_torch()):
        pytest.skip(f"README.md:{line}: {why}")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"README.md:{line}", "exec"), {"__name__": "__readme__"})
