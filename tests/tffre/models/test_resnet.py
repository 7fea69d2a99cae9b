"""ResNet-18 (tffre.models.resnet): torchvision's parameter count, shapes, training."""

import numpy as np
import pytest
import tensorflow as tf

from tffre.models.resnet import resnet18

# torchvision.models.resnet18() has 11,689,512 parameters (its model card's figure). By hand,
# with k*k*c_in*c_out for a bias-free conv and 2*c (gamma, beta) for a BN:
#   stem   conv1 7*7*3*64 = 9,408; bn1 128                                         9,536
#   layer1 2 blocks x (2 x 3*3*64*64 + 2 x 128) = 2 x 73,984                    147,968
#   layer2 block0: 3*3*64*128 + 3*3*128*128 + 1*1*64*128 (downsample) + 3 x 256
#          = 230,144; block1: 2 x 3*3*128*128 + 2 x 256 = 295,424               525,568
#   layer3 block0: 294,912 + 589,824 + 32,768 + 3 x 512 = 919,040;
#          block1: 2 x 589,824 + 2 x 512 = 1,180,672                          2,099,712
#   layer4 block0: 1,179,648 + 2,359,296 + 131,072 + 3 x 1,024 = 3,673,088;
#          block1: 2 x 2,359,296 + 2 x 1,024 = 4,720,640                      8,393,728
#   feature extractor (no fc)                                                11,176,512
#   fc 512*1000 + 1000 = 513,000                                total        11,689,512
TORCHVISION_PARAMS = 11_689_512
FEATURE_PARAMS = 11_176_512
# PyTorch keeps BN's running mean/var as buffers, not parameters; Keras counts them as
# non-trainable weights: 2 x (64 + 4*64 + 5*128 + 5*256 + 5*512 channels) = 2 x 4,800.
BN_MOVING = 9_600
# The small-input stem's 3x3 conv has 3*3*3*64 = 1,728 weights instead of 9,408.
SMALL_FEATURE_PARAMS = FEATURE_PARAMS - 9_408 + 1_728


def trainable(model):
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def non_trainable(model):
    return sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)


def images(shape, seed=0):
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


@pytest.fixture(scope="module")
def imagenet_model():
    return resnet18(num_classes=1000)


def test_parameter_count_equals_torchvision_resnet18(imagenet_model):
    # Compare the TRAINABLE count: model.count_params() also holds the BN moving statistics.
    assert trainable(imagenet_model) == TORCHVISION_PARAMS
    assert non_trainable(imagenet_model) == BN_MOVING
    assert imagenet_model.count_params() == TORCHVISION_PARAMS + BN_MOVING
    assert imagenet_model.get_layer("fc").count_params() == 512 * 1000 + 1000


def test_torchvision_layout_at_224(imagenet_model):
    m = imagenet_model
    assert m.input_shape == (None, 224, 224, 3) and m.output_shape == (None, 1000)
    expected = {"conv1": (112, 112, 64), "maxpool": (56, 56, 64), "layer1_1_out": (56, 56, 64),
                "layer2_1_out": (28, 28, 128), "layer3_1_out": (14, 14, 256),
                "layer4_1_out": (7, 7, 512), "avgpool": (512,)}
    for name, shape in expected.items():
        assert m.get_layer(name).output_shape == (None, *shape), name
    # PyTorch pads symmetrically: 3 on every side before the 7x7 stride-2 conv.
    assert m.get_layer("conv1_pad").padding == ((3, 3), (3, 3))
    convs = [l for l in m.layers if isinstance(l, tf.keras.layers.Conv2D)]
    bns = [l for l in m.layers if isinstance(l, tf.keras.layers.BatchNormalization)]
    assert len(convs) == len(bns) == 20  # 1 stem + 16 in blocks + 3 projection shortcuts
    assert not any(c.use_bias for c in convs)
    assert all(b.epsilon == 1e-5 and b.momentum == 0.9 for b in bns)
    assert sorted(l.name for l in convs if "downsample" in l.name) == [
        "layer2_0_downsample_conv", "layer3_0_downsample_conv", "layer4_0_downsample_conv"]


def test_feature_extractor_outputs_512_per_image():
    model = resnet18((64, 64, 3))
    assert trainable(model) == FEATURE_PARAMS
    assert model.layers[-1].name == "avgpool"
    out = model(images((2, 64, 64, 3)), training=False)
    assert out.shape == (2, 512)
    assert np.isfinite(out.numpy()).all() and (out.numpy() >= 0).all()  # pooled ReLU outputs


def test_small_input_variant_on_32x32():
    features = resnet18((32, 32, 3), small_input=True)
    assert trainable(features) == SMALL_FEATURE_PARAMS
    assert features.get_layer("conv1").kernel.shape == (3, 3, 3, 64)
    assert "maxpool" not in [l.name for l in features.layers]
    # Full resolution through layer1, then halved three times: 32 -> 16 -> 8 -> 4.
    assert features.get_layer("layer1_1_out").output_shape == (None, 32, 32, 64)
    assert features.get_layer("layer4_1_out").output_shape == (None, 4, 4, 512)
    assert features(images((3, 32, 32, 3)), training=False).shape == (3, 512)
    logits = resnet18((32, 32, 3), num_classes=8, small_input=True)
    assert logits(images((3, 32, 32, 3)), training=False).shape == (3, 8)
    assert trainable(logits) == SMALL_FEATURE_PARAMS + 512 * 8 + 8


def test_a_training_step_changes_the_weights():
    tf.keras.utils.set_random_seed(0)
    model = resnet18((32, 32, 3), num_classes=3, small_input=True, seed=0)
    x, y = images((4, 32, 32, 3)), np.array([0, 1, 2, 1], np.int32)
    before = [w.numpy().copy() for w in model.weights]
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    assert np.isfinite(loss.numpy()) and all(g is not None for g in grads)
    tf.keras.optimizers.SGD(0.1).apply_gradients(zip(grads, model.trainable_variables))
    changed = {w.name: not np.array_equal(b, w.numpy()) for b, w in zip(before, model.weights)}
    # Every trainable weight moved, and training=True updated the BN moving statistics.
    assert all(changed[w.name] for w in model.trainable_weights)
    assert all(changed[w.name] for w in model.non_trainable_weights)


def test_seed_builds_the_same_weights_and_layers_differ():
    a = resnet18((32, 32, 3), num_classes=2, small_input=True, seed=7)
    b = resnet18((32, 32, 3), num_classes=2, small_input=True, seed=7)
    for wa, wb in zip(a.weights, b.weights):
        np.testing.assert_array_equal(wa.numpy(), wb.numpy())
    # Each layer draws its own seed: two equal-shaped convs do not start identical.
    k1 = a.get_layer("layer1_0_conv1").kernel.numpy()
    k2 = a.get_layer("layer1_0_conv2").kernel.numpy()
    assert not np.array_equal(k1, k2)
    # He-normal fan-out: std sqrt(2 / (3*3*64)).
    assert abs(k1.std() - np.sqrt(2 / 576)) < 0.005


@pytest.mark.parametrize("bad", [0, -1, 2.0, True, "8"])
def test_bad_num_classes_is_refused(bad):
    with pytest.raises(ValueError, match="num_classes"):
        resnet18((32, 32, 3), num_classes=bad, small_input=True)
