"""kiln.runtime: pipeline modes and their environment variables, sync points, errors raised at the
right sync point, the caching allocator's counters, several Python threads, an idle process, fork()
and process exit with work queued."""

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import kiln
from conftest import raises

M = kiln.mint
MODES = ["sync", "2stage", "4stage"]
ASYNC_MODES = ["2stage", "4stage"]


def run_in_mode(request):
    """Sets the pipeline mode `request.param` for one test and restores the previous mode after."""
    previous = kiln.runtime.get_pipeline()
    kiln.runtime.set_pipeline(request.param)
    yield request.param
    kiln.runtime.set_pipeline(previous)


mode = pytest.fixture(params=MODES, name="mode")(run_in_mode)
async_mode = pytest.fixture(params=ASYNC_MODES, name="async_mode")(run_in_mode)


def run_python(code, env=None, timeout=120):
    """Runs `code` in a fresh interpreter; KILN_* variables come only from `env`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("KILN_")}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=full_env)


def test_set_pipeline_round_trips(mode):
    assert kiln.runtime.get_pipeline() == mode
    x = kiln.tensor(np.arange(6, dtype=np.float32))
    np.testing.assert_array_equal((x * 2 + 1).numpy(), np.arange(6) * 2 + 1)


def test_set_pipeline_rejects_an_unknown_mode():
    before = kiln.runtime.get_pipeline()
    with pytest.raises(kiln.KilnValueError, match="expected 'sync', '2stage' or '4stage'"):
        kiln.runtime.set_pipeline("3stage")
    assert kiln.runtime.get_pipeline() == before


@pytest.mark.parametrize("env, expected", [
    ({}, "sync"),
    ({"KILN_PIPELINE": "4stage"}, "4stage"),
    ({"KILN_PIPELINE": "sync"}, "sync"),
    ({"KILN_PIPELINE": "2stage"}, "2stage"),
    ({"KILN_LAUNCH_BLOCKING": "1"}, "sync"),
    ({"KILN_LAUNCH_BLOCKING": "1", "KILN_PIPELINE": "4stage"}, "sync"),
    ({"KILN_LAUNCH_BLOCKING": "0", "KILN_PIPELINE": "4stage"}, "4stage"),
])
def test_environment_sets_the_initial_mode(env, expected):
    result = run_python("""
        import kiln
        x = kiln.tensor([1.0, 2.0])
        print(kiln.runtime.get_pipeline(), (x + 1).tolist())
    """, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == f"{expected} [2.0, 3.0]"


def test_an_unknown_mode_in_the_environment_is_ignored_with_a_warning():
    # Read while libkiln loads, where an exception aborted the process (uncatchable by `import`).
    result = run_python("""
        import kiln
        print(kiln.runtime.get_pipeline(), (kiln.tensor([1.0]) + 1).tolist())
    """, env={"KILN_PIPELINE": "async"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "sync [2.0]"
    assert ("kiln: ignoring KILN_PIPELINE: unknown pipeline mode 'async': expected 'sync', "
            "'2stage' or '4stage'; running in sync mode") in result.stderr


def test_mode_changes_while_another_thread_issues_ops():
    # A call that read the old mode was published after the switch had stopped the workers, left
    # to no one; and a switch holding the workers' lock while it waited for the GIL deadlocked
    # with a caller holding the GIL while it waited for that lock.
    result = run_python("""
        import threading, time
        import kiln
        stop = False
        def worker():
            x = kiln.mint.ones(64, 64)
            while not stop:
                (kiln.mint.tanh(x @ x) + 1.0).numpy()
        t = threading.Thread(target=worker)
        t.start()
        for i in range(300):
            kiln.runtime.set_pipeline(["sync", "4stage", "2stage", "4stage"][i % 4])
            time.sleep(0.001)
        stop = True
        t.join()
        print("done")
    """, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "done"


@pytest.fixture
def thread_count():
    """Restores kiln.get_num_threads() after the test."""
    saved = kiln.get_num_threads()
    yield saved
    kiln.set_num_threads(saved)


def test_set_num_threads_round_trips_and_results_hold(mode, thread_count):
    assert kiln.runtime.set_num_threads is kiln.set_num_threads
    assert kiln.runtime.get_num_threads is kiln.get_num_threads
    rng = np.random.default_rng(3)
    a = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal((200, 100)).astype(np.float32)
    x = rng.standard_normal(1 << 18).astype(np.float32)
    for n in (1, 2, 3):
        kiln.set_num_threads(n)
        assert kiln.get_num_threads() == n
        np.testing.assert_allclose((kiln.tensor(a) @ kiln.tensor(b)).numpy(), a @ b,
                                   rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(M.exp(kiln.tensor(x)).numpy(), np.exp(x), rtol=1e-6)
        np.testing.assert_allclose(M.sum(kiln.tensor(x)).item(), x.sum(dtype=np.float64),
                                   rtol=1e-4)


@pytest.mark.parametrize("bad, error, match", [
    (0, kiln.KilnValueError, "expected at least 1 thread, got 0"),
    (-2, kiln.KilnValueError, "expected at least 1 thread, got -2"),
    ("2", TypeError, None),
    (1.5, TypeError, None),
])
def test_set_num_threads_rejects_a_bad_count_and_keeps_the_setting(bad, error, match,
                                                                   thread_count):
    kiln.set_num_threads(1)
    with pytest.raises(error, match=match):
        kiln.set_num_threads(bad)
    assert kiln.get_num_threads() == 1


@pytest.mark.parametrize("count", [0, 1])
def test_set_num_threads_bounds_the_threads_a_kernel_starts(count):
    # OpenMP starts its worker threads at the first parallel region that needs them; with
    # OMP_NUM_THREADS=4, copying a large array in and exp over it start three, unless
    # kiln.set_num_threads(1) came first.
    result = run_python(f"""
        import os
        import numpy as np
        import kiln
        if {count}:
            kiln.set_num_threads({count})
        print(kiln.get_num_threads())
        before = len(os.listdir("/proc/self/task"))
        kiln.mint.exp(kiln.tensor(np.ones(1 << 22, np.float32))).numpy()
        print(len(os.listdir("/proc/self/task")) - before)
    """, env={"OMP_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "1"})
    assert result.returncode == 0, result.stderr
    threads, started = map(int, result.stdout.split())
    assert threads == (count or 4)
    assert started == (count or 4) - 1


def test_synchronize_waits_for_every_queued_op(mode):
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    x = kiln.tensor(a)
    y = x
    for _ in range(200):
        y = M.tanh(y @ x * 0.01)
    assert kiln.runtime.synchronize() is None
    expected = a
    for _ in range(200):
        expected = np.tanh(expected @ a * np.float32(0.01))
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-4, atol=1e-5)


def test_memory_stats_and_empty_cache(mode):
    kiln.runtime.synchronize()
    kiln.runtime.empty_cache()
    stats = kiln.runtime.memory_stats()
    assert set(stats) == {"allocated", "cached", "peak", "num_allocs", "num_os_allocs"}
    assert stats["cached"] == 0
    t = M.zeros((1024, 1024))  # 4 MiB, made by an op
    kiln.runtime.synchronize()
    held = kiln.runtime.memory_stats()
    assert held["allocated"] - stats["allocated"] == 4 << 20
    assert held["peak"] >= held["allocated"]
    assert held["num_allocs"] > stats["num_allocs"]
    del t
    freed = kiln.runtime.memory_stats()
    assert freed["allocated"] == stats["allocated"]
    assert freed["cached"] == 4 << 20
    again = M.ones((1024, 1024))  # takes the cached block: no new system memory
    kiln.runtime.synchronize()
    assert kiln.runtime.memory_stats()["num_os_allocs"] == held["num_os_allocs"]
    del again
    kiln.runtime.empty_cache()
    assert kiln.runtime.memory_stats()["cached"] == 0
    kiln.runtime.reset_peak_memory_stats()
    stats = kiln.runtime.memory_stats()
    assert stats["peak"] == stats["allocated"]


def test_empty_cache_and_a_peak_reset_wait_for_the_ops_issued_so_far(mode):
    # In the asynchronous modes empty_cache() kept the block of a tensor already dropped.
    kiln.runtime.empty_cache()
    x = M.exp(M.ones((1024, 1024)))
    del x
    y = M.exp(M.ones((512, 512)))  # queued: its input's block is freed when it runs
    kiln.runtime.empty_cache()
    assert kiln.runtime.memory_stats()["cached"] == 0
    kiln.runtime.reset_peak_memory_stats()
    assert kiln.runtime.memory_stats()["peak"] == kiln.runtime.memory_stats()["allocated"]
    assert y.shape == (512, 512)


@pytest.mark.parametrize("make, expected", [
    (lambda x, y: x + y, 3.0), (lambda x, y: 2 + x, 3.0), (lambda x, y: x < y, True),
    (lambda x, y: M.add(x, y), 3.0), (lambda x, y: x.exp(), np.float32(np.e)),
    (lambda x, y: M.exp(x), np.float32(np.e))],
    ids=["op", "reflected", "compare", "mint", "method", "mint_unary"])
def test_op_results_are_tensors_that_free_their_memory_with_the_object(mode, make, expected):
    # The bindings of the small ops build their result objects directly (not through
    # nb::cast): each must be a plain kiln.Tensor that owns its tensor and releases it.
    x = M.ones((256, 1024))
    y = M.full((256, 1024), 2.0)
    kiln.runtime.synchronize()
    before = kiln.runtime.memory_stats()["allocated"]
    r = make(x, y)
    assert type(r) is kiln.Tensor
    kiln.runtime.synchronize()
    assert kiln.runtime.memory_stats()["allocated"] == before + r.numel() * r.dtype.itemsize
    np.testing.assert_allclose(r.numpy(), np.full(r.shape, expected), rtol=1e-6)
    del r
    kiln.runtime.synchronize()
    assert kiln.runtime.memory_stats()["allocated"] == before


@pytest.mark.parametrize("fn", [M.add, M.exp, kiln.Tensor.__add__, kiln.Tensor.__radd__,
                                kiln.Tensor.__lt__, kiln.Tensor.exp],
                         ids=["mint", "mint_unary", "op", "reflected", "compare", "method"])
def test_signatures_of_the_directly_made_results_name_the_tensor_type(fn):
    assert fn.__doc__.splitlines()[0].endswith("-> kiln._C.Tensor")


def test_shape_error_raises_at_the_call_in_sync_mode_and_at_a_sync_point_otherwise(mode):
    kiln.runtime.synchronize()
    a = kiln.tensor(np.ones((2, 3), dtype=np.float32))
    b = kiln.tensor(np.ones(4, dtype=np.float32))
    if mode == "sync":
        with pytest.raises(kiln.ShapeError, match=r"in Add\(float32\[2, 3\], float32\[4\]\)"):
            M.add(a, b)
        return
    y = M.add(a, b)  # queued: the call returns
    z = M.exp(y) * 2  # so do its consumers
    with pytest.raises(kiln.ShapeError, match=r"in Add\(float32\[2, 3\], float32\[4\]\)"):
        y.numpy()
    # A consumer raises the original cause, not one of its own.
    with pytest.raises(kiln.ShapeError, match=r"in Add\(float32\[2, 3\], float32\[4\]\)") as info:
        z.numpy()
    assert "Exp(" not in str(info.value) and "Mul(" not in str(info.value)
    kiln.runtime.synchronize()  # raised already by the reads
    np.testing.assert_array_equal((a + 1).numpy(), np.full((2, 3), 2.0))


def test_kernel_error_raises_at_the_right_sync_point(mode):
    kiln.runtime.synchronize()
    x = kiln.tensor(np.arange(3, dtype=np.float32))
    index = kiln.tensor(np.array([0, 7], dtype=np.int64))
    match = r"index 7 is out of bounds(.|\n)*in IndexSelect\(float32\[3\], int64\[2\]\)"
    if mode == "sync":
        with pytest.raises(kiln.KilnIndexError, match=match):
            M.index_select(x, 0, index)
    else:
        y = M.index_select(x, 0, index)
        assert y.shape == (2,)  # metadata is known; the data failed
        with pytest.raises(kiln.KilnIndexError, match=match):
            (y + 1).numpy()
        # Not read: the failure waits for the next synchronize(), once.
        M.index_select(x, 0, index)
        with pytest.raises(kiln.KilnIndexError, match=match):
            kiln.runtime.synchronize()
    kiln.runtime.synchronize()
    np.testing.assert_array_equal(M.index_select(x, 0, kiln.tensor([2, 0])).numpy(), [2.0, 0.0])


def test_raises_helper_catches_errors_in_every_mode(mode):
    with raises(kiln.ShapeError, match="do not broadcast"):
        M.add(kiln.tensor([1.0, 2.0]), kiln.tensor([1.0, 2.0, 3.0]))


def _thread_program(tid, steps=300):
    """One thread's chain: new results, in-place writes and a reduction, with a read midway."""
    start = np.full((16, 16), float(tid), dtype=np.float32) + np.arange(16, dtype=np.float32)
    acc = kiln.tensor(start)
    midway = None
    for i in range(steps):
        if i % 3 == 0:
            M.add(acc, 1.0, out=acc)
        elif i % 3 == 1:
            acc = acc * 0.5
        else:
            acc = acc - M.mean(acc, dim=1, keepdim=True) + 2.0
        if i == steps // 2:
            midway = acc.numpy().copy()
    return midway, acc.numpy()


def _numpy_program(tid, steps=300):
    acc = np.full((16, 16), float(tid), dtype=np.float32) + np.arange(16, dtype=np.float32)
    for i in range(steps):
        if i % 3 == 0:
            acc = acc + np.float32(1.0)
        elif i % 3 == 1:
            acc = acc * np.float32(0.5)
        else:
            acc = acc - acc.mean(axis=1, keepdims=True) + np.float32(2.0)
    return acc


def test_python_threads_keep_their_program_order(mode):
    n_threads = 4
    kiln.runtime.set_pipeline("sync")
    alone = [_thread_program(tid) for tid in range(n_threads)]
    kiln.runtime.set_pipeline(mode)
    results = [None] * n_threads
    errors = []

    def work(tid):
        try:
            results[tid] = _thread_program(tid)
        except Exception as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []
    for tid in range(n_threads):
        # Bit for bit what the thread's program gives alone, and NumPy's values.
        np.testing.assert_array_equal(results[tid][0], alone[tid][0])
        np.testing.assert_array_equal(results[tid][1], alone[tid][1])
        np.testing.assert_allclose(results[tid][1], _numpy_program(tid), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pipeline", MODES)
def test_an_idle_process_uses_no_cpu(pipeline):
    result = run_python("""
        import time
        import kiln
        x = kiln.tensor([[0.5] * 64] * 64)
        for _ in range(2000):
            x = kiln.mint.tanh(x @ x)
        kiln.runtime.synchronize()
        time.sleep(0.05)  # past any spinning
        start = time.process_time()
        time.sleep(0.5)
        print(time.process_time() - start)
    """, env={"KILN_PIPELINE": pipeline})
    assert result.returncode == 0, result.stderr
    assert float(result.stdout) < 0.05, f"{result.stdout} s of CPU in 0.5 s of idling"


@pytest.mark.parametrize("pipeline", MODES)
def test_fork_after_the_workers_started_gives_a_usable_child(pipeline):
    result = run_python("""
        import os
        import numpy as np
        import kiln
        x = kiln.tensor(np.arange(1000, dtype=np.float32))
        y = x
        for _ in range(500):
            y = y + 1.0                   # work in flight when fork() comes
        pid = os.fork()
        if pid == 0:
            z = y * 2.0
            for _ in range(500):
                z = z - 1.0
            ok = np.array_equal(z.numpy(), (np.arange(1000) + 500) * 2 - 500)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), y.numpy()[10], (y * 3.0).numpy()[1])
    """, env={"KILN_PIPELINE": pipeline})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0", "510.0", "1503.0"]


@pytest.mark.parametrize("pipeline", MODES)
def test_fork_after_parallel_regions_gives_a_child_that_runs_on_one_thread(pipeline):
    # libgomp's pool does not survive fork: a child whose parent ran a parallel region (a 1M sum,
    # oneDNN's matmul) hung in its first one. It runs every region on one thread instead.
    result = run_python("""
        import os
        import numpy as np
        import kiln
        kiln.set_num_threads(2)
        a = kiln.tensor(np.ones((256, 256), np.float32))
        big = kiln.mint.ones(1 << 20)
        print(kiln.mint.sum(big * 2).item(), (a @ a).numpy()[0, 0], flush=True)
        pid = os.fork()
        if pid == 0:
            ok = (kiln.mint.sum(big * 3).item() == 3 * (1 << 20)
                  and (a @ a).numpy()[0, 0] == 256 and kiln.get_num_threads() == 1)
            os._exit(0 if ok else 1)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), kiln.get_num_threads())
    """, env={"KILN_PIPELINE": pipeline}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["2097152.0", "256.0", "0", "2"]


def test_fork_while_another_thread_issues_ops():
    # A call published while the fork's drain had given up the GIL was left queued when the
    # workers stopped for the fork, and its reader in the parent waited forever.
    result = run_python("""
        import os, threading, time
        import numpy as np
        import kiln
        a = kiln.tensor(np.ones((128, 128), np.float32))
        stop = False
        reads = []
        def issue():
            while not stop:
                reads.append(((a @ a) + 1.0).numpy()[0, 0])
        t = threading.Thread(target=issue)
        t.start()
        end = time.time() + 5  # the race came within a second or two, here
        while time.time() < end:
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
        stop = True
        t.join()
        print(len(reads) > 0 and set(reads) == {129.0})
    """, env={"KILN_PIPELINE": "4stage"}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "True"


@pytest.mark.parametrize("pipeline", ["2stage", "4stage"])
def test_ops_queued_after_pythons_drain_at_exit_end_cleanly(pipeline):
    # An atexit function registered before kiln's runs after its drain: the ops it queues are
    # drained by the C++ side at exit, whose wait tried to give up a GIL the finalizing
    # interpreter no longer had (Fatal Python error, abort).
    result = run_python("""
        import atexit
        def last_words():
            import kiln
            x = kiln.mint.ones(1 << 16)
            for _ in range(300):
                x = kiln.mint.tanh(x) * 1.0001
        atexit.register(last_words)
        import kiln
        print("ok")
    """, env={"KILN_PIPELINE": pipeline})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("pipeline", ["2stage", "4stage"])
def test_matmuls_issued_by_a_finalizer_at_exit_end_cleanly(pipeline):
    # Queued during the interpreter's teardown, the matmuls were still running on the workers
    # when oneDNN's static caches were destroyed (a segfault every time); they run synchronously
    # once kiln's exit drain has run, with the values they should have.
    result = run_python("""
        import kiln
        t = kiln.mint.ones([256, 256])
        (t @ t).numpy()
        class Holder:
            def __del__(self):
                x = kiln.mint.ones([256, 256])
                self.out = [x @ x for _ in range(300)]
                print("last", self.out[-1].sum().item(), kiln.runtime.get_pipeline())
        holder = Holder()
        print("main done")
    """, env={"KILN_PIPELINE": pipeline}, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["main", "done", "last", str(256.0 ** 3), "sync"]


@pytest.mark.parametrize("pipeline", MODES)
def test_exit_with_work_queued_drains_cleanly(pipeline, tmp_path):
    # The last op writes into a memory-mapped file through out=; nothing reads it before exit,
    # so only the exit-time drain can have run it.
    path = tmp_path / "result.bin"
    result = run_python(f"""
        import numpy as np
        import kiln
        out = np.memmap({str(path)!r}, dtype=np.float32, mode="w+", shape=(4096,))
        target = kiln.from_numpy(out)
        x = kiln.tensor(np.arange(4096, dtype=np.float32))
        print("before", (x + 1).numpy()[3])
        y = x
        for _ in range(3000):
            y = y * 1.0 + 1.0
        kiln.mint.add(y, 0.5, out=target)
    """, env={"KILN_PIPELINE": pipeline})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["before", "4.0"]
    assert result.stderr == ""
    written = np.fromfile(path, dtype=np.float32)
    np.testing.assert_array_equal(written, np.arange(4096, dtype=np.float32) + 3000.5)


@pytest.mark.parametrize("pipeline", MODES)
def test_a_failure_no_read_raised_is_reported_at_exit(pipeline):
    # In the asynchronous modes it was dropped silently; in sync mode the call raises.
    result = run_python("""
        import numpy as np
        import kiln
        x = kiln.tensor(np.ones((2, 3), np.float32))
        try:
            kiln.mint.gather(x, 1, kiln.tensor(np.array([[0, 1, 7]], np.int64)))
        except kiln.KilnIndexError:
            print("raised at the call")
        print("end")
    """, env={"KILN_PIPELINE": pipeline})
    assert result.returncode == 0, result.stderr
    if pipeline == "sync":
        assert result.stdout.split() == ["raised", "at", "the", "call", "end"]
        assert result.stderr == ""
    else:
        assert result.stdout.split() == ["end"]
        assert result.stderr.startswith("kiln: an op failed and no read raised its error before "
                                        "exit:\nKilnIndexError: Gather: index 7 is out of bounds")


def test_a_failed_in_place_write_through_a_view_raises_from_its_base(mode):
    # Note [Failed writes into shared memory]: in the async modes the base reported nothing and
    # showed its old values; now its first read raises the view's failure, once.
    base = kiln.tensor([[1, 2], [3, 4]])
    with pytest.raises(kiln.KilnValueError, match="integer division by zero"):
        base[0].floor_divide_(0)
        base.numpy()
    total = base.sum()  # later ops see healthy data again
    np.testing.assert_array_equal(base.numpy(), [[1, 2], [3, 4]])
    assert total.item() == 10
    with pytest.raises(kiln.KilnValueError, match="integer division by zero"):
        base[1].floor_divide_(0)
        (base + 1).numpy()  # an op reading the base fails with the same cause
    kiln.runtime.synchronize()


def test_many_unraised_failed_writes_each_stay_with_their_own_memory(async_mode):
    # Note [Failed writes into shared memory]: a table of failures by storage; hundreds left
    # unraised neither leak into other tensors nor lose their own.
    bases = [kiln.tensor([[i, 1], [2, 3]]) for i in range(300)]
    for base in bases:
        base[0].floor_divide_(0)  # fails in the pipeline; nothing reads it yet
    healthy = kiln.tensor([1.0, 2.0]) * 2
    np.testing.assert_array_equal(healthy.numpy(), [2.0, 4.0])
    for i in (0, 150, 299):
        with pytest.raises(kiln.KilnValueError, match="integer division by zero"):
            bases[i].numpy()
        np.testing.assert_array_equal(bases[i].numpy(), [[i, 1], [2, 3]])  # raised once
    with pytest.raises(kiln.KilnValueError, match="integer division by zero"):
        kiln.runtime.synchronize()  # the first failure no read raised
    del bases
    kiln.runtime.synchronize()
