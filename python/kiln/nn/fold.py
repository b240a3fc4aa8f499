"""Sliding blocks of images, as PyTorch's: the functions ``unfold`` (im2col) and ``fold``
(col2im; also kiln.nn.functional.unfold and .fold) and the cells ``Unfold`` and ``Fold`` that
apply them.

    cols = F.unfold(x, kernel_size=3, padding=1)        # x [N, C, H, W] -> [N, C * 9, H * W]
    y = F.fold(cols, (H, W), kernel_size=3, padding=1)  # back to [N, C, H, W], overlaps summed
    blocks = kiln.nn.Unfold(kernel_size=(2, 3), stride=2)

A column holds, for one block, its C * kH * kW elements in PyTorch's order: channel, then kernel
row, then kernel column; the L = bH * bW blocks follow each other row by row. ``fold`` is
``unfold``'s adjoint: each element goes back to its place in the (padded) output, and the
elements that overlapping blocks share add up, so fold(unfold(x)) is x times the number of blocks
that hold each pixel.

Both are composed of kiln.mint ops over one table of flat positions in the padded plane
(_block_index): unfold is an index_select of the padded input at it, fold an index_add into a
padded plane of zeros, then cropped. Autograd differentiates them (each one's gradient is the
other) and kiln.jit traces them: the positions follow from the shapes alone.

Where this differs from PyTorch: integer inputs are taken too (PyTorch's kernels take floats and
bool only), as both only move or add elements.
"""

from .. import _C, mint as _mint
from ..errors import KilnTypeError, ShapeError
from ..mint._composite import _dims
from ._layer_arguments import checked_sizes
from .cell import Cell

__all__ = ["unfold", "fold", "Unfold", "Fold"]


def _geometry(owner, kernel_size, dilation, padding, stride):
    """The blocks' (kernel_size, dilation, padding, stride), each a pair of ints: the kernel, the
    dilation and the stride >= 1, the padding >= 0. Shared with the cells, which check at
    construction."""
    return (checked_sizes(owner, "kernel_size", kernel_size, 2, 1),
            checked_sizes(owner, "dilation", dilation, 2, 1),
            checked_sizes(owner, "padding", padding, 2, 0),
            checked_sizes(owner, "stride", stride, 2, 1))


def _block_counts(size, kernel, dilation, padding, stride):
    """(bH, bW): how many blocks fit along the height and width of a plane of ``size`` (H, W);
    zero (never negative) where the dilated kernel is larger than the padded plane."""
    return tuple(max(0, (n + 2 * p - d * (k - 1) - 1) // s + 1)
                 for n, k, d, p, s in zip(size, kernel, dilation, padding, stride))


def _describe(kernel, dilation, padding, stride=None):
    """The geometry as PyTorch's messages name it."""
    text = f"kernel_size={kernel}, dilation={dilation}, padding={padding}"
    return text if stride is None else f"{text}, stride={stride}"


def _block_index(kernel, dilation, stride, blocks, width):
    """int64 [kH * kW * bH * bW]: for each kernel offset (i, j), then each block (r, c), both row
    by row, the flat position (r * sH + i * dH) * width + c * sW + j * dW of that element of that
    block in a padded plane ``width`` columns wide. Built with ops (arange), so that a kiln.jit
    trace records it as it records the rest."""
    def steps(count, step, dim):  # count positions step apart, along dim of 4
        shape = [1, 1, 1, 1]
        shape[dim] = count
        return (_mint.arange(count) * step).reshape(shape)

    rows = steps(kernel[0], dilation[0], 0) + steps(blocks[0], stride[0], 2)
    cols = steps(kernel[1], dilation[1], 1) + steps(blocks[1], stride[1], 3)
    return (rows * width + cols).reshape(-1)


def _tensor(owner, input, ranks):  # noqa: A002  (PyTorch's argument name)
    """``input`` if it is a kiln tensor of one of the two ``ranks`` (names of the shapes, by
    rank) whose dimensions after the batch one are non-zero; else a KilnTypeError or a
    ShapeError, as PyTorch's, which takes an empty batch but no empty block."""
    if not isinstance(input, _C.Tensor):
        raise KilnTypeError(f"{owner}: expected input to be a kiln.Tensor, got "
                            f"{type(input).__name__}")
    shape = tuple(input.shape)
    unbatched, batched = sorted(ranks)
    if len(shape) not in ranks or 0 in shape[len(shape) - unbatched:]:
        raise ShapeError(f"{owner}: expected input {ranks[batched]} or one sample "
                         f"{ranks[unbatched]}, with sizes other than N non-zero, got "
                         f"{_dims(shape)}")
    return input if len(shape) == batched else _mint.unsqueeze(input, 0)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """unfold(input, kernel_size, dilation=1, padding=0, stride=1): the sliding blocks of input
    [N, C, H, W] (or one sample [C, H, W]) as columns, [N, C * kH * kW, L] ([C * kH * kW, L]),
    PyTorch's im2col. The blocks are kernel_size (kH, kW) with ``dilation`` between their
    elements, ``stride`` apart, over the input zero-padded by ``padding`` on each side (each an
    int or a pair: height, width); L = bH * bW, with bH = (H + 2 * padding - dilation * (kH -
    1) - 1) // stride + 1 (bW likewise). Arguments out of range are a KilnValueError; an input
    of another rank, an empty C, H or W, or one with no block along a dimension a ShapeError.
    See the module's documentation for the layout."""
    owner = "unfold"
    kernel, dilation, padding, stride = _geometry(owner, kernel_size, dilation, padding, stride)
    x = _tensor(owner, input, {3: "[C, H, W]", 4: "[N, C, H, W]"})
    n, c, h, w = x.shape
    blocks = _block_counts((h, w), kernel, dilation, padding, stride)
    if min(blocks) < 1:
        raise ShapeError(f"{owner}: given input with spatial size ({h}, {w}), "
                         f"{_describe(kernel, dilation, padding)}, the array of sliding blocks "
                         f"would be {blocks}; expected at least one block along each dimension "
                         f"(the padded input must be as large as the dilated kernel)")
    (ph, pw), width = padding, w + 2 * padding[1]
    if ph or pw:
        x = _mint.pad(x, (pw, pw, ph, ph))
    plane = x.reshape(n, c, (h + 2 * ph) * width)
    index = _block_index(kernel, dilation, stride, blocks, width)
    cols = _mint.index_select(plane, 2, index).reshape(n, c * kernel[0] * kernel[1],
                                                       blocks[0] * blocks[1])
    return cols if input.ndim == 4 else _mint.squeeze(cols, 0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):  # noqa: A002
    """fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1): the columns
    input [N, C * kH * kW, L] (or one sample [C * kH * kW, L]) put back as the sliding blocks of
    an image [N, C, H, W] ([C, H, W]) of ``output_size`` (H, W), PyTorch's col2im: unfold's
    adjoint, the elements of overlapping blocks added up (see the module's documentation).
    ``output_size`` and the block arguments are ints or pairs (height, width), as unfold's.
    Arguments out of range are a KilnValueError; an input of another rank or with an empty
    dimension after N, a dimension 1 that kH * kW does not divide, or L other than the number
    of blocks in the output (bH * bW, as unfold counts them) a ShapeError."""
    owner = "fold"
    size = checked_sizes(owner, "output_size", output_size, 2, 0)
    kernel, dilation, padding, stride = _geometry(owner, kernel_size, dilation, padding, stride)
    x = _tensor(owner, input, {2: "[C * kH * kW, L]", 3: "[N, C * kH * kW, L]"})
    n, rows, length = x.shape
    area = kernel[0] * kernel[1]
    if rows % area:
        raise ShapeError(f"{owner}: expected size of input's dimension 1 (C * kH * kW) to be "
                         f"divisible by the product of kernel_size {kernel} ({area}), got "
                         f"{rows}, of input {_dims(input.shape)}")
    blocks = _block_counts(size, kernel, dilation, padding, stride)
    # L is at least 1 (_tensor), so this also refuses an output with no block.
    if length != blocks[0] * blocks[1]:
        raise ShapeError(f"{owner}: given output_size={size}, "
                         f"{_describe(kernel, dilation, padding, stride)}, expected size of "
                         f"input's last dimension to match the number of sliding blocks "
                         f"{blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, got {length}, "
                         f"of input {_dims(input.shape)}")
    c, (h, w), (ph, pw) = rows // area, size, padding
    height, width = h + 2 * ph, w + 2 * pw
    index = _block_index(kernel, dilation, stride, blocks, width)
    plane = _mint.zeros((n, c, height * width), dtype=x.dtype, device=x.device)
    plane = _mint.index_add(plane, 2, index, x.reshape(n, c, area * length))
    image = plane.reshape(n, c, height, width)
    if ph or pw:
        image = image[:, :, ph:ph + h, pw:pw + w]
    return image if input.ndim == 3 else _mint.squeeze(image, 0)


class Unfold(Cell):
    """Unfold(kernel_size, dilation=1, padding=0, stride=1): the sliding blocks of its input [N,
    C, H, W] (or [C, H, W]) as columns [N, C * kH * kW, L] (F.unfold, which documents the
    arguments). The arguments are kept as given (an int or a pair) and checked here; the input
    when the cell runs."""

    def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        _geometry("Unfold", kernel_size, dilation, padding, stride)
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def construct(self, input):  # noqa: A002
        return unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)

    def extra_repr(self):
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Fold(Cell):
    """Fold(output_size, kernel_size, dilation=1, padding=0, stride=1): its input columns [N, C
    * kH * kW, L] (or [C * kH * kW, L]) summed back into an image [N, C, H, W] of
    ``output_size`` (F.fold, which documents the arguments). The arguments are kept as given
    (an int or a pair) and checked here; the input when the cell runs."""

    def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
        super().__init__()
        checked_sizes("Fold", "output_size", output_size, 2, 0)
        _geometry("Fold", kernel_size, dilation, padding, stride)
        self.output_size = output_size
        self.kernel_size = kernel_size
        self.dilation = dilation
        self.padding = padding
        self.stride = stride

    def construct(self, input):  # noqa: A002
        return fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
                    self.stride)

    def extra_repr(self):
        return (f"output_size={self.output_size}, kernel_size={self.kernel_size}, "
                f"dilation={self.dilation}, padding={self.padding}, stride={self.stride}")
