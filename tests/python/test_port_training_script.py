"""A PyTorch training script as people write it, ported to Kiln by renaming: torch.utils.data,
torch.nn.functional, Conv2d(padding="same"), BatchNorm2d, adaptive pooling, a weighted
cross-entropy with label smoothing, AdamW with OneCycleLR cycling the momentum, a checkpoint of
model, optimizer, scheduler, epoch and the random generator's state saved and resumed. Checks that it learns, and that a run
resumed from the checkpoint continues exactly as the uninterrupted one (eagerly and with a
jitted step). Runs without PyTorch."""

import numpy as np
import pytest

import kiln
import kiln.nn.functional as F
import kiln.utils.data as data
from kiln import nn

mint = kiln.mint


class SmallNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding="same")
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding="same", padding_mode="reflect")
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.gelu(self.conv2(x))
        return self.fc(mint.flatten(self.pool(x), 1))


def synthetic_images(n=96, seed=0):
    """Three classes of 8 x 8 images: a bright row, a bright column, or a bright diagonal."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 3, size=n)
    images = rng.normal(0.0, 0.3, size=(n, 1, 8, 8)).astype(np.float32)
    for i, label in enumerate(labels):
        at = rng.integers(1, 7)
        if label == 0:
            images[i, 0, at, :] += 2.0
        elif label == 1:
            images[i, 0, :, at] += 2.0
        else:
            images[i, 0][np.eye(8, dtype=bool)] += 2.0
    return images, labels


def make_run(jit):
    """(model, optimizer, scheduler, train one epoch) with everything seeded."""
    kiln.manual_seed(0)
    images, labels = synthetic_images()
    loader = data.DataLoader(data.TensorDataset(images, labels), batch_size=16, shuffle=True,
                             num_workers=2, drop_last=True)
    model = SmallNet()
    optimizer = kiln.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=1e-2)
    scheduler = kiln.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-2, total_steps=60,
                                                   cycle_momentum=True)
    criterion = nn.CrossEntropyLoss(weight=kiln.tensor([1.0, 1.5, 1.0]), label_smoothing=0.05)

    def step(x, y):  # PyTorch's form
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    # A jitted step computes its gradients inside (backward() there would leave traced values in
    # .grad): MindSpore's form, which kiln.optim takes too.
    grad_fn = kiln.value_and_grad(lambda x, y: criterion(model(x), y), None, optimizer.parameters)

    def jitted_step(x, y):
        loss, grads = grad_fn(x, y)
        optimizer(grads)
        return loss

    train_step = kiln.jit(jitted_step) if jit else step

    def epoch():
        model.train()
        losses = []
        for x, y in loader:
            losses.append(train_step(x, y).item())
            scheduler.step()
        return float(np.mean(losses))

    return model, optimizer, scheduler, epoch


def accuracy(model):
    images, labels = synthetic_images(n=60, seed=1)
    model.eval()
    with kiln.no_grad():
        predicted = mint.argmax(model(kiln.tensor(images)), 1).numpy()
    return float((predicted == labels).mean())


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jitted"])
def test_the_ported_script_learns_and_resumes_from_its_checkpoint(tmp_path, jit):
    model, optimizer, scheduler, epoch = make_run(jit)
    losses = [epoch() for _ in range(4)]
    assert losses[-1] < 0.6 * losses[0], losses
    assert accuracy(model) >= 0.9

    # Interrupted after an epoch: a checkpoint, then a fresh process's objects resume it.
    model, optimizer, scheduler, epoch = make_run(jit)
    epoch()
    kiln.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
               "scheduler": scheduler.state_dict(), "epoch": 1, "rng": kiln.get_rng_state()},
              tmp_path / "ckpt.safetensors")
    uninterrupted = [epoch() for _ in range(2)]
    expected = {name: p.numpy().copy() for name, p in model.named_parameters()}

    resumed_model, resumed_optimizer, resumed_scheduler, resumed_epoch = make_run(jit)
    checkpoint = kiln.load(tmp_path / "ckpt.safetensors")
    assert checkpoint["epoch"] == 1
    resumed_model.load_state_dict(checkpoint["model"])
    resumed_optimizer.load_state_dict(checkpoint["optimizer"])
    resumed_scheduler.load_state_dict(checkpoint["scheduler"])
    # The loader's shuffle draws from the global generator: where the interrupted run had it.
    kiln.set_rng_state(checkpoint["rng"])
    resumed = [resumed_epoch() for _ in range(2)]
    np.testing.assert_allclose(resumed, uninterrupted, rtol=1e-5)
    for name, p in resumed_model.named_parameters():
        np.testing.assert_allclose(p.numpy(), expected[name], rtol=1e-5, atol=1e-6, err_msg=name)
