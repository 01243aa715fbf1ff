"""Type stubs of histeq (see histeq/__init__.py for the documentation of each call)."""
import os
from typing import Any, Dict, Iterable, List, Literal, Optional, Sequence, Tuple, TypeVar, Union, overload

import numpy as np
import numpy.typing as npt

__version__: str
MODES: Tuple[str, ...]
FORMULAS: Tuple[str, ...]
BACKENDS: Tuple[str, ...]

Mode = Literal["luma", "rgb", "gray"]
Formula = Literal["opencv", "exact"]
Backend = Literal["auto", "cuda", "cpu"]
PathLike = Union[str, os.PathLike]

#: A NumPy uint8 or uint16 array, a PyTorch tensor, a CuPy array or any CUDA array
#: (__cuda_array_interface__ / DLPack); the result is of the same kind.
A = TypeVar("A")

@overload
def equalize(image: List[A], *, mode: Optional[Mode] = ..., formula: Formula = ...,
             kernel: str = ..., backend: Backend = ..., batch: Optional[bool] = ...) -> List[A]: ...
@overload
def equalize(image: A, *, mode: Optional[Mode] = ..., formula: Formula = ...,
             kernel: str = ..., backend: Backend = ..., batch: Optional[bool] = ...) -> A: ...

@overload
def histogram(image: List[Any], bins: Optional[int] = ..., kernel: str = ..., *,
              mode: Optional[Mode] = ..., backend: Backend = ...,
              batch: Optional[bool] = ...) -> List[Any]: ...
@overload
def histogram(image: Any, bins: Optional[int] = ..., kernel: str = ..., *,
              mode: Optional[Mode] = ..., backend: Backend = ...,
              batch: Optional[bool] = ...) -> Any: ...

@overload
def clahe(image: List[A], *, clip: float = ..., tiles: Union[int, Tuple[int, int]] = ...,
          mode: Optional[Mode] = ..., backend: Backend = ...,
          batch: Optional[bool] = ...) -> List[A]: ...
@overload
def clahe(image: A, *, clip: float = ..., tiles: Union[int, Tuple[int, int]] = ...,
          mode: Optional[Mode] = ..., backend: Backend = ..., batch: Optional[bool] = ...) -> A: ...

def kernels() -> List[Dict[str, Any]]: ...
def cuda_available() -> bool: ...
def load_image(path: PathLike, depth: Optional[Literal[8, 16]] = ...) -> npt.NDArray[Any]: ...
def save_image(image: npt.NDArray[Any], path: PathLike, quality: int = ...) -> None: ...
def equalize_files(inputs: Iterable[PathLike], output_dir: PathLike, *,
                   mode: Optional[Mode] = ..., formula: Formula = ..., kernel: str = ...,
                   backend: Backend = ..., format: Optional[str] = ..., recursive: bool = ...,
                   jobs: int = ..., max_inflight_mb: Optional[int] = ...,
                   devices: Optional[Sequence[int]] = ..., quality: int = ...,
                   png_level: Optional[int] = ..., subsampling: Union[str, int] = ...,
                   decoder: Literal["auto", "cpu", "gpu"] = ..., suffix: str = ...,
                   max_pixels: int = ...,
                   errors: Literal["report", "raise"] = ...) -> List[Dict[str, Any]]: ...
