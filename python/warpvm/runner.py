"""Finding and running the C++ binaries (warpvm-bench, warpvm-sim) built by CMake."""

from __future__ import annotations

import ctypes
import os
import re
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from warpvm.results import Record, ResultsError, parse_line
from warpvm.sizes import parse_size

BENCH = Path("bench/warpvm-bench")
SIM = Path("tools/sim/warpvm-sim")
NO_GPU_EXIT = 3
USAGE_EXIT = 2  # the binaries' exit code for arguments they refuse (an unknown option or value)
BUILD_HINT = "cmake --preset default && cmake --build build"

# The page-cache eviction policies every binary's --eviction accepts.
EVICTION_POLICIES = ("clock", "fifo")

# How long a binary may run before the runner stops it, in seconds (Suite.timeout_s for the
# suites): over ten times the timed part of the longest runs recorded under results/ (4 minutes at
# most), so that a hang meets it and a long grid does not. --timeout or $WARPVM_TIMEOUT overrides
# it; 0 is no limit.
TIMEOUT_ENV = "WARPVM_TIMEOUT"
BENCH_TIMEOUT_S = 3600.0
SIM_TIMEOUT_S = 600.0
# After the limit: SIGTERM to the binary's process group, SIGKILL if its output is still open this
# many seconds later, and the output given up this many seconds after that.
_TERM_GRACE_S = 5.0
_KILL_GRACE_S = 2.0

# The CUDA runtime's sonames, newest first, then the driver API's (which every driver installs).
CUDART_LIBRARIES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so")
CUDA_DRIVER_LIBRARIES = ("libcuda.so.1", "libcuda.so")

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


def check_eviction(name: str) -> str:
    """An eviction policy the binaries accept (EVICTION_POLICIES); returns it, else ValueError."""
    if name not in EVICTION_POLICIES:
        raise ValueError(f"unknown eviction policy {name!r} (choose from {', '.join(EVICTION_POLICIES)})")
    return name


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
    """What a binary produced: exit code, its records, and its other output lines.

    `bad_lines` says, for each stdout line that looked like a record (it starts with '{') but was
    not a valid one, which line and what was wrong; such lines are neither in `records` nor written
    out. `timed_out`: the binary ran past `timeout` seconds and was stopped (its records up to then
    are kept; `returncode` is then the signal's, negative).
    """

    returncode: int
    records: list[Record]
    messages: list[str]
    bad_lines: list[str] = field(default_factory=list)
    timed_out: bool = False
    timeout: float | None = None
    args: tuple[str, ...] = ()  # the arguments the binary was given


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

    def __post_init__(self) -> None:
        check_eviction(self.eviction)

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
    timeout_s: float = BENCH_TIMEOUT_S  # how long a run may take by default (TIMEOUT_ENV overrides it)


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
            timeout_s=1800.0,
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
            timeout_s=1800.0,
        ),
        Suite(
            "channel",
            Path("bench/warpvm-channel-bench"),
            "warpvm::channel against polling baselines (warpvm-channel-bench).",
            "--workloads",
            takes_cache_fractions=False,
            timeout_s=1800.0,
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
        for name in _eviction_values(self.extra):
            check_eviction(name)
        return [*args, *self.extra, "--out", "-"]


def _eviction_values(args: Sequence[str]) -> list[str]:
    """The values of the --eviction options among a binary's arguments (`--eviction X` or
    `--eviction=X`)."""
    values = []
    for i, arg in enumerate(args):
        if arg == "--eviction" and i + 1 < len(args):
            values.append(args[i + 1])
        elif arg.startswith("--eviction="):
            values.append(arg.removeprefix("--eviction="))
    return values


@dataclass(frozen=True)
class SimSettings:
    """Options for warpvm-sim."""

    workloads: tuple[str, ...] = ("stream", "vadd", "random_page", "hotset")
    size: str = "1GiB"
    cache_fractions: tuple[float, ...] = (1.0, 0.5, 0.25, 0.125)
    eviction: str = "clock"
    model: str = "warpvm"

    def __post_init__(self) -> None:
        check_eviction(self.eviction)

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


# Loads a shared library by name (ctypes.CDLL's signature); raises OSError when it cannot.
LibraryLoader = Callable[[str], Any]


def _load_library(name: str) -> Any:
    return ctypes.CDLL(name)


def _first_loadable(names: Sequence[str], load: LibraryLoader) -> Any | None:
    for name in names:
        try:
            return load(name)
        except OSError:
            continue
    return None


def _count_from(function: Any, *first: int) -> int:
    """Calls a CUDA `function(*first, int* count)`; the count, or 0 where it returns an error."""
    count = ctypes.c_int(0)
    function.restype = ctypes.c_int
    status = function(*first, ctypes.pointer(count))
    return count.value if status == 0 and count.value > 0 else 0


def _runtime_device_count(cudart: Any) -> int:
    return _count_from(cudart.cudaGetDeviceCount)


def _driver_device_count(cuda: Any) -> int:
    cu_init = cuda.cuInit
    cu_init.restype = ctypes.c_int
    if cu_init(0) != 0:
        return 0
    return _count_from(cuda.cuDeviceGetCount)


def cuda_device_count(load: LibraryLoader | None = None) -> int | None:
    """The CUDA devices this process would see (CUDA_VISIBLE_DEVICES applied, as the binaries see
    them): cudaGetDeviceCount of the CUDA runtime (CUDART_LIBRARIES), else cuDeviceGetCount of the
    driver API (CUDA_DRIVER_LIBRARIES). An error either returns (no driver, no device, a driver too
    old) counts as no device. None when neither library can be loaded.

    Creates no context and allocates nothing on a device. `load` (default: ctypes.CDLL) loads a
    library by name or raises OSError; tests pass their own.
    """
    load = load or _load_library
    for names, count in (
        (CUDART_LIBRARIES, _runtime_device_count),
        (CUDA_DRIVER_LIBRARIES, _driver_device_count),
    ):
        library = _first_loadable(names, load)
        if library is not None:
            try:
                return count(library)
            except Exception:  # a library without the entry point, a call ctypes refuses
                return 0
    return None


def gpu_visible(load: LibraryLoader | None = None) -> bool:
    """Whether a CUDA GPU is visible: asks CUDA (cuda_device_count), and only where no CUDA library
    can be loaded, whether `nvidia-smi -L` lists a GPU (False when nvidia-smi is absent or fails)."""
    count = cuda_device_count(load)
    if count is not None:
        return count > 0
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


def resolve_timeout(seconds: float | None, default: float) -> float | None:
    """A binary's time limit: `seconds` as given (by --timeout or TIMEOUT_ENV), else `default`;
    None (no limit) for 0."""
    limit = default if seconds is None else seconds
    return limit if limit > 0 else None


def _stop_group(process: subprocess.Popen[bytes], sig: int) -> None:
    """Sends `sig` to the binary's process group (it leads a session of its own: its children too)."""
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):  # the group is gone already
        pass


def _cut(line: str, limit: int = 120) -> str:
    return line if len(line) <= limit else line[: limit - 3] + "..."


def run_binary(
    binary: Path,
    args: Sequence[str],
    out: Path | None = None,
    on_record: Callable[[Record], None] = lambda record: None,
    on_point: Callable[[str], None] = lambda line: None,
    timeout: float | None = None,
) -> RunResult:
    """Runs a binary that writes records to stdout, streaming its output (stdout and stderr).

    Each record is validated, appended to `out` (if given) as it arrives and passed to `on_record`;
    a stdout line that starts like a record ('{') but is not a valid one is left out and reported
    in `bad_lines` (its line number and what is wrong), and the run goes on. Progress lines (see
    `point_description`) go to `on_point`; other lines, of either stream, are kept as messages.

    The binary runs in a session of its own. Past `timeout` seconds (None: no limit) its process
    group is sent SIGTERM, then SIGKILL if its output is still open _TERM_GRACE_S later, and the
    result says `timed_out`, with the records received until then. An exception out of a callback
    (or an interrupt) kills the group before it propagates.
    """
    records: list[Record] = []
    messages: list[str] = []
    bad_lines: list[str] = []
    sink: TextIO | None = None
    source = f"{binary.name} stdout"
    stdout_lines = 0

    def on_stdout(line: str, ended: bool) -> None:
        nonlocal sink, stdout_lines
        stdout_lines += 1
        if not line.lstrip().startswith("{"):
            on_text(line, ended)
            return
        try:
            record = parse_line(line, source, stdout_lines)
        except ResultsError as error:
            cut_off = "" if ended else " (the output ended inside this line)"
            bad_lines.append(f"{error}{cut_off}: {_cut(line.strip())}")
            return
        if out is not None and sink is None:
            out.parent.mkdir(parents=True, exist_ok=True)
            sink = out.open("a", encoding="utf-8")
        if sink is not None:
            sink.write(line.strip() + "\n")
            sink.flush()
        records.append(record)
        on_record(record)

    def on_text(line: str, ended: bool) -> None:
        if point_description(line) is not None:
            on_point(line)
        elif line.strip():
            messages.append(line)

    timed_out = False
    with subprocess.Popen(
        [str(binary), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        handlers: dict[int, Callable[[str, bool], None]] = {
            process.stdout.fileno(): on_stdout,
            process.stderr.fileno(): on_text,
        }
        pending = {fd: b"" for fd in handlers}
        deadline = None if timeout is None else time.monotonic() + timeout
        # Past the deadline: SIGTERM, then SIGKILL, each with a grace for the output to close; past
        # the last, the output is given up (something outside the group holds it open).
        escalation = [(signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, _KILL_GRACE_S)]
        try:
            with selectors.DefaultSelector() as selector:
                for fd in handlers:
                    selector.register(fd, selectors.EVENT_READ)
                while selector.get_map():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        timed_out = True
                        if not escalation:
                            break
                        sig, grace = escalation.pop(0)
                        _stop_group(process, sig)
                        deadline = time.monotonic() + grace
                        continue
                    for key, _ in selector.select(remaining):
                        fd = key.fd
                        chunk = os.read(fd, 65536)
                        if not chunk:
                            selector.unregister(fd)
                            if pending[fd]:
                                handlers[fd](pending[fd].decode("utf-8", errors="replace"), False)
                            continue
                        *lines, pending[fd] = (pending[fd] + chunk).split(b"\n")
                        for raw in lines:
                            handlers[fd](raw.decode("utf-8", errors="replace").rstrip("\r"), True)
            try:
                # A second at least: a binary that closed its output may not have exited yet.
                wait = None if deadline is None else max(deadline - time.monotonic(), 1.0)
                process.wait(wait)
            except subprocess.TimeoutExpired:  # it closed its output but went on running
                timed_out = True
                _stop_group(process, signal.SIGKILL)
                process.wait()
        except BaseException:
            _stop_group(process, signal.SIGKILL)
            raise
        finally:
            if sink is not None:
                sink.close()
    return RunResult(process.returncode, records, messages, bad_lines, timed_out, timeout, tuple(args))
