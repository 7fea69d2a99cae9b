"""ResNet-18 (He et al. 2016) in Keras, laid out as torchvision's ``resnet18``.

FedCB (and the FL baselines it is compared with) use ResNet-18 as the image backbone
(the paper's "Implementation Details"). ``tf.keras.applications`` has ResNet-50 and
larger but no ResNet-18, so it is built here with the functional API:

* stem: 7x7 stride-2 conv (64) -> BN -> ReLU -> 3x3 stride-2 max pool;
* four stages of two BasicBlocks (two 3x3 convs, each followed by BN) with 64, 128,
  256, 512 channels; stages 2-4 halve the resolution in their first block, whose
  shortcut is then a projection (1x1 stride-2 conv + BN, torchvision's "option B");
* global average pool -> a 512-d feature, optionally followed by a dense classifier.

It follows torchvision, not Keras defaults, where they differ, so that the numbers
and weights correspond one to one: convs followed by BN have no bias (BN's beta makes
it redundant), BN uses eps 1e-5 and momentum 0.1 (Keras momentum 0.9), padding is
symmetric as in PyTorch (explicit ``ZeroPadding2D`` before stride-2 layers, where
Keras ``"same"`` would pad only the bottom/right), and the initialisers are
torchvision's (He-normal fan-out for convs, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for
the classifier). With 1000 classes the trainable parameters number 11,689,512,
torchvision's count; Keras also lists BN's moving mean and variance as 9,600
non-trainable weights, which PyTorch keeps as buffers.

Layer names follow torchvision's with ``_`` for ``.`` (``layer2_0_downsample_conv``
for ``layer2.0.downsample.0``), so a weight-porting script can map them.

Reference: K. He, X. Zhang, S. Ren, J. Sun. Deep Residual Learning for Image
Recognition. CVPR 2016.
"""

import math

import tensorflow as tf

FEATURE_DIM = 512
STAGE_WIDTHS = (64, 128, 256, 512)
BLOCKS_PER_STAGE = (2, 2, 2, 2)
# torchvision's BatchNorm2d defaults: eps 1e-5, momentum 0.1 (weight of the new batch
# statistic; Keras' momentum is the weight of the old moving value, hence 0.9).
BN_EPSILON = 1e-5
BN_MOMENTUM = 0.9


class _Init:
    """Initialisers as torchvision's ResNet; seeded per layer when a seed is given.

    A Keras initialiser with a fixed seed returns the same values for the same shape,
    so each layer gets its own seed (``seed + k``); otherwise two equal-shaped convs
    would start identical.
    """

    def __init__(self, seed):
        self._seed = seed
        self._count = 0

    def _next(self):
        if self._seed is None:
            return None
        self._count += 1
        return self._seed + self._count

    def conv(self):
        # nn.init.kaiming_normal_(mode="fan_out", nonlinearity="relu"): N(0, 2 / fan_out).
        return tf.keras.initializers.VarianceScaling(2.0, "fan_out", "untruncated_normal",
                                                     seed=self._next())

    def dense(self, fan_in):
        # nn.Linear's default: kernel and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
        bound = 1.0 / math.sqrt(fan_in)
        return (tf.keras.initializers.RandomUniform(-bound, bound, seed=self._next()),
                tf.keras.initializers.RandomUniform(-bound, bound, seed=self._next()))


def _conv_bn(x, filters, kernel_size, stride, name, init, relu):
    """conv (no bias) -> BN [-> ReLU], padded symmetrically like PyTorch's ``padding=k//2``."""
    pad = kernel_size // 2
    if stride > 1 and pad:
        # Keras "same" with stride 2 on an even size pads bottom/right only; PyTorch pads
        # both sides, which is what the stride-2 layers of torchvision's weights assume.
        x = tf.keras.layers.ZeroPadding2D(pad, name=f"{name}_pad")(x)
        padding = "valid"
    else:
        padding = "same"  # stride 1, odd kernel: symmetric, as PyTorch
    x = tf.keras.layers.Conv2D(filters, kernel_size, strides=stride, padding=padding,
                               use_bias=False, kernel_initializer=init.conv(), name=name)(x)
    bn_name = name.replace("conv", "bn") if "conv" in name else f"{name}_bn"
    x = tf.keras.layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM,
                                           name=bn_name)(x)
    if relu:
        x = tf.keras.layers.ReLU(name=f"{bn_name}_relu")(x)
    return x


def _basic_block(x, filters, stride, name, init):
    """He et al. 2016's BasicBlock: two 3x3 conv-BN, identity or projection shortcut, ReLU."""
    shortcut = x
    y = _conv_bn(x, filters, 3, stride, f"{name}_conv1", init, relu=True)
    y = _conv_bn(y, filters, 3, 1, f"{name}_conv2", init, relu=False)
    if stride != 1 or x.shape[-1] != filters:
        # Projection shortcut (the paper's option B, torchvision's ``downsample``): 1x1
        # stride-s conv + BN, so the shapes match for the addition.
        shortcut = _conv_bn(x, filters, 1, stride, f"{name}_downsample_conv", init,
                            relu=False)
    y = tf.keras.layers.Add(name=f"{name}_add")([y, shortcut])
    return tf.keras.layers.ReLU(name=f"{name}_out")(y)


def resnet18(input_shape=(224, 224, 3), num_classes=None, small_input=False,
             name="resnet18", *, seed=None, base_width=64):
    """ResNet-18 (He et al. 2016) as a functional ``tf.keras.Model``, torchvision layout.

    The FedCB paper's backbone. With ``num_classes=None`` the model is the feature
    extractor: its output is the global-average-pooled 512-d feature, to which FedCB
    attaches its language-model classifier; with an int it ends with a dense layer
    named ``fc`` giving ``num_classes`` logits (no softmax), as torchvision's.

    Args:
      input_shape: ``(height, width, channels)`` of one image, channels last; height
        and width may be None. Inputs are float images (normalise them beforehand).
      num_classes: None for the 512-d feature, or the number of logits.
      small_input: use a 3x3 stride-1 stem without max pool (the usual CIFAR
        adaptation) instead of the 7x7 stride-2 conv + max pool, which would shrink
        a 32x32 image to 8x8 before the first block.
      name: model name.
      seed: seeds the initialisers (each layer its own), so every call builds the
        same weights; None draws fresh ones.
      base_width: the first stage's channels (64, the standard); the stages have
        base_width x (1, 2, 4, 8). A narrower net (e.g. 8) keeps the architecture
        for CPU runs on small images; the feature is then 8 x base_width wide.

    Returns:
      An uncompiled model ``[batch, *input_shape] -> [batch, 512]`` (feature
      extractor) or ``[batch, num_classes]`` logits.
    """
    if num_classes is not None and (isinstance(num_classes, bool) or
                                    not isinstance(num_classes, int) or num_classes < 1):
        raise ValueError(f"num_classes must be None or a positive int, got {num_classes!r}")
    if isinstance(base_width, bool) or not isinstance(base_width, int) or base_width < 1:
        raise ValueError(f"base_width must be a positive int, got {base_width!r}")
    widths = tuple(w * base_width // STAGE_WIDTHS[0] for w in STAGE_WIDTHS)
    init = _Init(seed)
    inputs = tf.keras.Input(shape=tuple(input_shape), dtype=tf.float32, name="image")
    if small_input:
        x = _conv_bn(inputs, widths[0], 3, 1, "conv1", init, relu=True)
    else:
        x = _conv_bn(inputs, widths[0], 7, 2, "conv1", init, relu=True)
        # torchvision's MaxPool2d(3, 2, padding=1) pads with -inf; after the ReLU every
        # value is >= 0, so zero padding gives the same maxima.
        x = tf.keras.layers.ZeroPadding2D(1, name="maxpool_pad")(x)
        x = tf.keras.layers.MaxPooling2D(3, strides=2, name="maxpool")(x)
    for stage, (filters, blocks) in enumerate(zip(widths, BLOCKS_PER_STAGE), start=1):
        for block in range(blocks):
            stride = 2 if stage > 1 and block == 0 else 1
            x = _basic_block(x, filters, stride, f"layer{stage}_{block}", init)
    outputs = tf.keras.layers.GlobalAveragePooling2D(name="avgpool")(x)
    if num_classes is not None:
        kernel_init, bias_init = init.dense(widths[-1])
        outputs = tf.keras.layers.Dense(num_classes, kernel_initializer=kernel_init,
                                        bias_initializer=bias_init, name="fc")(outputs)
    return tf.keras.Model(inputs, outputs, name=name)


def resnet18_classifier(input_shape, num_classes, *, small_input=False, base_width=64,
                        seed=None, name="resnet18_classifier"):
    """ResNet-18 with a linear head, as the federated image task model.

    Outputs ``{"features": the pooled feature, "logits": Dense "classifier"}``:
    the named outputs the algorithms read (FedCB and FedETF replace the
    head with their frozen classifier on ``features``; FedRep and FedRoD keep
    heads per client). One flat functional graph, so every layer is the
    model's own.
    """
    extractor = resnet18(input_shape, None, small_input, seed=seed, base_width=base_width)
    init = _Init(None if seed is None else seed + 1)
    kernel_init, bias_init = init.dense(int(extractor.output.shape[-1]))
    logits = tf.keras.layers.Dense(num_classes, kernel_initializer=kernel_init,
                                   bias_initializer=bias_init, name="classifier")(extractor.output)
    return tf.keras.Model(extractor.input, {"features": extractor.output, "logits": logits},
                          name=name)
