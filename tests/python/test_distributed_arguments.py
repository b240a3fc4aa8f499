"""kiln.distributed's argument checks: every argument of the wrong kind is a KilnTypeError and
every bad value a KilnValueError (or ShapeError), raised in Python before anything reaches the
compiled core (whose bindings would raise nanobind's untyped "incompatible function arguments"),
naming the function and what it expected. Also init_process_group's rank, world_size and timeout,
DataParallel's arguments, and a launcher rendezvous over IPv6.

Most checks run in one process, in a world of one rank joined through a file:// rendezvous."""

import datetime
import math
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.distributed as dist
from kiln.distributed import functional as F
from conftest import raises
from test_distributed_launcher import ipv6_loopback


@pytest.fixture
def world(tmp_path):
    """A world of one rank (this process), left again after the test."""
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0,
                            world_size=1, timeout=30)
    try:
        yield
    finally:
        dist.destroy_process_group()


def ones(*shape):
    return kiln.mint.ones(*shape)


# (call, error, message): each call is made in the world of one rank.
COLLECTIVE_ERRORS = {
    "all_reduce_array": (lambda: dist.all_reduce(np.ones(4)), kiln.KilnTypeError,
                         "all_reduce: expected tensor to be a kiln.Tensor, got ndarray"),
    "all_reduce_op_none": (lambda: dist.all_reduce(ones(4), None), kiln.KilnTypeError,
                           'all_reduce: expected op to be "sum", "prod", "min", "max" or "avg" '
                           "(or a ReduceOp constant), got NoneType None"),
    "all_reduce_group_int": (lambda: dist.all_reduce(ones(4), group=3), kiln.KilnTypeError,
                             "all_reduce: expected group to be a ProcessGroup (from new_group) "
                             "or None (the world), got int 3"),
    "broadcast_src_float": (lambda: dist.broadcast(ones(4), 1.0), kiln.KilnTypeError,
                            "broadcast: src must be an int, got float 1.0"),
    "broadcast_src_bool": (lambda: dist.broadcast(ones(4), True), kiln.KilnTypeError,
                           "broadcast: src must be an int, got bool True"),
    "broadcast_src_past_int32": (lambda: dist.broadcast(ones(4), 2**31), kiln.KilnValueError,
                                 "broadcast: src must be in [0, 2147483647], got 2147483648"),
    "reduce_scatter_list": (lambda: dist.reduce_scatter(ones(2), [ones(2), ones(2)]),
                            kiln.KilnTypeError,
                            "reduce_scatter: expected input to be a kiln.Tensor, got list (Kiln's "
                            "reduce_scatter(output, input) takes one tensor whose dim 0 holds "
                            "every member's slice"),
    "reduce_scatter_output_array": (lambda: dist.reduce_scatter(np.ones(2), ones(2)),
                                    kiln.KilnTypeError,
                                    "reduce_scatter: expected output to be a kiln.Tensor"),
    "all_gather_into_tensor_array": (lambda: dist.all_gather_into_tensor(np.ones(2), ones(2)),
                                     kiln.KilnTypeError, "all_gather_into_tensor: expected "
                                     "output to be a kiln.Tensor, got ndarray"),
    "all_gather_list_length": (lambda: dist.all_gather([ones(2), ones(2)], ones(2)),
                               kiln.KilnValueError,
                               "all_gather: expected a list of 1 tensors (one per member), got 2"),
    "all_gather_element_shape": (lambda: dist.all_gather([ones(3)], ones(2)), kiln.ShapeError,
                                 "all_gather: tensor_list[0] has shape [3]; expected [2], the "
                                 "shape of tensor"),
    "all_gather_element_array": (lambda: dist.all_gather([np.ones(2)], ones(2)),
                                 kiln.KilnTypeError, "all_gather: expected tensor_list[0] to be "
                                 "a kiln.Tensor, got ndarray"),
    "all_gather_tensor_for_list": (lambda: dist.all_gather(ones(2), ones(2)), kiln.KilnTypeError,
                                   "all_gather: expected tensor_list to be a list of "
                                   "kiln.Tensors (one per member), got Tensor"),
    "barrier_group_int": (lambda: dist.barrier(0), kiln.KilnTypeError,
                          "barrier: expected group to be a ProcessGroup"),
    "get_rank_group_int": (lambda: dist.get_rank(0), kiln.KilnTypeError,
                           "get_rank: expected group to be a ProcessGroup"),
    "new_group_none": (lambda: dist.new_group(None), kiln.KilnTypeError,
                       "new_group: expected ranks to be a sequence of ints (world ranks), got "
                       "NoneType None"),
    "new_group_int": (lambda: dist.new_group(0), kiln.KilnTypeError,
                      "new_group: expected ranks to be a sequence of ints (world ranks), got "
                      "int 0"),
    "new_group_float_rank": (lambda: dist.new_group([0.0]), kiln.KilnTypeError,
                             "new_group: ranks[0] must be an int, got float 0.0"),
    "new_group_negative_rank": (lambda: dist.new_group([-1]), kiln.KilnValueError,
                                "new_group: ranks[0] must be in [0, 2147483647], got -1"),
    "functional_all_reduce_array": (lambda: F.all_reduce(np.ones(2)), kiln.KilnTypeError,
                                    "functional.all_reduce: expected x to be a kiln.Tensor"),
    "functional_broadcast_src_float": (lambda: F.broadcast(ones(2), 0.0), kiln.KilnTypeError,
                                       "functional.broadcast: src must be an int"),
    "functional_reduce_scatter_op": (lambda: F.reduce_scatter(ones(2), 1), kiln.KilnTypeError,
                                     "functional.reduce_scatter: expected op to be"),
    "functional_all_gather_group": (lambda: F.all_gather(ones(2), "world"), kiln.KilnTypeError,
                                    "functional.all_gather: expected group to be a "
                                    "ProcessGroup"),
}


@pytest.mark.parametrize("name", COLLECTIVE_ERRORS)
def test_collective_argument_errors_are_typed_and_clear(world, name):
    call, error, message = COLLECTIVE_ERRORS[name]
    with raises(error) as info:
        call()
    assert message in str(info.value)


def test_accepted_spellings_of_arguments_still_work(world):
    t = ones(3)
    dist.all_reduce(t, dist.ReduceOp.MAX, async_op=1).wait()  # a truthy async_op
    dist.broadcast(t, np.int64(0))                            # NumPy ints are ints
    gathered = (ones(3), )                                    # a tuple of outputs
    dist.all_gather(gathered, t * 2)
    assert gathered[0].tolist() == [2.0, 2.0, 2.0]
    assert dist.new_group(np.arange(1)).ranks == [0] and dist.new_group(range(1)).size == 1
    assert t.tolist() == [1.0, 1.0, 1.0]


INIT_ERRORS = [
    ({"rank": 0.0, "world_size": 1}, kiln.KilnTypeError,
     "init_process_group: rank (or None: RANK from the environment) must be an int, got "
     "float 0.0"),
    ({"rank": 0, "world_size": 2**31}, kiln.KilnValueError,
     "init_process_group: world_size (or None: WORLD_SIZE from the environment) must be in "
     "[1, 2147483647], got 2147483648"),
    ({"rank": -2, "world_size": 1}, kiln.KilnValueError,
     "init_process_group: rank (or None: RANK from the environment) must be in [0, 2147483647], "
     "got -2"),
    ({"rank": 0, "world_size": -5}, kiln.KilnValueError, "must be in [1, 2147483647], got -5"),
    ({"rank": 0, "world_size": 0}, kiln.KilnValueError, "must be in [1, 2147483647], got 0"),
    ({"backend": None, "rank": 0, "world_size": 1}, kiln.KilnTypeError,
     "init_process_group: expected backend to be 'gloo' or 'mpi', got NoneType None"),
    ({"init_method": 29500, "rank": 0, "world_size": 1}, kiln.KilnTypeError,
     "init_process_group: expected init_method to be 'env://', 'tcp://host:port' or "
     "'file:///path', got int 29500"),
    ({"timeout": "abc"}, kiln.KilnTypeError,
     "init_process_group: expected timeout to be a number of seconds or a datetime.timedelta, "
     "got str 'abc'"),
    ({"timeout": True}, kiln.KilnTypeError, "got bool True"),
] + [({"timeout": timeout}, kiln.KilnValueError,
      "init_process_group: timeout must be a positive number of seconds from 0.001 (1 ms) to "
      f"1e9, got {text}")
     for timeout, text in [(0, "0"), (-1, "-1"), (math.nan, "nan"), (math.inf, "inf"),
                           (1e10, "1e+10"), (1e-4, "0.0001"),
                           (datetime.timedelta(microseconds=100), "0.0001")]]


@pytest.mark.parametrize("kwargs, error, message", INIT_ERRORS,
                         ids=[repr(kwargs) for kwargs, _, _ in INIT_ERRORS])
def test_init_argument_errors_are_typed(kwargs, error, message):
    with raises(error) as info:
        dist.init_process_group(**kwargs)
    assert message in str(info.value)
    assert not dist.is_initialized()


@pytest.mark.parametrize("not_given", [None, -1])  # -1: PyTorch's default, passed on by code
def test_rank_and_world_size_not_given_come_from_the_environment(tmp_path, monkeypatch, not_given):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    dist.init_process_group(init_method=f"file://{tmp_path}/rendezvous", rank=not_given,
                            world_size=not_given, timeout=datetime.timedelta(milliseconds=1))
    try:
        # The shortest timeout accepted is kept, not cut to 0 ms.
        assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
        assert dist.new_group([0]).timeout == 0.001
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kwargs, error, message", [
    ({"bucket_cap_mb": "1"}, kiln.KilnTypeError,
     "DataParallel: expected bucket_cap_mb to be a number of megabytes, got str '1'"),
    ({"bucket_cap_mb": 0}, kiln.KilnValueError,
     "DataParallel: expected bucket_cap_mb to be positive, got 0"),
    ({"bucket_cap_mb": math.nan}, kiln.KilnValueError,
     "DataParallel: expected bucket_cap_mb to be positive, got nan"),
    ({"group": 3}, kiln.KilnTypeError,
     "DataParallel: expected group to be a ProcessGroup (from new_group) or None (the world), "
     "got int 3"),
], ids=["str", "zero", "nan", "group"])
def test_data_parallel_argument_errors(world, kwargs, error, message):
    with raises(error) as info:
        kiln.nn.DataParallel(kiln.nn.Linear(2, 2), **kwargs)
    assert message in str(info.value)


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
@pytest.mark.parametrize("addr", ["::1", "[::1]"])
def test_launcher_rendezvous_over_ipv6(tmp_path, addr):
    # The launcher picked its default port on IPv4 only: "cannot find a free port" for ::1.
    script = tmp_path / "rank.py"
    script.write_text("import sys, kiln, kiln.distributed as dist\n"
                      "dist.init_process_group('gloo', timeout=60)\n"
                      "t = kiln.mint.ones(2) * (dist.get_rank() + 1)\n"
                      "dist.all_reduce(t)\n"
                      "sys.stdout.write(f'sum {t.tolist()}\\n')  # print's 2 writes interleave\n"
                      "dist.destroy_process_group()\n")
    done = subprocess.run([sys.executable, "-m", "kiln.distributed.run", "--nproc", "2",
                           "--master-addr", addr, str(script)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("sum [3.0, 3.0]") == 2, done.stdout
