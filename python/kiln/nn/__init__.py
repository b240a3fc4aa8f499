"""kiln.nn: cells (layers and models), parameters and initialisers for training with Kiln.

    import kiln
    from kiln import nn

    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    loss_fn = nn.CrossEntropyLoss()
    loss = loss_fn(net(x), labels)
    loss.backward()                      # fills p.grad for p in net.parameters()

- ``Cell`` (alias ``Module``): parameter and sub-cell registration by attribute assignment,
  ``construct`` (or ``forward``) called by ``__call__``, ``parameters()``,
  ``named_parameters()``, ``trainable_params()``, ``cells()``, ``named_cells()``, buffers
  (``register_buffer``, ``buffers()``), ``apply(fn)``, ``requires_grad_()``,
  ``state_dict()`` / ``load_state_dict(strict=True)``, ``train()`` / ``eval()``,
  ``zero_grad()``, forward hooks (``register_forward_pre_hook``, ``register_forward_hook``)
  (kiln/nn/cell.py).
- ``Parameter(data, requires_grad=True)``: a leaf tensor that cells register.
- Layers: ``Linear`` / ``Dense``, ``Conv1d``, ``Conv2d``, ``Conv3d``, ``ConvTranspose1d``,
  ``ConvTranspose2d``, ``ConvTranspose3d``, ``Upsample`` (``UpsamplingNearest2d``,
  ``UpsamplingBilinear2d``; kiln/nn/upsampling.py), ``LayerNorm``, ``RMSNorm``, ``GroupNorm``,
  ``Embedding`` (``Embedding.from_pretrained``), ``EmbeddingBag`` (sum / mean / max bags),
  ``Dropout``, ``Dropout1d``, ``Dropout2d``, ``Dropout3d``, ``AlphaDropout``,
  ``FeatureAlphaDropout``, ``MultiheadAttention``, ``BatchNorm1d``,
  ``BatchNorm2d``, ``BatchNorm3d``, ``MaxPool1d``, ``MaxPool2d``, ``MaxPool3d``, ``AvgPool1d``,
  ``AvgPool2d``, ``AvgPool3d``, the adaptive pools (``AdaptiveAvgPool1d`` / ``2d`` / ``3d``,
  ``AdaptiveMaxPool1d`` / ``2d`` / ``3d``), ``LPPool1d`` / ``2d`` / ``3d``, ``MaxUnpool1d`` /
  ``2d`` / ``3d`` (kiln/nn/pooling.py), ``FractionalMaxPool2d`` / ``3d``, ``ChannelShuffle``,
  ``LocalResponseNorm``, ``CrossMapLRN2d`` (kiln/nn/_layers_more.py), ``Flatten``,
  ``Unflatten``, ``Unfold``, ``Fold`` (im2col and col2im, kiln/nn/fold.py), the padding cells
  (``ZeroPad1d`` / ``2d`` / ``3d``, ``ConstantPad*``, ``ReflectionPad*``, ``ReplicationPad*``,
  ``CircularPad*``;
  kiln/nn/padding.py), the lazy cells that infer their input size at the first call
  (``LazyLinear``, ``LazyConv1d`` / ``2d`` / ``3d`` and the transposed ones, ``LazyBatchNorm*``,
  ``LazyInstanceNorm*``; kiln/nn/lazy.py), ``AdaptiveLogSoftmaxWithLoss`` (kiln/nn/adaptive.py),
  ``PixelShuffle``, ``PixelUnshuffle``, ``Bilinear``, ``InstanceNorm1d``,
  ``InstanceNorm2d``, ``InstanceNorm3d`` (kiln/nn/extra_layers.py);
  containers ``Sequential``, ``ModuleList``, ``ModuleDict``, ``ParameterList``,
  ``ParameterDict``; recurrent ``RNN``, ``LSTM``, ``GRU`` and their cells ``RNNCell``,
  ``LSTMCell``, ``GRUCell`` (kiln/nn/rnn.py); ``TransformerEncoderLayer``,
  ``TransformerEncoder``, ``TransformerDecoderLayer``, ``TransformerDecoder``, ``Transformer``
  (kiln/nn/transformer.py); activations ``ReLU``, ``GELU``,
  ``SiLU``, ``Tanh``, ``Sigmoid``, ``Softmax``, ``Identity``, ``LeakyReLU``, ``ELU``,
  ``Softplus``, ``Hardtanh``, ``ReLU6``, ``PReLU``, ``Mish``, ``LogSoftmax``, ``Hardswish``,
  ``Hardsigmoid``, ``GLU``, ``SELU``, ``CELU``, ``LogSigmoid``, ``Softsign``, ``Tanhshrink``,
  ``Threshold``, ``Softmin``, ``Hardshrink``, ``Softshrink``, ``RReLU``, ``Softmax2d``; losses
  ``CrossEntropyLoss``, ``NLLLoss``, ``MSELoss``, ``L1Loss``, ``SmoothL1Loss``, ``HuberLoss``,
  ``BCELoss``, ``BCEWithLogitsLoss``, ``KLDivLoss``, ``SoftMarginLoss``, ``MarginRankingLoss``,
  ``CosineEmbeddingLoss``, ``HingeEmbeddingLoss``, ``TripletMarginLoss``, ``GaussianNLLLoss``,
  ``PoissonNLLLoss``, ``MultiMarginLoss``, ``MultiLabelMarginLoss``, ``MultiLabelSoftMarginLoss``,
  ``TripletMarginWithDistanceLoss``, ``CTCLoss`` (kiln/nn/loss.py); distances ``CosineSimilarity``,
  ``PairwiseDistance`` (kiln/nn/distance.py).
  Each layer's file documents its arguments and its (PyTorch-equal) initialisation; layers with
  parameters take ``dtype`` (default: the default dtype).
- ``DataParallel(cell, group=None, bucket_cap_mb=25)``: data-parallel training over a
  ``kiln.distributed`` process group, gradients averaged by bucketed all-reduce overlapped with
  backward (kiln/nn/parallel.py).
- ``kiln.nn.functional``: PyTorch's ``torch.nn.functional`` (``F.relu``, ``F.cross_entropy``,
  ``F.conv2d``, ... with its argument order), over kiln.mint (kiln/nn/functional.py).
- ``kiln.nn.utils``: ``clip_grad_norm_`` / ``clip_grad_value_`` (on ``.grad``) and
  ``clip_grad_norm`` / ``clip_grad_value`` (on gradients given as values, in jitted steps);
  ``kiln.nn.utils.rnn``'s ``pad_sequence``, ``PackedSequence`` and its pack / pad / unpack
  functions, which the RNN cells take (kiln/nn/utils/rnn.py); weight parametrizations:
  ``kiln.nn.utils.parametrize.register_parametrization``, ``kiln.nn.utils.parametrizations``'s
  ``weight_norm`` / ``spectral_norm`` and the older hook-based ``kiln.nn.utils.weight_norm`` /
  ``spectral_norm`` (kiln/nn/utils/parametrize.py).
- ``kiln.nn.init``: ``uniform_``, ``normal_``, ``constant_``, ``zeros_``, ``ones_``,
  ``xavier_uniform_``, ``xavier_normal_``, ``kaiming_uniform_``, ``kaiming_normal_``,
  ``trunc_normal_``, ``orthogonal_``, ``eye_``, ``dirac_``, seeded by
  ``kiln.manual_seed``.
"""

from . import functional, init, utils  # noqa: F401
from .adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish,  # noqa: F401
                         Hardtanh, Identity, LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU,
                         ReLU6, RReLU, SELU, Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus,
                         Softshrink, Softsign, Tanh, Tanhshrink, Threshold)
from .attention import MultiheadAttention  # noqa: F401
from .cell import Cell, LoadResult, Module  # noqa: F401
from .container import (ModuleDict, ModuleList, ParameterDict, ParameterList,  # noqa: F401
                        Sequential)
from .conv import (Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d,  # noqa: F401
                   ConvTranspose3d)
from .distance import CosineSimilarity, PairwiseDistance  # noqa: F401
from ._layers_more import (ChannelShuffle, CrossMapLRN2d, FractionalMaxPool2d,  # noqa: F401
                           FractionalMaxPool3d, LocalResponseNorm)
from .dropout import (AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d,  # noqa: F401
                      FeatureAlphaDropout)
from .embedding import Embedding, EmbeddingBag  # noqa: F401
from .extra_layers import (Bilinear, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d,  # noqa: F401
                           PixelShuffle, PixelUnshuffle)
from .lazy import (LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d,  # noqa: F401
                   LazyConv2d, LazyConv3d, LazyConvTranspose1d, LazyConvTranspose2d,
                   LazyConvTranspose3d, LazyInstanceNorm1d, LazyInstanceNorm2d,
                   LazyInstanceNorm3d, LazyLinear, UninitializedBuffer, UninitializedParameter)
from .linear import Dense, Linear  # noqa: F401
from .flatten import Flatten, Unflatten  # noqa: F401
from .fold import Fold, Unfold  # noqa: F401
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss,  # noqa: F401
                   CrossEntropyLoss, CTCLoss, GaussianNLLLoss, HingeEmbeddingLoss, HuberLoss,
                   KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, MultiLabelMarginLoss,
                   MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
                   SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss)
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm,  # noqa: F401
                            LayerNorm, RMSNorm)
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d,  # noqa: F401
                      ConstantPad2d, ConstantPad3d, ReflectionPad1d, ReflectionPad2d,
                      ReflectionPad3d, ReplicationPad1d, ReplicationPad2d, ReplicationPad3d,
                      ZeroPad1d, ZeroPad2d, ZeroPad3d)
from .parallel import DataParallel  # noqa: F401
from .parameter import Parameter  # noqa: F401
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d,  # noqa: F401
                      AdaptiveMaxPool1d, AdaptiveMaxPool2d, AdaptiveMaxPool3d, AvgPool1d,
                      AvgPool2d, AvgPool3d, LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool2d,
                      MaxPool3d, MaxUnpool1d, MaxUnpool2d, MaxUnpool3d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell  # noqa: F401
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from .transformer import (Transformer, TransformerDecoder, TransformerDecoderLayer,  # noqa: F401
                          TransformerEncoder, TransformerEncoderLayer)

__all__ = ["functional", "init", "utils", "Cell", "Module", "LoadResult", "Parameter", "Linear",
           "Dense", "Conv2d", "BatchNorm1d", "BatchNorm2d", "ModuleList", "ModuleDict",
           "ParameterList", "ParameterDict", "LayerNorm", "RMSNorm", "Embedding", "EmbeddingBag",
           "Dropout", "Fold", "Unfold", "AdaptiveLogSoftmaxWithLoss", "LazyLinear", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d",
           "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d",
           "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
           "UninitializedParameter", "UninitializedBuffer",
           "MultiheadAttention",
           "Sequential", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
           "Flatten", "Unflatten", "ReLU", "GELU", "SiLU", "Tanh",
           "Sigmoid", "Softmax", "Identity", "LeakyReLU", "ELU", "Softplus", "Hardtanh",
           "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss",
           "BCELoss", "BCEWithLogitsLoss", "DataParallel", "RNN", "LSTM", "GRU", "RNNCell",
           "LSTMCell", "GRUCell", "TransformerEncoderLayer", "TransformerEncoder",
           "TransformerDecoderLayer", "TransformerDecoder", "Transformer", "Conv1d",
           "ConvTranspose1d", "ConvTranspose2d", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "ReLU6",
           "PReLU", "Mish", "LogSoftmax", "Hardswish", "Hardsigmoid", "GroupNorm", "Dropout1d",
           "Dropout2d", "KLDivLoss", "MaxPool1d", "AvgPool1d", "AdaptiveAvgPool1d",
           "AdaptiveMaxPool1d", "MaxUnpool1d", "MaxUnpool2d", "GLU", "SELU", "CELU", "LogSigmoid",
           "Softsign", "Tanhshrink", "Threshold", "Softmin", "ZeroPad1d", "ZeroPad2d",
           "ConstantPad1d", "ConstantPad2d", "ReflectionPad1d", "ReflectionPad2d",
           "ReplicationPad1d", "ReplicationPad2d", "PixelShuffle", "PixelUnshuffle", "Bilinear",
           "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "Conv3d",
           "ConvTranspose3d", "MaxPool3d", "AvgPool3d", "AdaptiveAvgPool3d", "AdaptiveMaxPool3d",
           "BatchNorm3d", "Hardshrink", "Softshrink", "RReLU", "Softmax2d", "ZeroPad3d",
           "ConstantPad3d", "ReflectionPad3d", "ReplicationPad3d", "CircularPad1d",
           "CircularPad2d", "CircularPad3d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
           "LPPool1d", "LPPool2d", "LPPool3d", "MaxUnpool3d", "ChannelShuffle", "LocalResponseNorm",
           "CrossMapLRN2d", "FractionalMaxPool2d", "FractionalMaxPool3d",
           "SoftMarginLoss", "MarginRankingLoss", "CosineEmbeddingLoss", "HingeEmbeddingLoss",
           "TripletMarginLoss", "GaussianNLLLoss", "PoissonNLLLoss", "MultiMarginLoss",
           "MultiLabelMarginLoss", "MultiLabelSoftMarginLoss", "TripletMarginWithDistanceLoss",
           "CTCLoss",
           "CosineSimilarity", "PairwiseDistance"]
