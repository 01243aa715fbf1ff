"""The extension module as a neighbour of other native libraries: it exports its init function
alone (python/exports.map), loads the shared libstdc++, and imports before or after PyTorch, CuPy
and OpenCV in fresh interpreters without crashing either (each case skips where its package is
not installed; the CUDA ones also run their library's device code when a GPU is there)."""
from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

import histeq

MODULE = histeq._histeq.__file__


def _tool(name):
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} not found (binutils)")
    return path


def test_the_extension_exports_its_init_function_alone():
    out = subprocess.run([_tool("nm"), "-D", "--defined-only", MODULE], check=True,
                         capture_output=True, text=True).stdout
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert names == ["PyInit__histeq"], f"{MODULE} exports {len(names)} symbols: {names[:20]}"


def test_the_extension_loads_the_shared_cxx_runtime():
    out = subprocess.run([_tool("readelf"), "-d", MODULE], check=True, capture_output=True,
                         text=True).stdout
    needed = [line for line in out.splitlines() if "(NEEDED)" in line]
    assert any("libstdc++.so" in line for line in needed), "\n".join(needed)


# What each neighbour runs after both imports: code that reaches its own C++ runtime (torch's
# crash beside an earlier extension was in std::codecvt under c10's operator<<, i.e. printing).
_USE = {
    "torch": "t = torch.arange(6, dtype=torch.uint8).reshape(2, 3); s = repr(t); "
             "assert 'tensor' in s; "
             "print(histeq.equalize(t).sum().item())\n"
             "if torch.cuda.is_available() and histeq.cuda_available():\n"
             "    print(histeq.equalize(t.cuda()).cpu())",
    "cupy": "import numpy as np\n"
            "try:\n"
            "    ok = cupy.cuda.runtime.getDeviceCount() > 0\n"
            "except Exception:\n"
            "    ok = False\n"
            "if ok and histeq.cuda_available():\n"
            "    print(histeq.equalize(cupy.arange(6, dtype=cupy.uint8).reshape(2, 3)))",
    "cv2": "import numpy as np; g = (np.arange(64, dtype=np.uint8) * 3).reshape(8, 8); "
           "assert (cv2.equalizeHist(g) == histeq.equalize(g)).all(); print(cv2.__version__)",
}


@pytest.mark.parametrize("first", ["histeq", "other"])
@pytest.mark.parametrize("other", sorted(_USE))
def test_imports_beside_other_native_packages(other, first):
    if importlib.util.find_spec(other) is None:
        pytest.skip(f"{other} is not installed")
    order = ["histeq", other] if first == "histeq" else [other, "histeq"]
    code = "".join(f"import {m}\n" for m in order) + _USE[other] + "\n"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, (f"import {', '.join(order)} exited {r.returncode}\n"
                               f"--- stdout ---\n{r.stdout}\n--- stderr ---\n{r.stderr}")


def test_dir_lists_the_public_names_not_the_typing_helpers():
    """Tab completion on the module offers its API: every name of __all__, none of the typing
    names (Any, Dict, List, Optional) or `annotations` that its code imports."""
    import histeq
    names = dir(histeq)
    assert set(histeq.__all__) <= set(names)
    for helper in ("Any", "Dict", "List", "Optional", "annotations"):
        assert helper not in names
        assert hasattr(histeq, helper)  # still there for the annotations that name them
    assert names == sorted(names)
