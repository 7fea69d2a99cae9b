"""The data check of an image set (``python -m tffre data check --dataset oct-c8|kvasir``).

:func:`check_images` lists the files a run would read, per split and class, with the function
the run's loaders list them with (:func:`tffre.data.image_sets.list_image_splits`: OCT-C8's
train/val/test folders, or Kvasir-v2's class folders split 7:1:2, seeded and stratified),
leniently: a missing or empty class folder is recorded and the listing goes on. Then it opens
every image with Pillow (not TensorFlow, which a check need not import): an image that cannot
be decoded, or that is in a format a run's ``tf.io.decode_image`` does not read, is a
problem naming its file. An image whose size differs from the set's most common size is a
warning naming its file: a run resizes every image to ``--image-size``, and the published
sets mix a few sizes, but in a set of one size a stray image is worth a look.
"""

import collections
import os
import warnings as warnings_lib

from tffre.data.check_report import CheckReport, SplitSummary

# What tf.io.decode_image (the run's decoder) reads, as Pillow names the formats.
DECODED_FORMATS = ("PNG", "JPEG", "BMP", "GIF")


def image_size(path):
    """``(width, height)`` of an image file, decoded in full (a truncated file fails).

    Raises ValueError with a one-line reason for a file that cannot be decoded, or whose
    format a run cannot decode."""
    from PIL import Image
    try:
        with warnings_lib.catch_warnings():
            # A very large image (Pillow's decompression-bomb warning) is still an image.
            warnings_lib.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                size, kind = image.size, image.format
                if kind == "JPEG":
                    # Decoded at 1/8 scale: every byte is still read, the IDCT is cheaper.
                    image.draft(image.mode, (max(1, size[0] // 8), max(1, size[1] // 8)))
                image.load()
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        reason = reason.replace(f" {str(path)!r}", "")  # the caller names the file
        raise ValueError(f"cannot decode the image ({reason})") from None
    if kind not in DECODED_FORMATS:
        raise ValueError(f"a {kind} image; a run decodes {', '.join(DECODED_FORMATS)} only")
    return size


def check_images(dataset, path, *, split_folders, seed=0):
    """Lists and opens what a run would read from ``path`` and returns a
    :class:`tffre.data.check.CheckReport` of it.

    Args:
      dataset: the name in the report ("oct-c8", "kvasir").
      path: the folder a run's ``--data`` names.
      split_folders: True: ``path/{train,val,test}/<class>/`` (OCT-C8); False:
        ``path/<class>/``, split 7:1:2 with ``seed`` (Kvasir-v2).
      seed: the run's seed.

    Files are named relative to ``path`` in the problems and warnings.
    """
    from tffre.data.image_sets import list_image_splits

    notes, problems, warnings, splits, classes = [], [], [], {}, []
    try:
        splits, classes = list_image_splits(path, split_folders=split_folders, seed=seed,
                                            notes=notes, problems=problems)
    except (ValueError, OSError) as e:  # no such folder, no class or split folders
        problems.append(str(e))
    sizes = {}
    for files, _ in splits.values():
        for file in files:
            name = os.path.relpath(file, path)
            try:
                sizes[name] = image_size(file)
            except ValueError as err:
                problems.append(f"{name}: {err}")
    if sizes:
        common, count = collections.Counter(sizes.values()).most_common(1)[0]
        odd = [(name, size) for name, size in sizes.items() if size != common]
        notes.append(f"{'all' if not odd else f'{count} of'} {len(sizes)} readable images are "
                     f"{common[0]}x{common[1]} (width x height); a run resizes each to "
                     "--image-size")
        warnings += [f"{name}: {w}x{h}, not the set's common {common[0]}x{common[1]}"
                     for name, (w, h) in odd]
    summaries = []
    for split, (files, y) in splits.items():
        counts = collections.Counter(int(label) for label in y)
        summaries.append(SplitSummary(split, len(files),
                                      {c: counts.get(k, 0) for k, c in enumerate(classes)}, {},
                                      labelled=len(files)))
    return CheckReport("images", dataset, str(path), summaries, list(classes), notes, problems,
                       warnings=warnings)
