"""The class-per-folder image loaders (tffre.data.image_sets): OCT-C8, Kvasir-v2, stratified split.

Every test writes its own tiny 8x8 PNG folders into tmp_path with tf.io.encode_png.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from tffre.data import image_sets as images
from tffre.data.image_sets import (ImageFolderError, ImageFolderNotFoundError, load_image_folder,
                               load_kvasir, load_oct_c8, split_stratified)


def write_png(path, pixels):
    """Writes uint8 [H, W, C] ``pixels`` (C = 1, 3 or 4) as a PNG; returns the path as str."""
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(tf.io.encode_png(np.asarray(pixels, np.uint8)).numpy())
    return str(path)


def solid(value, channels=3, size=8):
    return np.full((size, size, channels), value, np.uint8)


def make_folder(root, counts, size=8):
    """``root/<class>/img_<k>.png`` for ``{class: n}`` (k < 100).

    Image k of the c-th class in sorted order is solid RGB (40 c, k, 0), so a loaded
    image tells which file it came from.
    """
    for c, (name, n) in enumerate(sorted(counts.items())):
        for k in range(n):
            write_png(os.path.join(root, name, f"img_{k:02d}.png"),
                      solid((40 * c, k, 0), size=size))
    return str(root)


def origin(x):
    """The (class index, image index) that make_folder wrote into each loaded image."""
    rgb = np.round(x[:, 0, 0, :2] * 255).astype(int)
    return [(r // 40, g) for r, g in rgb]


def test_classes_are_the_sorted_folders_and_values_in_0_1(tmp_path):
    root = make_folder(tmp_path, {"zeta": 2, "alpha": 3, "Mid": 1})
    x, y, names = load_image_folder(root, (8, 8))
    assert names == ["Mid", "alpha", "zeta"]  # plain sorted order: upper case first
    assert x.shape == (6, 8, 8, 3) and x.dtype == np.float32
    assert y.dtype == np.int32 and y.tolist() == [0, 1, 1, 1, 2, 2]
    # Files in name order inside each class; 8-bit values scaled by 1/255.
    assert origin(x) == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]
    np.testing.assert_allclose(x[1:4, 0, 0, :2], [[40 / 255, 0], [40 / 255, 1 / 255],
                                                  [40 / 255, 2 / 255]], atol=1e-6)
    assert x.min() >= 0.0 and x.max() <= 1.0


def test_given_class_names_set_the_labels_and_pick_folders(tmp_path):
    root = make_folder(tmp_path, {"a": 1, "b": 2, "c": 1})
    x, y, names = load_image_folder(root, (8, 8), class_names=["c", "a"])
    assert names == ["c", "a"] and y.tolist() == [0, 1] and len(x) == 2
    with pytest.raises(ImageFolderNotFoundError, match=r"[/\\]d: no such class folder"):
        load_image_folder(root, (8, 8), class_names=["a", "d"])


def test_resize_grayscale_rgba_jpeg_bmp_and_other_files(tmp_path):
    write_png(tmp_path / "gray" / "g.png", solid(128, channels=1, size=16))
    rgba = solid(200, channels=4, size=4)
    rgba[..., 3] = 0  # alpha is dropped, not applied
    write_png(tmp_path / "rgba" / "r.PNG", rgba)
    with open(tmp_path / "gray" / "j.jpg", "wb") as f:
        f.write(tf.io.encode_jpeg(solid(60, channels=1, size=8), quality=100).numpy())
    # A 2x2 24-bit BMP (tf has no BMP encoder): rows bottom-up, BGR, padded to 4 bytes.
    row = bytes([0, 0, 255] * 2) + b"\0\0"
    bmp = (b"BM" + (54 + 16).to_bytes(4, "little") + bytes(4) + (54).to_bytes(4, "little")
           + (40).to_bytes(4, "little") + (2).to_bytes(4, "little") + (2).to_bytes(4, "little")
           + (1).to_bytes(2, "little") + (24).to_bytes(2, "little") + bytes(4)
           + (16).to_bytes(4, "little") + bytes(16) + row * 2)
    (tmp_path / "rgba" / "b.bmp").write_bytes(bmp)
    with open(tmp_path / "rgba" / "c16.png", "wb") as f:  # 16-bit grey PNG
        f.write(tf.io.encode_png(np.full((8, 8, 1), 65535, np.uint16)).numpy())
    (tmp_path / "gray" / "notes.txt").write_text("not an image")
    (tmp_path / "gray" / "._g.png").write_bytes(b"\0\5\26\7 macOS resource fork")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / "README.md").write_text("a file at the top is not a class")

    x, y, names = load_image_folder(str(tmp_path), (8, 8))
    assert names == ["gray", "rgba"] and y.tolist() == [0, 0, 1, 1, 1]
    assert x.shape == (5, 8, 8, 3)
    np.testing.assert_allclose(x[0], 128 / 255, atol=1e-6)  # grayscale -> 3 equal channels
    np.testing.assert_allclose(x[1], 60 / 255, atol=2 / 255)  # JPEG
    np.testing.assert_allclose(x[2], np.broadcast_to([1.0, 0.0, 0.0], (8, 8, 3)), atol=1e-6)
    np.testing.assert_allclose(x[3], 1.0, atol=1e-6)  # 16 bits: 65535 -> 1
    np.testing.assert_allclose(x[4], 200 / 255, atol=1e-6)  # RGBA -> RGB, 4x4 upscaled


def test_non_square_resize(tmp_path):
    root = make_folder(tmp_path, {"a": 1})
    x, _, _ = load_image_folder(root, (5, 3))
    assert x.shape == (1, 5, 3, 3)


def test_empty_class_folder_is_named(tmp_path):
    root = make_folder(tmp_path, {"a": 1})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "labels.csv").write_text("x")
    with pytest.raises(ImageFolderError) as e:
        load_image_folder(root, (8, 8))
    message = str(e.value)
    assert message.startswith(os.path.join(root, "b") + ": class folder has no images")
    assert "\n" not in message


def test_root_without_class_folders(tmp_path):
    (tmp_path / "x.png").write_bytes(b"")
    with pytest.raises(ImageFolderError, match="no class sub-folders") as e:
        load_image_folder(str(tmp_path), (8, 8))
    assert str(e.value).startswith(str(tmp_path) + ": ") and "\n" not in str(e.value)
    with pytest.raises(ImageFolderNotFoundError, match="no such folder") as e:
        load_image_folder(str(tmp_path / "missing"), (8, 8))
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("content", [b"", b"not a png at all", b"\x89PNG\r\n\x1a\n" + b"\0" * 20])
def test_unreadable_image_names_the_file(tmp_path, content):
    root = make_folder(tmp_path, {"a": 2})
    bad = tmp_path / "a" / "broken.png"
    bad.write_bytes(content)
    with pytest.raises(ImageFolderError) as e:
        load_image_folder(root, (8, 8))
    message = str(e.value)
    assert message.startswith(f"{bad}: cannot decode the image") and "\n" not in message


def test_bad_image_size(tmp_path):
    root = make_folder(tmp_path, {"a": 1})
    for bad in [(0, 8), 8, (8,)]:
        with pytest.raises(ValueError, match="image_size"):
            load_image_folder(root, bad)


# --------------------------------------------------------------------------- splits


def test_split_stratified_proportions_and_determinism():
    y = np.repeat(np.arange(4), [100, 50, 20, 7])
    parts = split_stratified(y, (0.7, 0.1, 0.2), seed=3)
    assert len(parts) == 3
    joined = np.concatenate(parts)
    assert sorted(joined.tolist()) == list(range(len(y)))  # a partition
    assert all((np.diff(p) > 0).all() for p in parts)  # sorted, no duplicates
    counts = [np.bincount(y[p], minlength=4).tolist() for p in parts]
    # Per class: 70/10/20 exactly; 7 -> 4.9, 0.7, 1.4 rounds by largest remainder to 5, 1, 1.
    assert counts == [[70, 35, 14, 5], [10, 5, 2, 1], [20, 10, 4, 1]]
    again = split_stratified(y, (0.7, 0.1, 0.2), seed=3)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    other = split_stratified(y, (0.7, 0.1, 0.2), seed=4)
    assert not np.array_equal(parts[0], other[0])
    # Label values need not be 0..C-1, nor the classes contiguous.
    y2 = np.array([5, 9, 5, 9, 5, 9, 5, 9, 5, 9])
    train, test = split_stratified(y2, (0.6, 0.4), seed=0)
    assert np.bincount(y2[train]).tolist()[5::4] == [3, 3]


@pytest.mark.parametrize("fractions", [(0.5, 0.4), (0.7, -0.1, 0.4), ()])
def test_split_stratified_refuses_bad_fractions(fractions):
    with pytest.raises(ValueError, match="fractions"):
        split_stratified(np.zeros(10, int), fractions)


def test_split_stratified_refuses_non_integer_labels():
    with pytest.raises(ValueError, match="1-D integer"):
        split_stratified(np.zeros(10), (0.5, 0.5))


# --------------------------------------------------------------------------- datasets


def test_load_oct_c8_reads_the_official_split(tmp_path):
    counts = {"train": 4, "val": 1, "test": 2}
    for split, n in counts.items():
        make_folder(tmp_path / split, {"NORMAL": n, "AMD": n, "CNV": n})
    splits, names = load_oct_c8(str(tmp_path), (8, 8))
    assert names == ["AMD", "CNV", "NORMAL"]
    assert list(splits) == ["train", "val", "test"]
    for split, n in counts.items():
        x, y = splits[split]
        assert x.shape == (3 * n, 8, 8, 3) and np.bincount(y).tolist() == [n] * 3


def test_load_oct_c8_names_the_missing_split_folders(tmp_path):
    make_folder(tmp_path / "train", {"a": 1})
    with pytest.raises(ImageFolderNotFoundError) as e:
        load_oct_c8(str(tmp_path), (8, 8))
    message = str(e.value)
    assert message == (f"{tmp_path}: expected the OCT-C8 split folders train/, val/, test/ "
                       "(each with one folder per class); missing: val/, test/")


def test_load_oct_c8_needs_the_same_classes_in_every_split(tmp_path):
    make_folder(tmp_path / "train", {"a": 1, "b": 1})
    make_folder(tmp_path / "val", {"a": 1, "b": 1})
    make_folder(tmp_path / "test", {"a": 1, "c": 1})
    with pytest.raises(ImageFolderError, match=r"test: class folders \['a', 'c'\] differ"):
        load_oct_c8(str(tmp_path), (8, 8))


def test_load_kvasir_splits_7_1_2_per_class(tmp_path):
    make_folder(tmp_path, {"polyps": 10, "esophagitis": 20})
    splits, names = load_kvasir(str(tmp_path), (8, 8), seed=1)
    assert names == ["esophagitis", "polyps"]
    sizes = {s: np.bincount(y, minlength=2).tolist() for s, (_, y) in splits.items()}
    assert sizes == {"train": [14, 7], "val": [2, 1], "test": [4, 2]}
    # The images travel with their labels, and every file lands in exactly one split.
    seen = []
    for x, y in splits.values():
        assert [c for c, _ in origin(x)] == y.tolist()
        seen += origin(x)
    assert sorted(seen) == [(0, k) for k in range(20)] + [(1, k) for k in range(10)]
    again, _ = load_kvasir(str(tmp_path), (8, 8), seed=1)
    for split in splits:
        np.testing.assert_array_equal(again[split][0], splits[split][0])
    assert images.KVASIR_FRACTIONS == (0.7, 0.1, 0.2)
