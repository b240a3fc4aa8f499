"""examples/train_mlp.py inside the suite: a few epochs of the digits MLP must reach the stated
test accuracy, eagerly and with the whole training step (forward, backward, Adam) as one
kiln.jit function, whose losses must match the eager ones; the plot must be written."""

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


@pytest.fixture(scope="module")
def eager(example):
    return example.train(epochs=EPOCHS, progress=False)


def test_eager_training_reaches_the_stated_accuracy(eager):
    result = eager
    losses = result["losses"]
    assert len(losses) == EPOCHS * result["steps_per_epoch"]
    first, last = np.mean(losses[:10]), np.mean(losses[-10:])
    assert last < 0.25 * first, (first, last)
    assert result["test_accuracy"] >= MIN_ACCURACY, result["test_accuracy"]


def test_jitted_training_step_matches_eager(example, eager):
    jitted = example.train(epochs=EPOCHS, jit=True, progress=False)
    np.testing.assert_allclose(jitted["losses"], eager["losses"], rtol=1e-4, atol=1e-6)
    assert jitted["test_accuracy"] >= MIN_ACCURACY, jitted["test_accuracy"]


def test_main_writes_the_loss_curve(example, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "loss.png"
    result = example.main(["--epochs", "2", "--plot", str(plot)])
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(result["losses"]) == 2 * result["steps_per_epoch"]
