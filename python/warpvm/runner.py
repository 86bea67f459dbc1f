"""Finding and running the C++ binaries (warpvm-bench, warpvm-sim) built by CMake."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from warpvm.results import Record, parse_line
from warpvm.sizes import parse_size

BENCH = Path("bench/warpvm-bench")
SIM = Path("tools/sim/warpvm-sim")
NO_GPU_EXIT = 3
BUILD_HINT = "cmake --preset default && cmake --build build"

BENCH_WORKLOADS = ("stream", "vadd", "random_page", "sparse_read", "resident")
BENCH_MODES = (
    "explicit",
    "uvm",
    "uvm_prefetch",
    "zero_copy",
    "warpvm",
    "warpvm_auto",
    "warpvm_uvm",
    "warpvm_remote",
    "device",
)

# Records warpvm-bench writes per (workload, mode): (count, whether once per cache fraction).
_BASELINES = {mode: (1, False) for mode in ("explicit", "zero_copy", "uvm", "uvm_prefetch")}
_BENCH_POINTS: dict[str, dict[str, tuple[int, bool]]] = {
    "stream": _BASELINES | {"warpvm": (1, True), "warpvm_auto": (1, True), "warpvm_uvm": (1, False)},
    "vadd": _BASELINES | {"warpvm": (1, True), "warpvm_auto": (1, True), "warpvm_uvm": (1, False)},
    "random_page": {
        "zero_copy": (1, False),
        "uvm": (1, False),
        "warpvm": (1, True),
        "warpvm_auto": (1, True),
        "warpvm_uvm": (1, False),
    },
    "sparse_read": {
        m: (1, False) for m in ("zero_copy", "device", "uvm", "warpvm_remote", "warpvm", "warpvm_auto")
    },
    # device: vector, element and chunked patterns (the last two also with ILP 4); warpvm: span,
    # element, cursor (the last two also with ILP 4), each without and with eviction possible.
    "resident": {"device": (5, False), "warpvm": (10, False)},
}

# warpvm-bench's line per point: "stream  warpvm  cache=0.500  0.0841 s  51.10 GB/s useful  verified".
_POINT_LINE = re.compile(r"^(?P<workload>\S+)\s+(?P<mode>\S+)\s+cache=(?P<cache>\S+)\s.*GB/s useful")


def _fraction_list(fractions: Sequence[float]) -> str:
    """Cache fractions as the binaries' --cache-fractions takes them: '1,0.5,0.25'."""
    return ",".join(f"{f:g}" for f in fractions)


class MissingBinaryError(FileNotFoundError):
    """A binary the command needs has not been built."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} not found: build first ({BUILD_HINT})")
        self.path = path


@dataclass(frozen=True)
class RunResult:
    """What a binary produced: exit code, its records, and its other output lines."""

    returncode: int
    records: list[Record]
    messages: list[str]


@dataclass(frozen=True)
class BenchSettings:
    """Options for warpvm-bench."""

    workloads: tuple[str, ...] = BENCH_WORKLOADS
    modes: tuple[str, ...] = BENCH_MODES
    size: str = "16GiB"
    cache_fractions: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125)
    repeats: int = 3
    eviction: str = "clock"
    commit: str = "unknown"
    driver: str = "unknown"

    def args(self) -> list[str]:
        """Command-line arguments; records go to stdout."""
        return [
            *("--workloads", ",".join(self.workloads)),
            *("--modes", ",".join(self.modes)),
            *("--bytes", self.size),
            *("--cache-fractions", _fraction_list(self.cache_fractions)),
            *("--repeats", str(self.repeats)),
            *("--eviction", self.eviction),
            *("--commit", self.commit),
            *("--driver", self.driver),
            *("--out", "-"),
        ]

    def expected_points(self) -> int:
        """How many records the run should write (approximate if the binary changes)."""
        total = 0
        for workload in self.workloads:
            for mode, (count, per_fraction) in _BENCH_POINTS.get(workload, {}).items():
                if mode in self.modes:
                    total += count * (len(self.cache_fractions) if per_fraction else 1)
        return total


@dataclass(frozen=True)
class Suite:
    """An application benchmark binary that `warpvm bench <name>` drives.

    The binary owns its workloads and modes (and rejects unknown ones with its own message), so
    the command passes lists through and leaves unset options at the binary's defaults.
    """

    name: str
    binary: Path
    summary: str
    workload_flag: str | None  # the binary's option that selects workloads; None: it has one
    takes_cache_fractions: bool


SUITES: dict[str, Suite] = {
    suite.name: suite
    for suite in (
        Suite(
            "graph",
            Path("bench/warpvm-graph-bench"),
            "BFS, CC and SSSP over a generated graph, every memory mode and cache size (warpvm-graph-bench).",
            "--apps",
            takes_cache_fractions=True,
        ),
        Suite(
            "apps",
            Path("bench/warpvm-apps-bench"),
            "Polybench MVT/ATAX/BICG and the columnar trip query in every memory mode (warpvm-apps-bench).",
            "--workloads",
            takes_cache_fractions=True,
        ),
        Suite(
            "alloc",
            Path("bench/warpvm-alloc-bench"),
            "Device-side allocation: warpvm::Heap against CUDA's device malloc (warpvm-alloc-bench).",
            "--workloads",
            takes_cache_fractions=False,
        ),
        Suite(
            "placement",
            Path("bench/warpvm-placement-bench"),
            "OASIS placement across the visible GPUs, every page policy (warpvm-placement-bench).",
            "--workloads",
            takes_cache_fractions=False,
        ),
        Suite(
            "walk",
            Path("bench/warpvm-walk-bench"),
            "The allocator paper's random-walk clustering case, every allocator mode (warpvm-walk-bench).",
            None,
            takes_cache_fractions=False,
        ),
        Suite(
            "channel",
            Path("bench/warpvm-channel-bench"),
            "warpvm::channel against polling baselines (warpvm-channel-bench).",
            "--workloads",
            takes_cache_fractions=False,
        ),
    )
}


@dataclass(frozen=True)
class SuiteSettings:
    """One `warpvm bench <suite>` run: the grid (None: the binary's default) and extra options."""

    suite: Suite
    workloads: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None
    cache_fractions: tuple[float, ...] | None = None
    repeats: int | None = None
    commit: str = "unknown"
    driver: str = "unknown"
    extra: tuple[str, ...] = ()

    def args(self) -> list[str]:
        """Command-line arguments; records go to stdout."""
        args: list[str] = []
        if self.workloads:
            if self.suite.workload_flag is None:
                raise ValueError(
                    f"warpvm bench {self.suite.name} has one workload; "
                    "shape it with the binary's options after --"
                )
            args += [self.suite.workload_flag, ",".join(self.workloads)]
        if self.modes:
            args += ["--modes", ",".join(self.modes)]
        if self.cache_fractions:
            if not self.suite.takes_cache_fractions:
                raise ValueError(f"warpvm bench {self.suite.name} has no cache sizes (--cache-fractions)")
            args += ["--cache-fractions", _fraction_list(self.cache_fractions)]
        if self.repeats is not None:
            args += ["--repeats", str(self.repeats)]
        args += ["--commit", self.commit, "--driver", self.driver]
        return [*args, *self.extra, "--out", "-"]


@dataclass(frozen=True)
class SimSettings:
    """Options for warpvm-sim."""

    workloads: tuple[str, ...] = ("stream", "vadd", "random_page", "hotset")
    size: str = "1GiB"
    cache_fractions: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125)
    eviction: str = "clock"
    model: str = "warpvm"

    def args(self) -> list[str]:
        """Command-line arguments; records go to stdout."""
        return [
            *("--workloads", ",".join(self.workloads)),
            *("--bytes", self.size),
            *("--cache-fractions", _fraction_list(self.cache_fractions)),
            *("--eviction", self.eviction),
            *("--model", self.model),
            *("--out", "-"),
        ]


def check_size(text: str) -> str:
    """Validates a size as the binaries accept it (e.g. 16GiB, 512MiB, 4096); returns it."""
    parse_size(text)
    return text


def resolve_build_dir(option: Path | None) -> Path:
    """The build directory: --build-dir, else $WARPVM_BUILD_DIR, else the checkout's build/."""
    if option is not None:
        return option
    if env := os.environ.get("WARPVM_BUILD_DIR"):
        return Path(env)
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "CMakeLists.txt").is_file():
        return checkout / "build"
    return Path.cwd() / "build"


def find_binary(build_dir: Path, relative: Path) -> Path:
    """The executable `build_dir/relative`, or MissingBinaryError."""
    path = build_dir / relative
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise MissingBinaryError(path)
    return path


def _output(command: Sequence[str], cwd: Path | None = None) -> str | None:
    """A command's stdout, or None if it is absent (FileNotFoundError) or fails."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def gpu_visible() -> bool:
    """Whether `nvidia-smi -L` lists a GPU (False when nvidia-smi is absent or fails)."""
    listing = _output(["nvidia-smi", "-L"])
    return listing is not None and any(line.startswith("GPU ") for line in listing.splitlines())


def driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or 'unknown'."""
    text = _output(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])
    words = text.split() if text else []
    return words[0] if words else "unknown"


def git_commit(where: Path) -> str:
    """The short commit of the checkout containing `where`, or 'unknown'."""
    text = _output(["git", "rev-parse", "--short", "HEAD"], cwd=where if where.is_dir() else None)
    return text.strip() if text and text.strip() else "unknown"


def point_description(line: str) -> str | None:
    """'workload mode cache=…' for a human progress line of warpvm-bench, else None."""
    match = _POINT_LINE.match(line)
    if match is None:
        return None
    return f"{match['workload']} {match['mode']} cache={match['cache']}"


def run_binary(
    binary: Path,
    args: Sequence[str],
    out: Path | None = None,
    on_record: Callable[[Record], None] = lambda record: None,
    on_point: Callable[[str], None] = lambda line: None,
) -> RunResult:
    """Runs a binary that writes records to stdout, streaming its output (stdout and stderr).

    Each record is validated, appended to `out` (if given) as it arrives and passed to `on_record`;
    progress lines (see `point_description`) go to `on_point`; other lines are kept as messages.
    """
    records: list[Record] = []
    messages: list[str] = []
    sink: TextIO | None = None
    with subprocess.Popen(
        [str(binary), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        try:
            assert process.stdout is not None
            for number, raw in enumerate(process.stdout, start=1):
                line = raw.rstrip("\n")
                if line.lstrip().startswith("{"):
                    record = parse_line(line, f"{binary.name} output", number)
                    if out is not None and sink is None:
                        out.parent.mkdir(parents=True, exist_ok=True)
                        sink = out.open("a", encoding="utf-8")
                    if sink is not None:
                        sink.write(line.strip() + "\n")
                        sink.flush()
                    records.append(record)
                    on_record(record)
                elif point_description(line) is not None:
                    on_point(line)
                elif line.strip():
                    messages.append(line)
        except BaseException:
            process.kill()
            raise
        finally:
            if sink is not None:
                sink.close()
    return RunResult(process.returncode, records, messages)
