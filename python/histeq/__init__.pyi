"""Type stubs of histeq (see histeq/__init__.py for the documentation of each call)."""
import os
from typing import (Any, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, TypeVar, Union,
                    overload)

import numpy as np
import numpy.typing as npt

from . import _arrays as _arrays
from . import _files as _files
from . import _region as _region

__version__: str
__all__ = ["equalize", "histogram", "clahe", "match_histograms", "kernels", "equalize_files",
           "clahe_files", "match_files", "cuda_available",
           "load_image", "save_image", "MODES", "FORMULAS", "BACKENDS", "CHANNEL_ORDERS",
           "__version__"]
MODES: Tuple[str, ...]
FORMULAS: Tuple[str, ...]
BACKENDS: Tuple[str, ...]
CHANNEL_ORDERS: Tuple[str, ...]

_Mode = Literal["luma", "rgb", "gray"]
_Formula = Literal["opencv", "exact"]
_Backend = Literal["auto", "cuda", "cpu"]
_Order = Literal["rgb", "bgr"]
_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]
#: An int, or NumPy's (np.int64(16)).
_Int = Union[int, np.integer[Any]]
#: Two ints (columns, rows) as a tuple, list or array, or one int n for (n, n).
_Grid = Union[int, Sequence[int], npt.NDArray[np.integer[Any]]]

#: A mask: an array of the image's height x width (NumPy, PyTorch, CuPy), bool or integers.
_Mask = Any
#: A rectangle (x, y, width, height), as a tuple, list or array of ints.
_Roi = Union[Tuple[int, int, int, int], Sequence[int], npt.NDArray[np.integer[Any]]]
#: A number: Python's or NumPy's (np.float32(2.0)).
_Number = Union[float, np.floating[Any], np.integer[Any]]
#: True, False or None (guess), Python's bool or NumPy's.
_Batch = Optional[Union[bool, np.bool_]]

#: A NumPy uint8 or uint16 array, a PyTorch tensor, a CuPy array or any CUDA array
#: (__cuda_array_interface__ / DLPack); the result is of the same kind. out= (keyword-only,
#: one image or batch: no list) takes an array of that kind, on the image's device,
#: C-contiguous, of exactly the result's shape and dtype, and returns it.
_A = TypeVar("_A")

@overload
def equalize(image: Union[List[_A], Tuple[_A, ...]], *, mode: Optional[_Mode] = ...,
             formula: _Formula = ..., kernel: str = ..., backend: _Backend = ...,
             batch: _Batch = ..., channel_order: _Order = ...,
             mask: Optional[_Mask] = ..., roi: Optional[_Roi] = ...,
             out: None = ...) -> List[_A]: ...
@overload
def equalize(image: _A, *, mode: Optional[_Mode] = ..., formula: _Formula = ...,
             kernel: str = ..., backend: _Backend = ..., batch: _Batch = ...,
             channel_order: _Order = ..., mask: Optional[_Mask] = ...,
             roi: Optional[_Roi] = ..., out: Optional[_A] = ...) -> _A: ...

@overload
def histogram(image: Union[List[Any], Tuple[Any, ...]], bins: Optional[_Int] = ...,
              kernel: str = ..., *, mode: Optional[_Mode] = ..., backend: _Backend = ...,
              batch: _Batch = ..., channel_order: _Order = ...,
              mask: Optional[_Mask] = ..., roi: Optional[_Roi] = ...,
              out: None = ...) -> List[Any]: ...
@overload
def histogram(image: npt.NDArray[Any], bins: Optional[_Int] = ..., kernel: str = ..., *,
              mode: Optional[_Mode] = ..., backend: _Backend = ..., batch: _Batch = ...,
              channel_order: _Order = ..., mask: Optional[_Mask] = ...,
              roi: Optional[_Roi] = ...,
              out: Optional[npt.NDArray[np.int64]] = ...) -> npt.NDArray[np.int64]: ...
@overload
def histogram(image: Any, bins: Optional[_Int] = ..., kernel: str = ..., *,
              mode: Optional[_Mode] = ..., backend: _Backend = ..., batch: _Batch = ...,
              channel_order: _Order = ..., mask: Optional[_Mask] = ...,
              roi: Optional[_Roi] = ..., out: Optional[Any] = ...) -> Any: ...

@overload
def match_histograms(image: Union[List[_A], Tuple[_A, ...]], reference: Any, *,
                     mode: Optional[_Mode] = ..., backend: _Backend = ...,
                     batch: _Batch = ..., channel_order: _Order = ...,
                     out: None = ...) -> List[_A]: ...
@overload
def match_histograms(image: _A, reference: Any, *, mode: Optional[_Mode] = ...,
                     backend: _Backend = ..., batch: _Batch = ...,
                     channel_order: _Order = ..., out: Optional[_A] = ...) -> _A: ...

@overload
def clahe(image: Union[List[_A], Tuple[_A, ...]], clip_limit: _Number = ...,
          tile_grid_size: _Grid = ..., *, mode: Optional[_Mode] = ..., backend: _Backend = ...,
          batch: _Batch = ..., channel_order: _Order = ...,
          mask: Optional[_Mask] = ..., roi: Optional[_Roi] = ...,
          out: None = ...) -> List[_A]: ...
@overload
def clahe(image: _A, clip_limit: _Number = ..., tile_grid_size: _Grid = ..., *,
          mode: Optional[_Mode] = ..., backend: _Backend = ..., batch: _Batch = ...,
          channel_order: _Order = ..., mask: Optional[_Mask] = ...,
          roi: Optional[_Roi] = ..., out: Optional[_A] = ...) -> _A: ...

def kernels() -> List[Dict[str, Any]]: ...
def __dir__() -> List[str]: ...
def cuda_available() -> bool: ...
def _cuda_why() -> str: ...
def _set_batch_path(path: str) -> str: ...
def load_image(path: _Path, depth: Optional[Literal[8, 16]] = ...) -> npt.NDArray[Any]: ...
def save_image(path: _Path, image: Any, quality: int = ...) -> None: ...
def equalize_files(inputs: Iterable[_Path], output_dir: _Path, *,
                   mode: Optional[_Mode] = ..., formula: _Formula = ..., kernel: str = ...,
                   backend: _Backend = ..., format: Optional[str] = ..., recursive: bool = ...,
                   jobs: int = ..., max_inflight_mb: Optional[int] = ...,
                   devices: Optional[Sequence[int]] = ..., quality: int = ...,
                   png_level: Optional[int] = ..., subsampling: Union[str, int] = ...,
                   decoder: Literal["auto", "cpu", "gpu"] = ..., suffix: str = ...,
                   max_pixels: int = ...,
                   errors: Literal["report", "raise"] = ...,
                   depth: Optional[Literal[8, 16]] = ..., mask: Optional[Any] = ...,
                   roi: Optional[_Roi] = ...) -> List[Dict[str, Any]]: ...
def match_files(inputs: Iterable[_Path], output_dir: _Path, reference: Any, *,
                mode: Optional[_Mode] = ..., backend: _Backend = ...,
                format: Optional[str] = ..., recursive: bool = ..., jobs: int = ...,
                max_inflight_mb: Optional[int] = ..., devices: Optional[Sequence[int]] = ...,
                quality: int = ..., png_level: Optional[int] = ...,
                subsampling: Union[str, int] = ...,
                decoder: Literal["auto", "cpu", "gpu"] = ..., suffix: str = ...,
                max_pixels: int = ..., errors: Literal["report", "raise"] = ...,
                depth: Optional[Literal[8, 16]] = ...) -> List[Dict[str, Any]]: ...
def clahe_files(inputs: Iterable[_Path], output_dir: _Path, clip_limit: _Number = ...,
                tile_grid_size: _Grid = ..., *, mode: Optional[_Mode] = ...,
                backend: _Backend = ..., format: Optional[str] = ..., recursive: bool = ...,
                jobs: int = ..., max_inflight_mb: Optional[int] = ...,
                devices: Optional[Sequence[int]] = ..., quality: int = ...,
                png_level: Optional[int] = ..., subsampling: Union[str, int] = ...,
                decoder: Literal["auto", "cpu"] = ..., suffix: str = ..., max_pixels: int = ...,
                errors: Literal["report", "raise"] = ...,
                depth: Optional[Literal[8, 16]] = ..., mask: Optional[Any] = ...,
                roi: Optional[_Roi] = ...) -> List[Dict[str, Any]]: ...
