"""Trains an MLP (64-128-64-10, ReLU) on scikit-learn's digits data set with Kiln.

    python examples/train_mlp.py                      # eager: forward, backward, Adam update
    python examples/train_mlp.py --jit                # the whole step as one kiln.jit function
    python examples/train_mlp.py --epochs 40 --plot loss.png

The 1,797 8x8 digit images ship with scikit-learn. They are standardised with the training
set's mean and deviation and split 80/20 (stratified, fixed seed). Training uses Adam on
minibatches of 64 (the last incomplete batch of each shuffled epoch is left out, so every step
has one shape); it prints a tqdm progress bar, the test accuracy, and writes the loss curve as a
PNG (``--plot``, default mlp_loss.png in the current folder).

The training step is written once, MindSpore style, and runs eagerly or under ``kiln.jit``:

    grad_fn = kiln.value_and_grad(forward, None, opt.parameters)
    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)                   # in-place update of the parameters and Adam's state
        return loss
"""

import argparse
import time

import numpy as np

import kiln
from kiln import nn, optim


def load_data(seed=0):
    """(x_train, y_train, x_test, y_test) as NumPy arrays: float32 features, int64 labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.2, random_state=seed, stratify=digits.target)
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std[std == 0] = 1.0  # pixels that are blank in every training image
    x_train = ((x_train - mean) / std).astype(np.float32)
    x_test = ((x_test - mean) / std).astype(np.float32)
    return x_train, y_train.astype(np.int64), x_test, y_test.astype(np.int64)


def make_mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def accuracy(net, x, y):
    net.eval()
    with kiln.no_grad():
        predicted = kiln.mint.argmax(net(kiln.tensor(x)), dim=-1).numpy()
    net.train()
    return float(np.mean(predicted == y))


def train(epochs=20, batch_size=64, lr=1e-3, jit=False, seed=0, progress=True):
    """Trains a fresh MLP; returns a dict with the net, the per-step losses, the test accuracy
    and the training time in seconds."""
    from tqdm import tqdm

    x_train, y_train, x_test, y_test = load_data(seed)
    kiln.manual_seed(seed)
    net = make_mlp()
    loss_fn = nn.CrossEntropyLoss()
    opt = optim.Adam(net.trainable_params(), lr=lr)

    def forward(x, y):
        return loss_fn(net(x), y)

    grad_fn = kiln.value_and_grad(forward, None, opt.parameters)

    def train_step(x, y):
        loss, grads = grad_fn(x, y)
        opt(grads)
        return loss

    step = kiln.jit(train_step) if jit else train_step
    rng = np.random.default_rng(seed)
    batches = len(x_train) // batch_size
    losses = []
    start = time.perf_counter()
    bar = tqdm(range(epochs), desc="jit" if jit else "eager", disable=not progress, unit="epoch")
    for _ in bar:
        order = rng.permutation(len(x_train))
        epoch_losses = []
        for b in range(batches):
            index = order[b * batch_size:(b + 1) * batch_size]
            loss = step(kiln.tensor(x_train[index]), kiln.tensor(y_train[index]))
            epoch_losses.append(loss)
        epoch_losses = [loss.item() for loss in epoch_losses]  # one sync per epoch
        losses.extend(epoch_losses)
        bar.set_postfix(loss=f"{np.mean(epoch_losses):.4f}")
    seconds = time.perf_counter() - start
    return {"net": net, "losses": losses, "test_accuracy": accuracy(net, x_test, y_test),
            "train_accuracy": accuracy(net, x_train, y_train), "seconds": seconds,
            "steps_per_epoch": batches}


def plot_losses(losses, steps_per_epoch, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = np.arange(1, len(losses) + 1)
    epochs = len(losses) // steps_per_epoch
    epoch_means = np.asarray(losses[:epochs * steps_per_epoch]).reshape(epochs, -1).mean(axis=1)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, losses, lw=0.8, alpha=0.5, label="minibatch")
    ax.plot(np.arange(1, epochs + 1) * steps_per_epoch, epoch_means, "o-", label="epoch mean")
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    ax.set_title("Kiln: MLP on scikit-learn digits")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--jit", action="store_true",
                        help="run forward, backward and the Adam update as one kiln.jit function")
    parser.add_argument("--plot", default="mlp_loss.png", help="where to write the loss curve")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    result = train(args.epochs, args.batch_size, args.lr, args.jit, args.seed)
    plot_losses(result["losses"], result["steps_per_epoch"], args.plot)
    steps = len(result["losses"])
    print(f"{'jit' if args.jit else 'eager'}: {args.epochs} epochs ({steps} steps) in "
          f"{result['seconds']:.2f} s ({1e3 * result['seconds'] / steps:.2f} ms/step); "
          f"final loss {result['losses'][-1]:.4f}; train accuracy "
          f"{100 * result['train_accuracy']:.1f}%, test accuracy "
          f"{100 * result['test_accuracy']:.1f}%; loss curve in {args.plot}")
    return result


if __name__ == "__main__":
    main()
