"""warpvm.Runtime and warpvm.Error: the extension module (warpvm._warpvm), no GPU needed."""

from __future__ import annotations

import importlib
import pickle
import re
import subprocess
import sys

import pytest

import warpvm
from warpvm import _warpvm

GPU_VISIBLE = warpvm.device_count() > 0

# warpvm::Error::what(): "warpvm: <kind>: <what> (<file>:<line>)".
LIBRARY_MESSAGE = r"^warpvm: {kind}: {what} \(\S+\.cpp:\d+\)$"


def library_message(kind: str, what: str) -> str:
    return LIBRARY_MESSAGE.format(kind=re.escape(kind), what=re.escape(what))


def raised(**kwargs: object) -> warpvm.Error:
    with pytest.raises(warpvm.Error) as info:
        warpvm.Runtime(**kwargs)  # type: ignore[arg-type]
    return info.value


def test_error_is_an_exception_with_a_kind() -> None:
    assert issubclass(warpvm.Error, Exception)
    assert issubclass(warpvm.Error, RuntimeError)
    error = warpvm.Error("warpvm: no device: none", "no_device")
    assert error.kind is warpvm.ErrorKind.no_device
    assert error.kind == "no_device"
    assert str(error) == "warpvm: no device: none"
    copy = pickle.loads(pickle.dumps(error))
    assert (type(copy), str(copy), copy.kind) == (warpvm.Error, str(error), error.kind)
    with pytest.raises(ValueError):
        warpvm.Error("message", "no_such_kind")


def test_error_kinds_match_the_library() -> None:
    assert [kind.value for kind in warpvm.ErrorKind] == _warpvm.error_kinds()


@pytest.mark.parametrize(
    ("kwargs", "what"),
    [
        ({"page_bytes": 3000}, "page_bytes = 3000 must be a power of two between 512 B and 2 MiB"),
        ({"page_bytes": "4MiB"}, "page_bytes = 4194304 must be a power of two between 512 B and 2 MiB"),
        ({"cache": 1024}, "cache_bytes = 1024 is smaller than one page of 4096 B"),
        ({"device": -1}, "device must be a CUDA ordinal >= 0"),
        ({"eviction": "lru"}, "eviction = 'lru' must be clock or fifo"),
    ],
)
def test_bad_config_raises_the_library_message(kwargs: dict[str, object], what: str) -> None:
    """Refused before any CUDA call: the same error with or without a GPU."""
    error = raised(**kwargs)
    assert error.kind is warpvm.ErrorKind.invalid_config
    assert re.match(library_message("invalid config", what), str(error)), str(error)


@pytest.mark.parametrize("cache", ["-1", "8 GiB", "8GB", -1, 2**64])
def test_bad_size_raises_invalid_config(cache: object) -> None:
    error = raised(cache=cache)
    assert error.kind is warpvm.ErrorKind.invalid_config
    assert str(error).startswith(f"warpvm: invalid config: cache: bad size {cache!r}")


def test_make_config_validates_without_a_gpu() -> None:
    config = warpvm.make_config(cache="8GiB", page_bytes="64KiB", eviction="fifo", checked=True)
    assert (config.cache_bytes, config.page_bytes, config.eviction, config.checked) == (
        8 << 30,
        64 << 10,
        "fifo",
        True,
    )
    assert config.describe().startswith("cache=8589934592 B page=65536 B eviction=fifo")
    # cache=None leaves the library's default: a share of the device's free memory.
    assert warpvm.make_config().cache_bytes == 0
    with pytest.raises(warpvm.Error, match="must be a power of two"):
        warpvm.make_config(page_bytes=3000)


def test_automatic_placement_shares_are_the_librarys_and_validated() -> None:
    config = warpvm.make_config()
    assert (config.automatic_remote_share, config.automatic_remote_share_evicting) == (1 / 16, 1.0)
    config.automatic_remote_share_evicting = 65.0
    with pytest.raises(warpvm.Error, match="automatic_remote_share_evicting = 65.* must be in \\[0, 64\\]"):
        config.validate()


@pytest.mark.skipif(GPU_VISIBLE, reason="a GPU is visible")
def test_runtime_without_a_gpu_raises_no_device() -> None:
    assert warpvm.device_count() == 0
    error = raised(cache="8GiB", page_bytes=4096, eviction="clock", device=0, checked=False)
    assert error.kind is warpvm.ErrorKind.no_device
    assert re.match(
        library_message(
            "no device", "no CUDA device is visible; warpvm needs a GPU (the simulator does not)"
        ),
        str(error),
    ), str(error)


@pytest.mark.skipif(not GPU_VISIBLE, reason="no GPU visible")
def test_runtime_on_a_gpu_is_a_context_manager() -> None:
    with warpvm.Runtime(cache="64MiB", page_bytes="64KiB") as rt:
        assert (rt.cache_bytes, rt.page_bytes, rt.frame_count, rt.device) == (64 << 20, 64 << 10, 1024, 0)
        assert not rt.closed
    assert rt.closed
    with pytest.raises(warpvm.Error, match="this Runtime is closed") as info:
        _ = rt.cache_bytes
    assert info.value.kind is warpvm.ErrorKind.invalid_argument
    rt.close()


@pytest.mark.parametrize(
    ("text", "size"),
    [
        (4096, 4096),
        ("4096", 4096),
        ("8GiB", 8 << 30),
        ("8G", 8 << 30),
        ("512MiB", 512 << 20),
        ("4KiB", 4096),
        ("1.5KiB", 1536),
        ("1.5B", 1),
        ("0", 0),
    ],
)
def test_sizes_parse(text: int | str, size: int) -> None:
    assert warpvm.parse_size(text) == size


@pytest.mark.parametrize("bad", ["-1", "8 GiB", "8GB", "GiB", "", "1e9", -1, 2**64, True, 1.5])
def test_bad_sizes_do_not_parse(bad: object) -> None:
    with pytest.raises(ValueError, match="bad size"):
        warpvm.parse_size(bad)  # type: ignore[arg-type]


def test_missing_extension_says_how_to_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "warpvm._warpvm", None)
    monkeypatch.delattr(warpvm, "_warpvm")
    monkeypatch.delitem(sys.modules, "warpvm.runtime")
    with pytest.raises(ImportError, match=r"warpvm\._warpvm is not built.*pip install \./python"):
        importlib.import_module("warpvm.runtime")


def test_the_command_line_does_not_load_the_extension() -> None:
    code = "import sys, warpvm.cli; sys.exit('warpvm._warpvm' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
