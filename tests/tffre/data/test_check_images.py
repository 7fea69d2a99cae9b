"""The image data check (tffre.data.check_images): files per class and split, unreadable and
odd-sized images, each named by file.

Every test writes its images with Pillow into tmp_path; the expected counts are read off the
folders with ``os.listdir`` and Pillow here, not with the code under test.
"""

import collections
import os

import pytest
from PIL import Image

from tffre import resources
from tffre.data import check

EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp")


def save(path, size=(8, 8), kind="PNG"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new("RGB", size, (200, 30, 30)).save(path, kind)


def listed(folder):
    """{class: images} of a class-per-folder layout, counted here."""
    return {c: sum(1 for n in os.listdir(os.path.join(folder, c))
                   if n.lower().endswith(EXTENSIONS) and not n.startswith("."))
            for c in sorted(os.listdir(folder)) if os.path.isdir(os.path.join(folder, c))}


@pytest.fixture
def oct_layout(tmp_path):
    """An OCT-C8-style folder: 8x8 PNGs, plus an odd size, a corrupt file, a truncated PNG,
    a TIFF named .png, a text file and a hidden resource fork (both skipped, as a run skips
    them)."""
    counts = {"train": {"amd": 3, "normal": 2}, "val": {"amd": 1, "normal": 1},
              "test": {"amd": 1, "normal": 2}}
    for split, classes in counts.items():
        for name, n in classes.items():
            for k in range(n):
                save(tmp_path / split / name / f"{name}_{k}.png")
    save(tmp_path / "train" / "amd" / "odd.png", size=(10, 8))
    (tmp_path / "train" / "normal" / "broken.png").write_bytes(b"not an image at all")
    noise = Image.effect_noise((8, 8), 60).convert("RGB")   # an IDAT of some size
    noise.save(tmp_path / "test" / "amd" / "whole.png")
    whole = (tmp_path / "test" / "amd" / "whole.png").read_bytes()
    os.remove(tmp_path / "test" / "amd" / "whole.png")
    (tmp_path / "test" / "amd" / "cut.png").write_bytes(whole[:len(whole) - 40])
    save(tmp_path / "val" / "normal" / "scan.png", kind="TIFF")
    (tmp_path / "train" / "amd" / "notes.txt").write_text("not an image")
    save(tmp_path / "train" / "amd" / "._amd_0.png")
    return tmp_path


def test_files_per_class_and_every_bad_image_by_name(oct_layout):
    report = check.check_dataset("images", "oct-c8", str(oct_layout), split_folders=True)
    assert [s.name for s in report.splits] == ["train", "val", "test"]
    assert report.labels == ["amd", "normal"]
    for s in report.splits:
        expected = listed(oct_layout / s.name)
        assert s.labels == expected and s.count == s.labelled == sum(expected.values())
    assert sorted(report.problems) == sorted([
        os.path.join("test", "amd", "cut.png") + ": cannot decode the image (image file is "
        "truncated)",
        os.path.join("train", "normal", "broken.png") + ": cannot decode the image (cannot "
        "identify image file)",
        os.path.join("val", "normal", "scan.png") + ": a TIFF image; a run decodes PNG, JPEG, "
        "BMP, GIF only"])
    assert report.exit_code == 1
    # The odd size is a warning (a run resizes it), not a problem.
    readable = 0
    sizes = collections.Counter()
    for root, _, names in os.walk(oct_layout):
        for n in names:
            if n.endswith(".png") and not n.startswith("."):
                try:
                    with Image.open(os.path.join(root, n)) as image:
                        image.load()
                        if image.format == "PNG":
                            sizes[image.size] += 1
                            readable += 1
                except OSError:
                    pass
    assert report.warnings == [os.path.join("train", "amd", "odd.png") + ": 10x8, not the "
                               "set's common 8x8"]
    assert report.notes == [f"{sizes[(8, 8)]} of {readable} readable images are 8x8 (width x "
                            "height); a run resizes each to --image-size"]
    text = report.format()
    assert "1 warning(s) (a run reads these):" in text and "3 problem(s):" in text
    row = ["amd"]
    for split in ("train", "val", "test"):
        counts = listed(oct_layout / split)
        row += [str(counts["amd"]), f"({counts['amd'] / sum(counts.values()):.1%})"]
    assert row in [line.split() for line in text.splitlines()]


def test_a_class_folder_missing_from_a_split_and_an_empty_one(tmp_path):
    for split in ("train", "val", "test"):
        save(tmp_path / split / "a" / "x.png")
    save(tmp_path / "train" / "b" / "x.png")
    save(tmp_path / "test" / "b" / "x.png")
    (tmp_path / "train" / "c").mkdir()
    report = check.check_dataset("images", "oct-c8", str(tmp_path), split_folders=True)
    assert report.problems == [
        f"{tmp_path / 'train' / 'c'}: class folder has no images (.png, .jpg, .jpeg, .bmp)",
        f"{tmp_path / 'val'}: class folders ['a'] differ from train/'s ['a', 'b', 'c']",
        f"{tmp_path / 'val' / 'b'}: no such class folder",
        f"{tmp_path / 'val' / 'c'}: no such class folder",
        f"{tmp_path / 'test'}: class folders ['a', 'b'] differ from train/'s ['a', 'b', 'c']",
        f"{tmp_path / 'test' / 'c'}: no such class folder"]
    assert [s.labels for s in report.splits] == [{"a": 1, "b": 1, "c": 0},
                                                 {"a": 1, "b": 0, "c": 0},
                                                 {"a": 1, "b": 1, "c": 0}]


def test_class_folders_are_split_7_1_2_with_a_note(tmp_path):
    for name, n in (("polyps", 10), ("esophagitis", 20)):
        for k in range(n):
            save(tmp_path / name / f"{k}.jpg", kind="JPEG")
    report = check.check_dataset("images", "kvasir", str(tmp_path), split_folders=False, seed=3)
    assert report.problems == [] and report.warnings == [] and report.exit_code == 0
    # 7:1:2 of 20 and of 10, class by class.
    assert [(s.name, s.labels) for s in report.splits] == [
        ("train", {"esophagitis": 14, "polyps": 7}), ("val", {"esophagitis": 2, "polyps": 1}),
        ("test", {"esophagitis": 4, "polyps": 2})]
    assert report.notes[0] == ("no split folders: the 30 images split 7:1:2 into train/val/test "
                               "(21/3/6), stratified by class, seeded")


def test_a_file_or_a_missing_folder_is_one_problem(tmp_path):
    save(tmp_path / "x.png")
    report = check.check_dataset("images", "kvasir", str(tmp_path / "x.png"),
                                 split_folders=False)
    assert report.problems == [f"{tmp_path / 'x.png'}: a file; expected a folder"]
    report = check.check_dataset("images", "oct-c8", str(tmp_path / "nope"), split_folders=True)
    assert report.problems == [f"{tmp_path / 'nope'}: no such folder"] and report.splits == []


def test_the_sample():
    root = resources.path("image_sample")
    report = check.check_dataset("images", "oct-c8", root, split_folders=True)
    assert report.problems == [] and report.warnings == [] and report.exit_code == 0
    for s in report.splits:
        expected = listed(os.path.join(root, s.name))
        assert s.labels == expected and s.count == sum(expected.values())
