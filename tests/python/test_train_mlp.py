"""examples/train_mlp.py inside the suite: a few epochs of the digits MLP, eager (and jitted,
once the jit runs a whole training step), must reach the stated test accuracy; the loss curve
must fall and the plot must be written."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")
pytest.importorskip("tqdm")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_mlp.py"
# 8 epochs of 22 minibatches; the full example (20 epochs) reaches >= 95%.
EPOCHS = 8
MIN_ACCURACY = 0.90


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_mlp", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_eager_training_reaches_the_stated_accuracy(example):
    result = example.train(epochs=EPOCHS, progress=False)
    losses = result["losses"]
    assert len(losses) == EPOCHS * result["steps_per_epoch"]
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert last < 0.25 * first, (first, last)
    assert result["test_accuracy"] >= MIN_ACCURACY, result["test_accuracy"]


def test_main_writes_the_loss_curve(example, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "loss.png"
    result = example.main(["--epochs", "2", "--plot", str(plot)])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["losses"]) == 2 * result["steps_per_epoch"]
