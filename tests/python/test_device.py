"""kiln.device, the factories' device=, Tensor.device / is_cpu / is_cuda / to(device), and
Cell.to / cpu / cuda / float / double / half / bfloat16 / type (PyTorch's spellings; Kiln runs on
the CPU, so other devices can be named but not used)."""

import copy
import pickle

import numpy as np
import pytest

import kiln
from conftest import raises

mint = kiln.mint
nn = kiln.nn


def test_device_names_parse_compare_and_round_trip():
    cpu = kiln.device("cpu")
    assert cpu == "cpu" and str(cpu) == "cpu" and repr(cpu) == "device(type='cpu')"
    assert (cpu.type, cpu.index) == ("cpu", None)
    assert kiln.device("cuda:1") == kiln.device("cuda", 1) == "cuda:1"
    assert repr(kiln.device("cuda", 0)) == "device(type='cuda', index=0)"
    assert kiln.device(cpu) is cpu and {cpu: 1}["cpu"] == 1
    for copied in (copy.deepcopy(cpu), pickle.loads(pickle.dumps(kiln.device("cuda:2")))):
        assert isinstance(copied, kiln.device)
    assert pickle.loads(pickle.dumps(kiln.device("cuda:2"))).index == 2
    with pytest.raises(AttributeError, match="immutable"):
        cpu.index = 1


@pytest.mark.parametrize("args,error,match", [
    ((3,), kiln.KilnTypeError, "expected a device name such as 'cpu', got int"),
    (("tpu",), kiln.KilnValueError, "unknown device type 'tpu'"),
    (("cpu:x",), kiln.KilnValueError, "an index >= 0, got 'cpu:x'"),
    (("cuda:",), kiln.KilnValueError, "an index >= 0, got 'cuda:'"),
    (("cpu:\u0661",), kiln.KilnValueError, "an index >= 0"),  # a digit, but not an ASCII one
    (("cpu", -1), kiln.KilnValueError, "index to be an int >= 0 or None, got -1"),
    (("cuda:0", 1), kiln.KilnValueError, "has an index already"),
])
def test_bad_device_names_are_typed_errors(args, error, match):
    with pytest.raises(error, match=match):
        kiln.device(*args)


def test_tensors_live_on_the_cpu():
    x = kiln.tensor([1.0, 2.0], device="cpu")
    assert x.device == kiln.device("cpu") and x.is_cpu and not x.is_cuda
    assert isinstance(x.device, kiln.device)
    assert x.to(x.device).is_same(x) and x.to(kiln.device("cpu", 0)).is_same(x)
    np.testing.assert_array_equal(x.to(kiln.device("cpu"), kiln.float64).numpy(), [1.0, 2.0])


FACTORIES = [
    lambda d: mint.zeros(2, 3, device=d), lambda d: mint.ones(2, device=d),
    lambda d: mint.empty(2, device=d), lambda d: mint.full((2,), 7.0, device=d),
    lambda d: mint.zeros_like(mint.ones(2), device=d),
    lambda d: mint.ones_like(mint.ones(2), device=d), lambda d: mint.arange(4, device=d),
    lambda d: mint.linspace(0, 1, 5, device=d), lambda d: mint.eye(3, device=d),
    lambda d: mint.rand(2, device=d), lambda d: mint.randn(2, device=d),
    lambda d: mint.randint(0, 5, (3,), device=d), lambda d: mint.randperm(4, device=d),
    lambda d: kiln.tensor([1, 2], device=d),
]


@pytest.mark.parametrize("factory", range(len(FACTORIES)))
def test_every_factory_takes_device(factory):
    make = FACTORIES[factory]
    for device in (None, "cpu", "cpu:0", kiln.device("cpu")):
        assert make(device).device == "cpu"
    with raises(kiln.KilnValueError, match="device 'cuda' is not available; Kiln runs on the CPU"):
        make(kiln.device("cuda"))
    with raises(kiln.KilnValueError, match="unknown device 'cpu:1'"):
        make("cpu:1")
    with raises(kiln.KilnTypeError, match="expected device to be 'cpu', a kiln.device or None"):
        make(0)


class Tied(nn.Cell):
    def __init__(self):
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.norm = nn.BatchNorm1d(4)
        self.second = nn.Linear(4, 4)
        self.second.weight = nn.Parameter(mint.ones(4, 4))
        self.again = self.second  # the same cell under two names

    def construct(self, x):
        return self.second(self.norm(self.first(x)))


def test_cell_to_converts_floating_parameters_and_buffers():
    net = Tied()
    net.first.weight.grad = mint.ones(4, 3)
    frozen = net.first.bias
    frozen.requires_grad_(False)
    before = {name: p.numpy().astype(np.float64) for name, p in net.named_parameters()}
    assert net.double() is net
    for name, p in net.named_parameters():
        assert isinstance(p, nn.Parameter) and p.dtype == kiln.float64, name
        np.testing.assert_array_equal(p.numpy(), before[name])
    assert net.again.weight is net.second.weight  # shared parameters stay shared
    assert not net.first.bias.requires_grad and net.first.bias is not frozen
    assert net.first.weight.grad.dtype == kiln.float64
    assert net.norm.running_mean.dtype == kiln.float64
    assert net.norm.num_batches_tracked.dtype == kiln.int64  # integer buffers keep theirs
    out = net(mint.ones(2, 3, dtype=kiln.float64))
    assert out.dtype == kiln.float64
    assert net.float().second.weight.dtype == kiln.float32
    assert net.half().first.weight.dtype == kiln.float16
    assert net.bfloat16().first.weight.dtype == kiln.bfloat16
    assert net.type(kiln.float32).first.weight.dtype == kiln.float32
    assert net.to(mint.zeros(1, dtype=kiln.float64)).first.weight.dtype == kiln.float64
    assert net.to("cpu", kiln.float32, non_blocking=True).first.weight.dtype == kiln.float32
    weight = net.first.weight
    assert net.to(device=kiln.device("cpu")) is net and net.cpu() is net
    assert net.first.weight is weight  # no dtype: nothing converted
    assert net.to(kiln.float32).first.weight is weight  # already float32


def test_cell_to_refuses_other_devices_and_dtypes():
    net = nn.Linear(2, 2)
    with raises(kiln.KilnValueError, match="Linear.cuda: device 'cuda' is not available"):
        net.cuda()
    with raises(kiln.KilnValueError, match="Linear.to: device 'cuda:1' is not available"):
        net.to("cuda:1")
    with raises(kiln.KilnTypeError, match="expected a floating-point dtype, got int32"):
        net.to(kiln.int32)
    with raises(kiln.KilnTypeError, match="at most a device and a dtype, got 3"):
        net.to("cpu", kiln.float32, 1)
    with raises(kiln.KilnTypeError, match="unexpected keyword argument 'memory'"):
        net.to(memory=1)
    with raises(kiln.KilnTypeError, match="a device, a dtype or a tensor, got int"):
        net.to(5)
    assert net.weight.dtype == kiln.float32
