"""Finding the binaries, detecting a GPU and streaming a binary's output."""

from __future__ import annotations

import ctypes
import json
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import record, write_script

from warpvm import runner
from warpvm.results import REQUIRED_FIELDS, Record


def test_check_size() -> None:
    assert runner.check_size("16GiB") == "16GiB"
    assert runner.check_size("1.5MiB") == "1.5MiB"
    assert runner.check_size("4096") == "4096"
    for bad in ("16 GiB", "GiB", "16GB", "-1K"):
        with pytest.raises(ValueError, match="bad size"):
            runner.check_size(bad)


def test_build_dir_from_option_then_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WARPVM_BUILD_DIR", str(tmp_path / "env"))
    assert runner.resolve_build_dir(tmp_path / "opt") == tmp_path / "opt"
    assert runner.resolve_build_dir(None) == tmp_path / "env"
    monkeypatch.delenv("WARPVM_BUILD_DIR")
    assert runner.resolve_build_dir(None).name == "build"


def test_find_binary(tmp_path: Path) -> None:
    script = write_script(tmp_path / "bench" / "warpvm-bench", "exit 0\n")
    assert runner.find_binary(tmp_path, runner.BENCH) == script
    script.chmod(0o644)
    with pytest.raises(runner.MissingBinaryError) as error:
        runner.find_binary(tmp_path, runner.BENCH)
    assert (
        str(error.value) == f"{script} not found: build first (cmake --preset default && cmake --build build)"
    )
    with pytest.raises(runner.MissingBinaryError, match="tools/sim/warpvm-sim not found"):
        runner.find_binary(tmp_path, runner.SIM)


def test_bench_arguments_and_expected_points() -> None:
    full = runner.BenchSettings(size="4GiB", commit="abc1234", driver="580.159.04")
    args = full.args()
    assert args[args.index("--bytes") + 1] == "4GiB"
    assert args[args.index("--cache-fractions") + 1] == "1,0.5,0.25,0.125"
    assert args[args.index("--workloads") + 1] == "stream,vadd,random_page,sparse_read,resident"
    assert args[-2:] == ["--out", "-"]
    # The 45 records of bench/results/h200/paging-16GiB-a5a0fae.jsonl, plus warpvm_auto: stream,
    # vadd and random_page at each of the 4 cache sizes, sparse_read once.
    assert full.expected_points() == 45 + 3 * 4 + 1
    subset = runner.BenchSettings(
        workloads=("stream", "sparse_read"), modes=("uvm", "warpvm"), cache_fractions=(1, 0.5)
    )
    assert subset.expected_points() == (1 + 2) + (1 + 1)


def test_sim_arguments() -> None:
    assert runner.SimSettings().args() == [
        *("--workloads", "stream,vadd,random_page,hotset"),
        *("--bytes", "1GiB"),
        *("--cache-fractions", "1,0.5,0.25,0.125"),
        *("--eviction", "clock"),
        *("--model", "warpvm"),
        *("--out", "-"),
    ]


def test_gpu_visible_from_nvidia_smi(fake_path: Path) -> None:
    smi = write_script(fake_path / "nvidia-smi", 'echo "GPU 0: NVIDIA H200 (UUID: GPU-1234)"\n')
    assert runner.gpu_visible()
    write_script(smi, 'echo "No devices were found"\nexit 6\n')
    assert not runner.gpu_visible()
    write_script(smi, "echo\n")
    assert not runner.gpu_visible()


class FakeLoader:
    """A library loader for runner.gpu_visible: `libraries` by name, OSError for any other; the
    names asked for in `tried`."""

    def __init__(self, **libraries: Any) -> None:
        self.libraries = libraries
        self.tried: list[str] = []

    def __call__(self, name: str) -> Any:
        self.tried.append(name)
        if name not in self.libraries:
            raise OSError(f"{name}: cannot open shared object file")
        return self.libraries[name]


def cudart(status: int = 0, count: int = 1) -> SimpleNamespace:
    """A CUDA runtime whose cudaGetDeviceCount returns `status` and writes `count`."""

    def cudaGetDeviceCount(pointer: Any) -> int:  # noqa: N802 (the C name)
        pointer.contents.value = count
        return status

    return SimpleNamespace(cudaGetDeviceCount=cudaGetDeviceCount)


def cuda_driver(init_status: int = 0, count: int = 1) -> SimpleNamespace:
    """A driver API library: cuInit returns `init_status`, cuDeviceGetCount writes `count`."""

    def cuInit(flags: int) -> int:  # noqa: N802
        assert flags == 0
        return init_status

    def cuDeviceGetCount(pointer: Any) -> int:  # noqa: N802
        pointer.contents.value = count
        return 0

    return SimpleNamespace(cuInit=cuInit, cuDeviceGetCount=cuDeviceGetCount)


@pytest.fixture
def smi_lists_a_gpu(fake_path: Path) -> Path:
    """An nvidia-smi that lists a GPU and leaves a file `asked` behind: the CUDA answers must win."""
    write_script(fake_path / "nvidia-smi", 'touch "$(dirname "$0")/asked"\necho "GPU 0: NVIDIA H200"\n')
    return fake_path / "asked"


def test_gpu_visible_asks_the_cuda_runtime(smi_lists_a_gpu: Path) -> None:
    two = FakeLoader(**{"libcudart.so.12": cudart(count=2)})
    assert runner.gpu_visible(two) and runner.cuda_device_count(two) == 2
    assert two.tried[:2] == ["libcudart.so.13", "libcudart.so.12"]  # newest soname first
    # Loaded, but no driver (cudaErrorInsufficientDriver), no device, none visible.
    for library in (cudart(status=35, count=0), cudart(status=100, count=0), cudart(count=0)):
        assert not runner.gpu_visible(FakeLoader(**{"libcudart.so": library}))
    # Loaded, but without the entry point: an error, so no GPU (and no nvidia-smi).
    assert not runner.gpu_visible(FakeLoader(**{"libcudart.so.13": SimpleNamespace()}))
    assert not smi_lists_a_gpu.exists()


def test_gpu_visible_asks_the_driver_api_without_a_runtime(smi_lists_a_gpu: Path) -> None:
    driver = FakeLoader(**{"libcuda.so.1": cuda_driver(count=4)})
    assert runner.cuda_device_count(driver) == 4
    assert driver.tried == [*runner.CUDART_LIBRARIES, "libcuda.so.1"]  # every runtime soname first
    assert runner.gpu_visible(driver)
    assert not runner.gpu_visible(FakeLoader(**{"libcuda.so": cuda_driver(init_status=100)}))
    assert not runner.gpu_visible(FakeLoader(**{"libcuda.so.1": cuda_driver(count=0)}))
    assert not smi_lists_a_gpu.exists()


def test_gpu_visible_falls_back_to_nvidia_smi_without_cuda_libraries(smi_lists_a_gpu: Path) -> None:
    nothing = FakeLoader()
    assert runner.cuda_device_count(nothing) is None
    assert nothing.tried == [*runner.CUDART_LIBRARIES, *runner.CUDA_DRIVER_LIBRARIES]
    assert runner.gpu_visible(nothing) and smi_lists_a_gpu.exists()


def test_gpu_visible_with_this_machines_libraries() -> None:
    """Whatever this machine has (a runtime without a driver, say), the answer is a bool, quickly."""
    started = time.monotonic()
    assert runner.gpu_visible(ctypes.CDLL) in (True, False)
    assert time.monotonic() - started < 10


def test_no_gpu_without_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert not runner.gpu_visible()
    assert runner.driver_version() == "unknown"


def test_driver_version_and_commit(fake_path: Path, tmp_path: Path) -> None:
    write_script(fake_path / "nvidia-smi", "echo 580.159.04\n")
    write_script(fake_path / "git", 'echo "git $*" > "$(dirname "$0")/git-args"\necho 5560665\n')
    assert runner.driver_version() == "580.159.04"
    assert runner.git_commit(tmp_path) == "5560665"
    assert (fake_path / "git-args").read_text() == "git rev-parse --short HEAD\n"
    write_script(fake_path / "git", "exit 128\n")
    assert runner.git_commit(tmp_path) == "unknown"


def test_run_binary_streams_records_progress_and_messages(tmp_path: Path) -> None:
    line = json.dumps(record(mode="uvm", useful_gbps=10.0))
    binary = write_script(
        tmp_path / "fake-bench",
        f"echo 'starting up' >&2\n"
        f"echo '{line}'\n"
        "echo 'stream       uvm            cache=0.000     0.4295 s     10.00 GB/s useful  verified' >&2\n"
        f"echo '{line}'\n"
        "exit 0\n",
    )
    out = tmp_path / "out" / "results.jsonl"
    out.parent.mkdir()
    out.write_text("previous\n")
    seen: list[Record] = []
    points: list[str] = []
    result = runner.run_binary(binary, [], out=out, on_record=seen.append, on_point=points.append)
    assert result.returncode == 0
    assert [r.useful_gbps for r in result.records] == [10.0, 10.0] and seen == result.records
    assert result.messages == ["starting up"]
    assert len(points) == 1 and runner.point_description(points[0]) == "stream uvm cache=0.000"
    assert out.read_text() == f"previous\n{line}\n{line}\n"


def test_run_binary_exit_code_and_no_output_file(tmp_path: Path) -> None:
    binary = write_script(
        tmp_path / "fake-bench", "echo 'warpvm-bench: no CUDA device visible' >&2\nexit 3\n"
    )
    out = tmp_path / "results.jsonl"
    result = runner.run_binary(binary, ["--out", "-"], out=out)
    assert (result.returncode, result.records, result.messages) == (
        3,
        [],
        ["warpvm-bench: no CUDA device visible"],
    )
    assert not out.exists()


def test_run_binary_reports_bad_records_and_keeps_the_good(tmp_path: Path) -> None:
    """A line that starts like a record but is none is reported with its stdout line and what is
    wrong, left out of the records and the file, and the run goes on."""
    good, wrong = json.dumps(record(mode="uvm")), json.dumps(record(faults="many"))
    binary = write_script(
        tmp_path / "fake-sim",
        f"echo '{good}'\n"
        "echo '{not json'\n"
        "echo 'not a record' >&2\n"
        'echo \'{"suite": "paging"}\'\n'
        f"echo '{wrong}'\n"
        f"echo '{good}'\n"
        'printf \'{"suite": "pag\'\n',
    )
    out = tmp_path / "results.jsonl"
    result = runner.run_binary(binary, [], out=out)
    assert result.returncode == 0 and not result.timed_out
    assert [r.mode for r in result.records] == ["uvm", "uvm"]
    assert out.read_text() == f"{good}\n{good}\n"
    assert result.messages == ["not a record"]
    missing = ", ".join(name for name in REQUIRED_FIELDS if name != "suite")
    assert result.bad_lines == [
        "fake-sim stdout:2: malformed JSON (Expecting property name enclosed in double quotes at column 2): "
        "{not json",
        f'fake-sim stdout:3: missing required field(s): {missing}: {{"suite": "paging"}}',
        f"fake-sim stdout:4: field 'faults' should be int, got \"many\": {wrong[:117]}...",
        "fake-sim stdout:6: malformed JSON (Unterminated string starting at column 11) "
        '(the output ended inside this line): {"suite": "pag',
    ]


def test_run_binary_callback_error_kills_the_binary(tmp_path: Path) -> None:
    """An exception out of a callback stops the binary and its children before it propagates."""
    line = json.dumps(record())
    binary = write_script(
        tmp_path / "fake-bench",
        f'sleep 30 &\necho $! > "$(dirname "$0")/child"\necho \'{line}\'\nexec sleep 30\n',
    )

    def refuse(record: Record) -> None:
        raise RuntimeError("stop")

    started = time.monotonic()
    with pytest.raises(RuntimeError, match="stop"):
        runner.run_binary(binary, [], on_record=refuse)
    assert time.monotonic() - started < 10
    assert gone(int((tmp_path / "child").read_text()))


def gone(pid: int) -> bool:
    """Whether process `pid` has ended (a zombie nobody reaped yet counts as ended)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_run_binary_timeout_keeps_the_records_and_kills_the_group(tmp_path: Path) -> None:
    line = json.dumps(record())
    binary = write_script(
        tmp_path / "fake-bench",
        f'sleep 30 &\necho $! > "$(dirname "$0")/child"\necho \'{line}\'\necho working >&2\nwait\n',
    )
    out = tmp_path / "results.jsonl"
    started = time.monotonic()
    result = runner.run_binary(binary, [], out=out, timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.timed_out and result.timeout == 0.5 and 0.5 <= elapsed < 5
    assert result.returncode == -signal.SIGTERM
    assert len(result.records) == 1 and out.read_text() == line + "\n"
    assert result.messages == ["working"]
    assert gone(int((tmp_path / "child").read_text()))  # the background child held the pipes


def test_run_binary_timeout_kills_what_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "_TERM_GRACE_S", 0.3)
    binary = write_script(tmp_path / "stubborn", "trap '' TERM\nwhile :; do sleep 1; done\n")
    started = time.monotonic()
    result = runner.run_binary(binary, [], timeout=0.3)
    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_run_binary_timeout_of_a_binary_that_closed_its_output(tmp_path: Path) -> None:
    binary = write_script(tmp_path / "quiet", "exec >&- 2>&-\nexec sleep 30\n")
    started = time.monotonic()
    result = runner.run_binary(binary, [], timeout=0.3)
    assert result.timed_out and result.returncode == -signal.SIGKILL
    assert time.monotonic() - started < 5


def test_run_binary_within_its_time_limit(tmp_path: Path) -> None:
    binary = write_script(tmp_path / "fast", f"echo '{json.dumps(record())}'\nprintf 'caf\\351\\n' >&2\n")
    result = runner.run_binary(binary, ["--out", "-"], timeout=30)
    assert (result.returncode, result.timed_out, result.timeout) == (0, False, 30)
    assert len(result.records) == 1 and result.args == ("--out", "-")
    assert result.messages == ["caf\ufffd"]  # a byte that is not UTF-8 is replaced, not a traceback


def test_resolve_timeout() -> None:
    assert runner.resolve_timeout(None, 3600) == 3600
    assert runner.resolve_timeout(5, 3600) == 5
    assert runner.resolve_timeout(0, 3600) is None
    assert runner.resolve_timeout(None, 0) is None
    assert {suite.timeout_s > 0 for suite in runner.SUITES.values()} == {True}


def test_eviction_names_are_checked() -> None:
    assert runner.check_eviction("fifo") == "fifo"
    with pytest.raises(ValueError, match=r"^unknown eviction policy 'lru' \(choose from clock, fifo\)$"):
        runner.check_eviction("lru")
    with pytest.raises(ValueError, match="unknown eviction policy 'CLOCK'"):
        runner.BenchSettings(eviction="CLOCK")
    with pytest.raises(ValueError, match="unknown eviction policy 'random'"):
        runner.SimSettings(eviction="random")
    graph = runner.SUITES["graph"]
    passed = runner.SuiteSettings(suite=graph, extra=("--eviction", "fifo", "--scale", "20")).args()
    assert passed[-6:] == ["--eviction", "fifo", "--scale", "20", "--out", "-"]
    for extra in (("--eviction", "lru"), ("--eviction=lru",), ("--eviction=fifo", "--eviction", "lru")):
        with pytest.raises(ValueError, match="unknown eviction policy 'lru'"):
            runner.SuiteSettings(suite=graph, extra=extra).args()


def test_single_workload_suite_passes_options_and_refuses_workloads() -> None:
    walk = runner.SUITES["walk"]
    settings = runner.SuiteSettings(
        suite=walk, modes=("device", "warpvm_aligned"), repeats=2, extra=("--scale", "18")
    )
    assert settings.args() == [
        *("--modes", "device,warpvm_aligned"),
        *("--repeats", "2"),
        *("--commit", "unknown", "--driver", "unknown"),
        *("--scale", "18"),
        *("--out", "-"),
    ]
    with pytest.raises(ValueError, match="warpvm bench walk has one workload"):
        runner.SuiteSettings(suite=walk, workloads=("random_walk",)).args()
