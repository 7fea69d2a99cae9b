"""Generates the embedded image-classification sample (synthetic; invented by the tffre authors).

    python data/image_sample/generate.py              # rewrites tffre/resources/image_sample/
    python data/image_sample/generate.py --out DIR    # writes the same files under DIR instead

32x32 RGB PNGs of invented "retina-like" cross-sections in OCT-C8's official-split
layout, ``<split>/<class>/<id>.png`` with splits train/val/test, so that
:func:`tffre.data.image_sets.load_oct_c8` reads it like the real dataset. No real
patient or scan is behind any of them.

Every image shows a dark vitreous above a bright, gently curved retinal band and
a dimmer choroid below it. Its class is the combination of three binary traits:

* the lesion on the band: a bright ``spot`` or a dark ``cyst`` (a hole);
* the band's texture: fine stripes ``rising`` (+45 deg) or ``falling`` (-45 deg);
* the band's thickness: ``thin`` (about 5 px) or ``thick`` (about 9 px).

Everything else is random per image and shared by all classes: the band's height,
curvature, brightness and the stripes' phase and period; the lesion's place along
the band and its size; distractors (a vertical vessel shadow, bright specks, a grey
floater in the vitreous); a colour tint; speckle and Gaussian noise. The stripes'
random phase averages out in any fixed pixel, so a linear model on raw pixels
cannot see the texture trait and does clearly worse than a small CNN.

Each image has its own generator, ``numpy.random.default_rng([SEED, split, class,
index])``, so the output is deterministic and any one image can be regenerated
alone (:func:`render`). PNGs are written with ``tf.io.encode_png`` (no Pillow).
"""

import argparse
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# The sample ships as package data, so that a non-editable install finds it.
OUT_DIR = os.path.join(HERE, "..", "..", "tffre", "resources", "image_sample")
SEED = 20241201
SIZE = 32
SPLITS = {"train": 60, "val": 10, "test": 20}  # images per class
GRAIN = 4  # speckle grain width, px
LEVEL_STEP = 6  # output intensities are multiples of 6 (43 levels)
LESIONS = ("spot", "cyst")
TEXTURES = ("rising", "falling")
THICKNESSES = ("thin", "thick")
# The 8 classes, sorted so that the folder order (the loaders' label order) is this order.
CLASSES = tuple(sorted(f"{lesion}_{texture}_{thickness}" for lesion in LESIONS
                       for texture in TEXTURES for thickness in THICKNESSES))
SYNTHETIC_NOTICE = """\
SYNTHETIC DATA - invented by the tffre authors, not from any patient or publication.

Every image under this folder was drawn by data/image_sample/generate.py
(numpy.random.default_rng([20241201, split, class, index])) in the tffre repository.
No real patient, scan or OCT-C8 / Kvasir image is behind them. The layout is
OCT-C8's (train/, val/, test/, one folder per class); the 8 classes are invented
combinations of lesion (spot/cyst), stripe direction (rising/falling) and band
thickness (thin/thick). Do not report results on them as results on OCT-C8 or
Kvasir. See data/image_sample/README.md.
"""


def _blob(yy, xx, cy, cx, radius):
    """A soft disc: 1 inside ``radius``, falling to 0 over one pixel."""
    return np.clip(radius + 0.5 - np.hypot(yy - cy, xx - cx), 0.0, 1.0)


def render(class_name, rng):
    """One image of ``class_name`` as uint8 [SIZE, SIZE, 3], drawn with ``rng``."""
    lesion, texture, thickness = class_name.split("_")
    yy, xx = np.mgrid[0:SIZE, 0:SIZE].astype(np.float64)

    # The retinal band: centre line y = c + a (x - 16)^2, random height and curvature.
    centre = rng.uniform(13.0, 19.0) + rng.uniform(-3.0, 3.0) * ((xx - SIZE / 2) / (SIZE / 2)) ** 2
    half = (2.5 if thickness == "thin" else 4.5) + rng.uniform(-0.7, 0.7)
    inside = np.clip(half + 0.5 - np.abs(yy - centre), 0.0, 1.0)
    below = np.clip(yy - centre - half + 0.5, 0.0, 1.0)

    # Oriented stripes in the band: +-45 deg (jittered), random period and phase.
    angle = np.deg2rad((45.0 if texture == "rising" else -45.0) + rng.uniform(-12.0, 12.0))
    period = rng.uniform(3.5, 5.0)
    phase = rng.uniform(0.0, 2 * np.pi)
    # Image rows grow downwards, so a "rising" stripe runs up to the right.
    stripes = np.cos(2 * np.pi * (xx * np.sin(angle) + yy * np.cos(angle)) / period + phase)
    brightness = rng.uniform(0.45, 0.75)
    band = brightness * (1.0 + rng.uniform(0.2, 0.35) * stripes)

    image = 0.06 + 0.04 * rng.random() + below * rng.uniform(0.15, 0.3)
    image = image * (1 - inside) + band * inside

    # The lesion, on the band's centre line at a random place along it.
    lx = rng.uniform(5.0, SIZE - 5.0)
    ly = centre[0, int(round(lx))] + rng.uniform(-1.0, 1.0)
    disc = _blob(yy, xx, ly, lx, rng.uniform(2.0, 3.0))
    if lesion == "spot":
        image = image + disc * rng.uniform(0.3, 0.45)
    else:
        image = image * (1 - disc * rng.uniform(0.6, 0.85))

    # Distractors shared by all classes.
    if rng.random() < 0.7:  # a vessel's vertical shadow through the band and below it
        vx = rng.uniform(2.0, SIZE - 2.0)
        shadow = np.clip(1.0 - np.abs(xx - vx), 0.0, 1.0) * (yy > centre - half)
        image = image * (1 - shadow * rng.uniform(0.3, 0.6))
    if rng.random() < 0.5:  # a grey floater in the vitreous, a lesion look-alike
        fx = rng.uniform(4.0, SIZE - 4.0)
        fy = rng.uniform(2.0, max(3.0, centre[0, int(round(fx))] - half - 3.0))
        image = image + _blob(yy, xx, fy, fx, rng.uniform(1.0, 2.0)) * rng.uniform(0.1, 0.25)
    for _ in range(rng.integers(0, 4)):  # bright specks anywhere
        image[rng.integers(0, SIZE), rng.integers(0, SIZE)] += rng.uniform(0.2, 0.4)

    # Speckle (multiplicative, as OCT's) and additive noise, in grains GRAIN px wide: OCT
    # speckle is elongated laterally, and repeated pixels keep the PNGs small.
    grains = (SIZE, SIZE // GRAIN)
    image = (image * np.repeat(rng.gamma(16.0, 1 / 16.0, grains), GRAIN, axis=1)
             + np.repeat(rng.normal(0.0, 0.02, grains), GRAIN, axis=1))
    tint = 1.0 + rng.uniform(-0.12, 0.12, 3)
    rgb = np.clip(image[..., None] * tint, 0.0, 1.0)
    # Quantised intensities (multiples of LEVEL_STEP) also keep the PNGs small.
    return (np.round(rgb * 255 / LEVEL_STEP) * LEVEL_STEP).clip(0, 255).astype(np.uint8)


def image_rng(split, class_index, index):
    """The generator of one image: its own seed, so images can be drawn independently."""
    return np.random.default_rng([SEED, list(SPLITS).index(split), class_index, index])


def image_path(out_dir, split, class_name, index):
    """Where image ``index`` of ``class_name`` in ``split`` is written."""
    return os.path.join(out_dir, split, class_name, f"{split}_{class_name}_{index:03d}.png")


def encode_png(image):
    """PNG bytes of a uint8 [H, W, 3] image, with TensorFlow (deterministic zlib, level 9)."""
    import tensorflow as tf
    return tf.io.encode_png(image, compression=9).numpy()


def generate(out_dir):
    """Writes every image and SYNTHETIC.txt under ``out_dir``; returns {split: count}."""
    counts = {}
    for split, per_class in SPLITS.items():
        for class_index, class_name in enumerate(CLASSES):
            os.makedirs(os.path.join(out_dir, split, class_name), exist_ok=True)
            for index in range(per_class):
                image = render(class_name, image_rng(split, class_index, index))
                with open(image_path(out_dir, split, class_name, index), "wb") as f:
                    f.write(encode_png(image))
        counts[split] = per_class * len(CLASSES)
    with open(os.path.join(out_dir, "SYNTHETIC.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write(SYNTHETIC_NOTICE)
    return counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT_DIR,
                        help="folder to write into (default: tffre/resources/image_sample)")
    args = parser.parse_args(argv)
    counts = generate(args.out)
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.out) for f in fs)
    print(f"{os.path.normpath(args.out)}: {counts} images, {len(CLASSES)} classes, "
          f"{size / 1024:.0f} kB")


if __name__ == "__main__":
    main()
