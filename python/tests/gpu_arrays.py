"""GPU tensors for the tests of paged arrays and ops: torch if it is installed, else cupy; the
tests that need one skip, saying why, where there is no GPU or neither library."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import warpvm


class Backend:
    """Moves numpy arrays to the GPU and back in one framework."""

    def __init__(self, name: str, module: Any) -> None:
        self.name = name
        self.module = module

    def to_gpu(self, array: np.ndarray) -> Any:
        if self.name == "torch":
            return self.module.from_numpy(np.ascontiguousarray(array)).cuda()
        return self.module.asarray(array)

    def to_gpu_as(self, array: np.ndarray, dtype: str) -> Any:
        """to_gpu, with bfloat16 (numpy's uint16 bits) as the framework's bfloat16 (torch only)."""
        if dtype != "bfloat16":
            return self.to_gpu(array)
        if self.name != "torch":
            pytest.skip("cupy has no bfloat16: a bfloat16 GPU tensor needs torch")
        return self.to_gpu(array.view(np.int16)).view(self.module.bfloat16)

    def to_numpy(self, tensor: Any) -> np.ndarray:
        if self.name == "torch":
            if tensor.dtype == self.module.bfloat16:
                return tensor.view(self.module.int16).cpu().numpy().view(np.uint16)
            return tensor.cpu().numpy()
        return self.module.asnumpy(tensor)

    def synchronize(self) -> None:
        if self.name == "torch":
            self.module.cuda.synchronize()
        else:
            self.module.cuda.runtime.deviceSynchronize()


def gpu_backend() -> Backend:
    """torch, else cupy; skips the test without a GPU or without either."""
    if warpvm.device_count() == 0:
        pytest.skip("no CUDA device visible: GPU test skipped")
    for name in ("torch", "cupy"):
        try:
            return Backend(name, importlib.import_module(name))
        except ImportError:
            continue
    pytest.skip("neither torch nor cupy is installed: GPU tensor test skipped")
