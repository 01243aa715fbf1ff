"""Files: load_image, save_image, equalize_files, clahe_files and match_files (the many-files
executor). Part of the histeq
package (imported from it); see histeq/__init__.py for the module documentation."""
from __future__ import annotations

import os
import warnings
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy as _np

from . import _arrays as _a
from . import _region as _r
from ._arrays import _histeq

_FORMATS = {"png": ".png", "jpg": ".jpg", "jpeg": ".jpg", "bmp": ".bmp", "tga": ".tga",
            "pgm": ".pgm", "ppm": ".ppm", "pnm": ".pnm"}


def _is_path(x: Any) -> bool:
    return isinstance(x, (str, bytes, os.PathLike))


def _path_text(name: str, x: Any) -> str:
    """os.fsdecode(x), or a TypeError naming the argument when x is no path."""
    try:
        return os.fsdecode(x)
    except TypeError:
        raise TypeError(f"{name}: expected a str, bytes or os.PathLike, got "
                        f"{type(x).__name__}") from None


def load_image(path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"],
               depth: Optional[int] = 8) -> _np.ndarray:
    """Decodes PNG/JPEG/BMP/TGA/GIF/PNM into an array ``(H, W)`` or ``(H, W, C)``, colour
    channels in RGB(A) order (not OpenCV's BGR: pass ``channel_order="bgr"`` to the calls for
    arrays from ``cv2.imread``, or reverse the channels).

    depth: ``8`` (default, as ``cv2.imread``'s default): ``uint8``, 16-bit PNGs reduced to 8
    bits as ``cv2.imread`` reduces them (``v >> 8``; ``histeq --depth 8`` and the batch calls'
    ``depth=8`` round instead: ``(v + 128) // 257``);
    ``16``: ``uint16`` (PNG and PGM/PPM only; 8-bit samples widened as ``v * 257``);
    ``None``: the file's own depth (``uint16`` for a 16-bit PNG or a PGM/PPM with maxval > 255,
    as ``histeq`` keeps them).

    PGM/PPM samples are scaled from ``0..maxval`` to the full range of the result, rounded:
    ``round(v * 255 / maxval)`` for ``uint8`` (a 16-bit file too: not ``v >> 8``),
    ``round(v * 65535 / maxval)`` for ``uint16``; ``cv2.imread`` keeps them unscaled (a maxval
    of 1000 reads as 0..1000 there, 0..65535 here).

    Raises: ``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError`` or another
    ``OSError`` when the file cannot be read (``errno`` and ``filename`` set; a path that is not a
    regular file, a device or a FIFO: an ``OSError`` with the message alone); ``ValueError``
    when it is not a decodable image (empty, truncated, corrupt, an unknown format) and for
    another depth; ``TypeError`` for a depth that is not an int."""
    depth = _check_depth(depth)
    p = _path_text("path", path)
    if depth == 16 or (depth is None and _histeq.is_16bit_image(p)):
        return _histeq.load_image16(p)
    return _histeq.load_image(p)


def save_image(path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"], image: Any,
               quality: int = 95) -> None:
    """Writes ``image`` (``uint8`` or ``uint16``, ``(H, W)`` / ``(H, W, C)``, RGB(A) order) to
    ``path`` — the argument order of ``cv2.imwrite``, ``imageio.imwrite`` and
    ``skimage.io.imsave`` — as .png/.jpg/.jpeg/.bmp/.tga or a binary .pgm (gray) / .ppm
    (colour) / .pnm (either), by the extension, through a temporary file renamed over ``path``;
    ``uint16`` images as 16-bit .png/.pgm/.ppm/.pnm only. (``save_image(image, path)``, the
    order of histeq 0.1, still works and warns.)

    Raises: ``ValueError`` for another extension, quality outside 1..100, an image of no pixel,
    or an image the format cannot hold (colour as .pgm, gray as .ppm, alpha in PGM/PPM: the
    message names the extension that fits); ``OSError`` (``FileNotFoundError`` for a missing folder, ``PermissionError``,
    ...) when the file cannot be written."""
    if not _is_path(path) and _is_path(image):
        warnings.warn("save_image(image, path) is save_image(path, image) now (cv2.imwrite's "
                      "order)", DeprecationWarning, stacklevel=2)
        path, image = image, path
    if isinstance(quality, bool) or not isinstance(quality, (int, _np.integer)):
        raise TypeError(f"quality: expected an int, got {type(quality).__name__}")
    if not 1 <= int(quality) <= 100:
        raise ValueError(f"quality: must be in 1..100, got {quality}")
    if not _is_path(path):
        raise TypeError(f"path: expected a str, bytes or os.PathLike, got {type(path).__name__}")
    path = os.fsdecode(path)
    a, _ = _a.host_array(image, "image", lists=False)
    _, h, w, c, _ = _a.split_shape(a.shape, False, "image")
    if h * w == 0:  # no image file holds one (cv2.imwrite refuses it too)
        raise ValueError(f"image: shape {tuple(a.shape)} has no pixel; an image file needs at "
                         f"least one")
    if a.dtype == _np.uint16:
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".png", ".pgm", ".ppm", ".pnm"):
            raise ValueError(f"path: 16-bit images are written as .png, .pgm, .ppm or .pnm; got "
                             f"{ext or 'no extension'!r} (convert to uint8 for other formats)")
        _histeq.save_image16(a, h, w, c, path)
        return
    _histeq.save_image(a, h, w, c, path, int(quality))


def _check_int(name: str, value: Any, low: int, high: Optional[int] = None) -> int:
    rng = f"{low}..{high}" if high is not None else f">= {low}"
    if isinstance(value, bool) or not isinstance(value, (int, _np.integer)):
        raise TypeError(f"{name}: expected an int {rng}, got {type(value).__name__} {value!r}")
    if value < low or (high is not None and value > high):
        raise ValueError(f"{name}: must be an int {rng}, got {value!r}")
    return int(value)


def _check_depth(depth: Any) -> Optional[int]:
    """8, 16 or None (NumPy integers taken): a TypeError for another type, as _check_int."""
    if depth is None:
        return None
    if isinstance(depth, bool) or not isinstance(depth, (int, _np.integer)):
        raise TypeError(f"depth: expected 8, 16 or None, got {type(depth).__name__} {depth!r}")
    if depth not in (8, 16):
        raise ValueError(f"depth: 8, 16 or None, got {depth!r}")
    return int(depth)


def _item_error(r: Dict[str, Any]) -> Exception:
    """The exception of a failed item from the report's ``error_kind``, as load_image and
    save_image raise the library's errors: an OSError for a file that could not be read or
    written (its errno picks the subclass: FileNotFoundError, PermissionError,
    IsADirectoryError, ...), ValueError for the input's data or an option the file cannot
    take, MemoryError for host memory, else RuntimeError (the GPU, an encoder)."""
    msg, kind = r["error"], r.get("error_kind")
    if kind == "file":
        code = r["errno"] or 0
        return OSError(code, msg, r["error_path"] or r["input"]) if code > 0 else OSError(msg)
    if kind in ("decode", "usage"):
        return ValueError(msg)
    if kind == "memory":
        return MemoryError(msg)
    return RuntimeError(msg)


_DECODERS = ("auto", "cpu", "gpu")
_ERRORS = ("report", "raise")


def _encode_options(quality, png_level, subsampling):
    quality = _check_int("quality", quality, 1, 100)
    if png_level is None:
        png_level = _histeq.DEFAULT_PNG_LEVEL
    png_level = _check_int("png_level", png_level, 0, 9)
    subsampling = str(subsampling)
    if subsampling not in ("444", "422", "420", "4:4:4", "4:2:2", "4:2:0"):
        raise ValueError(f"subsampling: expected 444, 422 or 420, got {subsampling!r}")
    return quality, png_level, subsampling


def _unlisted_report(path: str, message: str, code: int) -> Dict[str, Any]:
    """The report of an input that could not be listed (a folder, an entry whose type cannot be
    read, a missing folder): a failed item, as the CLI's --json line for it."""
    return {"input": path, "output": "", "ok": False, "error": message, "error_kind": "file",
            "errno": code, "error_path": path, "width": 0, "height": 0,
            "channels": 0, "output_channels": 0, "decoder": "", "encoder": "",
            "output_bytes": 0, "bit_depth": None, "route": "", "mode": None, "backend": "",
            "kernel": "", "device": "",
            "times": dict.fromkeys(("read", "decode", "upload", "equalize", "download", "encode",
                                    "write"), 0.0)}


def _unlisted_error(unlisted: Tuple[str, str, int]) -> OSError:
    """An input that could not be listed as an OSError: its errno picks the subclass
    (FileNotFoundError for a missing folder, PermissionError, ...)."""
    path, message, code = unlisted
    return OSError(code, message, path)


def equalize_files(inputs: Iterable[Union[str, os.PathLike]], output_dir: Union[str, os.PathLike],
                   *, mode: Optional[str] = None, formula: str = "opencv", kernel: str = "auto",
                   backend: str = "auto", format: Optional[str] = None, recursive: bool = False,
                   jobs: int = 0, max_inflight_mb: Optional[int] = None,
                   devices: Optional[Sequence[int]] = None, quality: int = 95,
                   png_level: Optional[int] = None, subsampling: Union[str, int] = "420",
                   decoder: str = "auto", suffix: str = "", max_pixels: int = 1 << 28,
                   errors: str = "report", depth: Optional[int] = None, mask: Any = None,
                   roi: Any = None) -> List[Dict[str, Any]]:
    """Equalizes image files into ``output_dir`` with the many-files executor — the engine of
    ``histeq equalize INPUT... -o FOLDER`` (include/histeq/executor.hpp): files are read,
    decoded, equalized (on the GPU with backend auto/cuda), encoded and written overlapping
    across files, and every output is byte-identical to the CLI's for the same inputs and
    options. 16-bit PNG/PGM/PPM inputs stay 16-bit (as the CLI keeps them) unless ``depth=8``;
    ``depth=16`` widens 8-bit inputs (``v * 257``). :func:`clahe_files` is the same for CLAHE.

    Outputs, as the CLI: a file input writes ``output_dir/<name>``; a folder input writes its
    image files (.png .jpg .jpeg .bmp .tga .gif .pnm .pgm .ppm; subfolders with ``recursive``,
    keeping their relative paths); ``format`` replaces every output's extension, otherwise each
    file keeps its own (ValueError for an input histeq cannot write back: pass ``format``).
    ``suffix`` (Python only) goes before the extension: ``a.png`` → ``a-eq.png``. The library
    plans the files and names for both (include/histeq/inputs.hpp): with ``recursive`` the walk
    does not enter ``output_dir`` when it lies inside a folder input (a second run does not take
    the first run's outputs as inputs); a folder that cannot be listed, and an input that does not
    exist and is not named as an image file (a missing folder), is a failed report named before
    the files, and the other files run (an ``OSError`` when there is nothing else to do).

    Args:
        inputs: files and folders (a list; a single path is a TypeError).
        output_dir: created (with subfolders) if missing, once the run can start (a run
            without the device it needs makes no folder); ``OSError`` when it cannot be made.
        mode, formula, kernel, backend: as :func:`equalize` (files are RGB).
        format: ``"png"``, ``"jpg"``, ``"bmp"``, ``"tga"``, ``"pgm"``, ``"ppm"``, ``"pnm"``.
        recursive: descend into subfolders of folder inputs.
        jobs: CPU worker threads, 0..1024 (0: the number of cores).
        max_inflight_mb: cap on the megabytes of images in flight (None: the CLI's default,
            max(256, 128 x jobs) MB, at most a quarter of the RAM).
        devices: CUDA device ordinals, one device worker each (repeats allowed; default every
            visible device). An ordinal past the visible devices is a ``ValueError`` before any
            file.
        quality: JPEG quality 1..100. png_level: PNG deflate level 0..9 (default the CLI's,
            1: ISA-L's igzip on several threads; 2..9: libdeflate, 9 smallest).
        subsampling: JPEG chroma subsampling of colour outputs: ``"444"``, ``"422"``, ``"420"``.
        decoder: JPEG route: ``"auto"`` (nvJPEG on the device workers when the build has it and
            a GPU runs, libjpeg-turbo on the CPU workers meanwhile), ``"gpu"`` (every JPEG waits
            for nvJPEG; ``ValueError`` before any file when no CUDA device is usable, as
            ``backend="cuda"``),
            ``"cpu"`` (libjpeg-turbo only).
        max_pixels: refuse images with more pixels (checked from the header).
        depth: ``None`` (default): each file's own (8 or 16 bits per sample); ``8``: 16-bit
            inputs narrowed (``round(v / 257)``); ``16``: 8-bit inputs widened. A 16-bit result
            is written as 16-bit PNG/PGM/PPM: a JPEG/BMP/TGA output of one is a failed item.
        errors: ``"report"`` (default): a file that fails is a report with ``ok=False`` and its
            ``error``, the others run on; ``"raise"``: after the run (the other files are
            written), the first failure as load_image / save_image raise it: an ``OSError``
            (``FileNotFoundError``, ``PermissionError``, ...) for a file that cannot be read or
            written, ``ValueError`` for one that does not decode, ``RuntimeError`` for a CUDA
            failure.
        mask: masked equalization (``histeq equalize --mask``): an image file (a gray image,
            8 or 16 bits, nonzero counted; one decoded as three equal channels, such as a gray
            BMP, is gray) or an array of bool or integers (nonzero counted), of the files'
            height x width (a file of another size is a failed item). Its
            histogram counts the masked pixels, its LUT applies to every pixel; the files run
            on the pixels route (JPEGs are decoded to pixels).
        roi: ``(x, y, width, height)``: only the rectangle's pixels are counted (``--roi``).
            ``mask`` and ``roi`` are checked as :func:`equalize` checks them, once, before any
            file is read (a file the rectangle does not fit is a failed item).

    Returns:
        One dict per file, in input order (folders expanded): ``input output ok error
        error_kind errno error_path width height channels output_channels decoder encoder
        output_bytes bit_depth route mode backend kernel device times`` (``route``:
        ``"pixels"``, ``"jpeg-planes"`` or ``"jpeg-device"``, where it ran) (``times``:
        milliseconds per stage ``read decode upload equalize download encode write``). ``error``
        is None when ``ok``; ``error_kind`` says what failed: ``"file"`` (the input could not be
        read or the output written: ``errno``, 0 where none applies, and ``error_path``),
        ``"decode"``, ``"device"`` (the GPU), ``"memory"``, ``"usage"``, ``"cancelled"`` or
        ``"other"``; ``errno`` and ``error_path`` are None for the others; ``bit_depth`` and
        ``mode`` are None when not ``ok``.

    Raises:
        TypeError: ``inputs`` is a single path; an option of the wrong type (``jobs``,
        ``quality``, ``png_level``, ``max_inflight_mb``, ``max_pixels``, ``devices`` take ints).
        ValueError: bad options, an input that cannot be written back without ``format``, two
        inputs that would write the same output, an output that is another input.
        FileNotFoundError: an input that does not exist and is not named as an image file (a
        missing folder), OSError: a folder that cannot be listed, when no other file is to be
        done (else a failed report). With ``errors="raise"``: the first failed input (see
        ``errors``).

    The call releases the GIL while the files run (other Python threads go on). Ctrl-C
    cancels the run: the files in progress are finished and written, no other is started,
    and KeyboardInterrupt is raised.
    """
    if decoder == "gpu" and (mask is not None or roi is not None):
        raise ValueError("decoder: 'gpu' decodes JPEGs for the whole-image routes; an "
                         "equalization with mask or roi runs on pixels ('auto' or 'cpu')")
    return _batch("equalize", None, inputs, output_dir, mode, formula, kernel, backend, format,
                  recursive, jobs, max_inflight_mb, devices, quality, png_level, subsampling,
                  decoder, suffix, max_pixels, errors, depth, **_file_region(mask, roi))


def match_files(inputs: Iterable[Union[str, os.PathLike]], output_dir: Union[str, os.PathLike],
                reference: Any, *, mode: Optional[str] = None, backend: str = "auto",
                format: Optional[str] = None, recursive: bool = False, jobs: int = 0,
                max_inflight_mb: Optional[int] = None, devices: Optional[Sequence[int]] = None,
                quality: int = 95, png_level: Optional[int] = None,
                subsampling: Union[str, int] = "420", decoder: str = "auto", suffix: str = "",
                max_pixels: int = 1 << 28, errors: str = "report",
                depth: Optional[int] = None) -> List[Dict[str, Any]]:
    """Histogram matching of image files into ``output_dir`` with the many-files executor: the
    engine of ``histeq match INPUT... -o FOLDER --reference REF``, byte for byte its outputs;
    each file as :func:`match_histograms` matches an array. ``reference``: an image file
    (decoded once, as the CLI decodes it: a 16-bit PNG/PGM/PPM stays 16-bit) or an array
    (``uint8`` / ``uint16``, ``(H, W)`` or ``(H, W, C)`` in RGB order, as files are decoded);
    its histograms are made once per depth and mode and serve every file. Every other argument
    as :func:`equalize_files`, ``decoder`` included: JPEGs take equalize's routes, a colour JPEG
    to JPEG in luma mode matched in its stored planes (its Y plane to the reference's luma) on
    the CPU workers or on the device route. Returns and raises as :func:`equalize_files`;
    ValueError for a reference with no pixel, TypeError for a list of references (every file is
    matched to one)."""
    if isinstance(reference, (list, tuple)):
        raise TypeError(f"reference: expected one image (an image file or an array), got a "
                        f"{type(reference).__name__}; every file is matched to one reference")
    if _is_path(reference):
        ref = load_image(reference, depth=None)
    else:
        ref, _wrap = _a.host_array(reference, "reference", lists=False)
    if ref.size == 0:
        raise ValueError(f"reference: shape {ref.shape} has no pixel")
    _a.split_shape(ref.shape, False, "reference")
    return _batch("match", None, inputs, output_dir, mode, "opencv", "auto", backend, format,
                  recursive, jobs, max_inflight_mb, devices, quality, png_level, subsampling,
                  decoder, suffix, max_pixels, errors, depth,
                  reference=_np.ascontiguousarray(ref))


def _file_region(mask: Any, roi: Any) -> Dict[str, Any]:
    """equalize_files' mask and roi, checked once before any file is read: the rectangle as
    equalize checks it, the mask by _file_mask, and, when the rectangle lies inside the mask, a
    counted pixel inside it (the mask and the rectangle are every file's)."""
    r = None if roi is None else _r._roi_tuple(roi)
    m = _file_mask(mask)
    if m is not None and r is not None:
        x, y, w, h = r
        if x + w <= m.shape[1] and y + h <= m.shape[0] and not m[y:y + h, x:x + w].any():
            raise ValueError(_r._empty_message(r))
    return {"mask": m, "roi": r}


def _file_mask(mask: Any) -> Optional[_np.ndarray]:
    """equalize_files' mask as a C-contiguous uint8 (H, W) array (nonzero: counted). A mask file
    decoded as three equal channels (a gray BMP, a gray palette) is gray, as ``histeq --mask``
    takes it."""
    if mask is None:
        return None
    if _is_path(mask):
        m = load_image(mask, depth=None)
        if m.ndim == 3 and m.shape[2] == 3 and (m[..., 1:] == m[..., :1]).all():
            m = m[..., 0]
        elif m.ndim != 2:
            raise ValueError(f"mask: {os.fsdecode(mask)!r} has {m.shape[2]} channels: a mask is "
                             f"a gray image (one channel, or three equal in every pixel; "
                             f"no alpha; nonzero: counted)")
    else:
        _r.check_mask(mask)
        m = _r._mask_to_host(mask)
        _r._check_mask_dtype(m.dtype)
        if m.ndim != 2:
            raise ValueError(f"mask: shape {m.shape}; a mask is a gray image (H, W), nonzero: "
                             f"counted")
    m = _np.ascontiguousarray(m != 0).view(_np.uint8)
    if not m.any():
        raise ValueError("mask: the mask counts no pixel (every mask pixel is 0)")
    return m


def clahe_files(inputs: Iterable[Union[str, os.PathLike]], output_dir: Union[str, os.PathLike],
                clip_limit: float = 40.0, tile_grid_size: Any = (8, 8), *,
                mode: Optional[str] = None, backend: str = "auto", format: Optional[str] = None,
                recursive: bool = False, jobs: int = 0, max_inflight_mb: Optional[int] = None,
                devices: Optional[Sequence[int]] = None, quality: int = 95,
                png_level: Optional[int] = None, subsampling: Union[str, int] = "420",
                decoder: str = "auto", suffix: str = "", max_pixels: int = 1 << 28,
                errors: str = "report", depth: Optional[int] = None, mask: Any = None,
                roi: Any = None) -> List[Dict[str, Any]]:
    """CLAHE of image files into ``output_dir`` with the many-files executor: the engine of
    ``histeq clahe INPUT... -o FOLDER``, byte for byte its outputs. ``clip_limit`` and
    ``tile_grid_size`` as :func:`clahe` (OpenCV's names and defaults; a clip limit of 0 or less
    disables clipping: ``--clip-limit 0``); every other argument as
    :func:`equalize_files` (``decoder``: ``"auto"`` or ``"cpu"``, both libjpeg-turbo for CLAHE;
    ``mask`` and ``roi``: masked CLAHE, ``histeq clahe --mask/--roi``, each tile's histogram of
    the counted pixels as :func:`clahe` takes them). Returns and raises as
    :func:`equalize_files`."""
    clip, tx, ty = _a.clahe_args(clip_limit, tile_grid_size)  # the checks of clahe()
    clip = max(clip, 0.0)  # as clahe() and OpenCV: 0 or less, no clipping (the CLI's --clip 0)
    if decoder == "gpu":
        raise ValueError("decoder: CLAHE decodes JPEGs with libjpeg-turbo ('auto' or 'cpu')")
    return _batch("clahe", (clip, tx, ty), inputs, output_dir, mode, "opencv", "auto", backend,
                  format, recursive, jobs, max_inflight_mb, devices, quality, png_level,
                  subsampling, decoder, suffix, max_pixels, errors, depth,
                  **_file_region(mask, roi))


def _batch(operation, clahe, inputs, output_dir, mode, formula, kernel, backend, format,
           recursive, jobs, max_inflight_mb, devices, quality, png_level, subsampling, decoder,
           suffix, max_pixels, errors, depth, reference=None, mask=None,
           roi=None) -> List[Dict[str, Any]]:
    """The checks and the plan of equalize_files and clahe_files, then one executor run."""
    _a.check_options(mode, formula, kernel, backend, "rgb")
    if _is_path(inputs):
        raise TypeError("inputs: expected a list of paths, got a single path")
    depth = _check_depth(depth)
    try:
        listed = list(inputs)
    except TypeError:
        raise TypeError(f"inputs: expected a list of paths, got {type(inputs).__name__}") \
            from None
    paths = [_path_text(f"inputs[{i}]", p) for i, p in enumerate(listed)]
    out_dir = _path_text("output_dir", output_dir)
    quality, png_level, subsampling = _encode_options(quality, png_level, subsampling)
    # The command line's ranges: --jobs up to the executor's kMaxJobs, megabytes whose bytes fit
    # in 64 bits, pixels in 64 bits.
    jobs = _check_int("jobs", jobs, 0, 1024)
    max_inflight_mb = (0 if max_inflight_mb is None
                       else _check_int("max_inflight_mb", max_inflight_mb, 1, (2**64 - 1) >> 20))
    max_pixels = _check_int("max_pixels", max_pixels, 1, 2**64 - 1)
    if devices is not None and (isinstance(devices, (str, bytes)) or
                                not hasattr(devices, "__iter__")):
        raise TypeError(f"devices: expected a list of CUDA device ordinals, got "
                        f"{type(devices).__name__}")
    devs = [] if devices is None else [_check_int("devices", d, 0, 1024) for d in devices]
    if devices is not None and not devs:
        raise ValueError("devices: empty list")
    _a.check_choice("decoder", decoder, _DECODERS)
    _a.check_choice("errors", errors, _ERRORS)
    if decoder == "gpu" and backend == "cpu":
        raise ValueError("decoder: 'gpu' needs the CUDA backend, not backend='cpu'")
    if decoder == "gpu" and not _histeq.CUDA_BUILT:
        raise ValueError("decoder: 'gpu' needs nvJPEG, and this histeq was built without CUDA")
    if devs and backend == "cpu":
        raise ValueError("devices: names CUDA devices, and backend='cpu' starts none (leave "
                         "devices out, or use backend='auto' or 'cuda')")
    if not isinstance(suffix, str):
        raise TypeError(f"suffix: expected a str, got {type(suffix).__name__}")
    fmt = None
    if format is not None:
        key = str(format).lower().lstrip(".")
        if key not in _FORMATS:
            raise ValueError(f"format: unknown format {format!r}; expected png, jpg, bmp, tga, "
                             f"pgm, ppm or pnm")
        fmt = _FORMATS[key]
    if backend == "cuda":
        _a.require_cuda("backend='cuda'")
    elif decoder == "gpu":  # as backend='cuda': a ValueError before any file, not a RuntimeError
        _a.require_cuda("decoder='gpu'")
    # The library's plan, the CLI's: the same files, names and collisions (histeq/inputs.hpp).
    items, unlisted = _histeq.plan_files(paths, out_dir, fmt or "", suffix,
                                         bool(recursive))
    if not items:
        if unlisted:  # nothing to do but say why
            raise _unlisted_error(unlisted[0])
        return []
    clip, tx, ty = clahe if clahe else (40.0, 8, 8)
    # The run makes the output folders once it can start (histeq::make_output_folders: an
    # OSError for the output folder; a subfolder that cannot be made fails its outputs).
    reports, _fallback = _histeq.run_files(items, mode, formula, kernel, backend, quality,
                                           png_level, subsampling, jobs, max_inflight_mb << 20,
                                           devs, max_pixels, decoder, operation, clip, tx, ty,
                                           depth or 0, reference=reference, mask=mask, roi=roi,
                                           output_dir=out_dir)
    # Inputs that could not be listed fail as items, named first, as the CLI names them.
    reports = [_unlisted_report(path, message, code) for path, message, code in unlisted] + reports
    if errors == "raise":
        if unlisted:
            raise _unlisted_error(unlisted[0])
        for r in reports:
            if not r["ok"]:
                raise _item_error(r)
    return reports
