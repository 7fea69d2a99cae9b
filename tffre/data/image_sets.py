"""Image-classification datasets distributed as one sub-folder per class (OCT-C8, Kvasir-v2).

FedCB evaluates on two such datasets (the paper's "Dataset" paragraph):

* OCT-C8 (retinal OCT, 8 classes, 24,000 images) with its official
  18,400 / 2,800 / 2,800 train / val / test split, distributed on Kaggle as
  ``train/``, ``val/``, ``test/`` folders that each hold one folder per class:
  :func:`load_oct_c8`.
* Kvasir-v2 (endoscopy, 8 classes, 8,000 images), one folder per class and no
  split; the paper splits it at random 7:1:2, here stratified and seeded:
  :func:`load_kvasir`, :func:`split_stratified`.

:func:`load_image_folder` reads one such folder into memory as float32 arrays in
[0, 1]. Class names are the sorted sub-folder names (labels 0..C-1 in that order)
unless given, so the same folder always gives the same labels. Files are read in
sorted order; PNG, JPEG and BMP are decoded (grayscale and RGBA become RGB) and
resized; other files, and names starting with "." (e.g. macOS ``._x.jpg``
resource forks found in some archives), are skipped.

Memory: everything is decoded up front, 4 * H * W * 3 bytes an image, e.g. 0.6 MB
at 224x224 (11 GB for OCT-C8's 18,400 training images).

Bad input raises :class:`ImageFolderError` (a ``ValueError``) with a one-line message
that names the file or folder at fault; a missing folder raises
:class:`ImageFolderNotFoundError`, which is also a ``FileNotFoundError``.

:func:`list_image_splits` lists the files of each split and their labels without reading
them, as both loaders do before decoding; given a ``problems`` list it is lenient (the
data check, :mod:`tffre.data.check_images`). TensorFlow is imported at the first decode,
so listing (and the data check) needs none.
"""

import os

import numpy as np

from tffre.errors import MessageFileNotFoundError, one_line
# At the first decode: the data check lists the same files without TensorFlow.
from tffre.lazy import tf

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp")
SPLITS = ("train", "val", "test")  # OCT-C8's split folders, and the keys of the returned dicts
KVASIR_FRACTIONS = (0.7, 0.1, 0.2)  # the paper's random 7:1:2 split of Kvasir-v2


class ImageFolderError(ValueError):
    """Malformed image-folder input. The message is one line naming the file or folder."""


class ImageFolderNotFoundError(ImageFolderError, MessageFileNotFoundError):
    """A folder an image loader needs does not exist; the message names the path."""


def _require_dir(path, what="folder"):
    if os.path.isfile(path):
        # A file where a folder is expected (a single image or archive as --data).
        raise ImageFolderNotFoundError(one_line(f"{path}: a file; expected a {what}"))
    if not os.path.isdir(path):
        raise ImageFolderNotFoundError(one_line(f"{path}: no such {what}"))


def _visible(names):
    return sorted(n for n in names if not n.startswith("."))


def _class_folders(root):
    """The sorted, non-hidden sub-folder names of ``root``."""
    return [n for n in _visible(os.listdir(root)) if os.path.isdir(os.path.join(root, n))]


def _image_files(folder):
    """The sorted image file paths directly in ``folder``; other files are skipped."""
    return [os.path.join(folder, n) for n in _visible(os.listdir(folder))
            if n.lower().endswith(IMAGE_EXTENSIONS) and os.path.isfile(os.path.join(folder, n))]


def _check_size(image_size):
    try:
        height, width = (int(d) for d in image_size)
    except (TypeError, ValueError):
        raise ValueError(f"image_size must be (height, width), got {image_size!r}") from None
    if height < 1 or width < 1:
        raise ValueError(f"image_size must be positive, got {image_size!r}")
    return height, width


def _decode(path, size):
    """One image file as float32 [H, W, 3] in [0, 1], resized to ``size``."""
    with open(path, "rb") as f:
        data = f.read()
    try:
        # channels=3 turns grayscale into RGB and drops alpha; expand_animations=False
        # keeps a (mis-named) GIF to its first frame, 3-D like the others.
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
    except tf.errors.OpError as e:
        reason = e.message.strip().splitlines()[0] if e.message.strip() else type(e).__name__
        raise ImageFolderError(one_line(f"{path}: cannot decode the image ({reason})")) from None
    # decode_image gives uint8 (16-bit PNGs scaled down); this divides by 255.
    image = tf.image.convert_image_dtype(image, tf.float32)
    if tuple(image.shape[:2]) != size:
        # Antialiased when shrinking (Kvasir's images are up to 1920 wide), as PIL's resize.
        image = tf.clip_by_value(tf.image.resize(image, size, antialias=True), 0.0, 1.0)
    return image.numpy()


def load_image_folder(root, image_size=(224, 224), class_names=None):
    """Reads a one-sub-folder-per-class image dataset into memory.

    Args:
      root: folder whose sub-folders are the classes, each holding its images.
      image_size: ``(height, width)`` every image is resized to (bilinear, antialiased).
      class_names: the classes (sub-folder names) in label order; default the sorted
        sub-folder names. When given, only those sub-folders are read, which keeps the
        labels of the val/test folders the same as the training folder's.

    Returns:
      ``(x, y, class_names)``: x float32 [n, H, W, 3] in [0, 1], y int32 [n] (index
      into class_names), class_names a list of str. Images are in class order, then
      file-name order.

    Raises:
      ImageFolderNotFoundError: ``root`` or a given class folder does not exist.
      ImageFolderError: ``root`` has no class sub-folders, a class folder has no
        images, or an image cannot be decoded; the message names the folder or file.
    """
    size = _check_size(image_size)
    files, y, class_names = _list_image_folder(root, class_names)
    return _read_images(files, size), y, class_names


def _list_image_folder(root, class_names=None, problems=None):
    """``(files, y, class_names)`` of a class-per-folder dataset, without reading the images.

    With ``problems`` (a list), a missing or empty class folder is appended to it and has
    no files, instead of raising."""
    root = os.fspath(root)
    _require_dir(root)
    if class_names is None:
        class_names = _class_folders(root)
        if not class_names:
            raise ImageFolderError(one_line(
                f"{root}: no class sub-folders (expected one folder of images per class)"))
    else:
        class_names = [str(c) for c in class_names]
        if not class_names:
            raise ValueError("class_names is empty")
        if len(set(class_names)) != len(class_names):
            raise ValueError(f"class_names has duplicates: {class_names}")
    files, labels = [], []
    for label, name in enumerate(class_names):
        folder = os.path.join(root, name)
        try:
            _require_dir(folder, "class folder")
            found = _image_files(folder)
            if not found:
                raise ImageFolderError(one_line(
                    f"{folder}: class folder has no images ({', '.join(IMAGE_EXTENSIONS)})"))
        except ImageFolderError as err:
            if problems is None:
                raise
            problems.append(str(err))
            continue
        files += found
        labels += [label] * len(found)
    return files, np.asarray(labels, np.int32), list(class_names)


def _read_images(files, size):
    """The decoded images of ``files`` as float32 [n, H, W, 3]."""
    # Filled in place: stacking a list of images would need twice the memory.
    x = np.empty((len(files), size[0], size[1], 3), np.float32)
    for i, path in enumerate(files):
        x[i] = _decode(path, size)
    return x


def split_stratified(y, fractions=(0.7, 0.1, 0.2), seed=0):
    """Index arrays splitting ``y`` into parts of the given fractions, class by class.

    Every class is shuffled (``numpy.random.default_rng(seed)``, classes in ascending
    order) and cut in the given proportions, so each part has the classes in the same
    ratio as the whole; the sizes are rounded by largest remainder so that they add up
    to the class size. The same ``y`` and seed always give the same split.

    Args:
      y: integer labels [n].
      fractions: non-negative, summing to 1; one index array is returned per entry.
      seed: the shuffling seed.

    Returns:
      A tuple of int64 index arrays into ``y``, one per fraction, each sorted ascending;
      together they hold every index exactly once.
    """
    y = np.asarray(y)
    if y.ndim != 1 or (y.size and not np.issubdtype(y.dtype, np.integer)):
        raise ValueError(f"y must be a 1-D integer array, got dtype {y.dtype} shape {y.shape}")
    fractions = np.asarray(fractions, np.float64)
    if fractions.ndim != 1 or not fractions.size or (fractions < 0).any() \
            or abs(fractions.sum() - 1.0) > 1e-6:
        raise ValueError(f"fractions must be non-negative and sum to 1, got {fractions.tolist()}")
    rng = np.random.default_rng(seed)
    parts = [[] for _ in fractions]
    for label in np.unique(y):
        members = rng.permutation(np.flatnonzero(y == label))
        exact = fractions * len(members)
        counts = np.floor(exact).astype(np.int64)
        # Largest remainder; a stable sort gives ties to the earlier part.
        for k in np.argsort(-(exact - counts), kind="stable")[:len(members) - counts.sum()]:
            counts[k] += 1
        for part, chunk in zip(parts, np.split(members, np.cumsum(counts)[:-1])):
            part.append(chunk)
    return tuple(np.sort(np.concatenate(p)).astype(np.int64) if p else np.zeros(0, np.int64)
                 for p in parts)


def load_oct_c8(root, image_size=(224, 224)):
    """OCT-C8 with its official split, from the Kaggle layout ``root/{train,val,test}/<class>/``.

    The class names (labels) come from ``train/``; ``val/`` and ``test/`` must have the
    same class folders.

    Args:
      root: the folder holding ``train/``, ``val/`` and ``test/``.
      image_size: ``(height, width)``.

    Returns:
      ``({"train": (x, y), "val": (x, y), "test": (x, y)}, class_names)``, arrays as
      :func:`load_image_folder`'s.
    """
    size = _check_size(image_size)
    files, class_names = list_image_splits(root, split_folders=True)
    return {split: (_read_images(f, size), y) for split, (f, y) in files.items()}, class_names


def list_image_splits(root, *, split_folders, seed=0, notes=None, problems=None):
    """``({"train", "val", "test": (files, y)}, class_names)``: each split's image files and
    labels, listed (not read) as :func:`load_oct_c8` and :func:`load_kvasir` read them.

    Args:
      root: the dataset's folder.
      split_folders: True: ``root/{train,val,test}/<class>/`` (OCT-C8's official split;
        the classes are train/'s and every split must have the same). False:
        ``root/<class>/`` split 7:1:2 by :func:`split_stratified` with ``seed`` (Kvasir-v2),
        with a note in ``notes`` saying so.
      notes: a list, or None.
      problems: None: the first problem raises. A list (the data check): a class folder
        that is missing, empty or not in every split is appended to it and the listing
        goes on; a missing ``root`` or split folder still raises.
    """
    root = os.fspath(root)
    _require_dir(root)
    if not split_folders:
        files, y, class_names = _list_image_folder(root, problems=problems)
        parts = split_stratified(y, KVASIR_FRACTIONS, seed)
        if notes is not None:
            notes.append(f"no split folders: the {len(y)} images split "
                         f"{':'.join(str(round(10 * f)) for f in KVASIR_FRACTIONS)} into "
                         f"{'/'.join(SPLITS)} ({'/'.join(str(len(p)) for p in parts)}), "
                         "stratified by class, seeded")
        # Split the file list: the loader then decodes each part (indexing decoded arrays
        # would copy them).
        return {split: ([files[i] for i in idx], y[idx])
                for split, idx in zip(SPLITS, parts)}, class_names
    missing = [s for s in SPLITS if not os.path.isdir(os.path.join(root, s))]
    if missing:
        raise ImageFolderNotFoundError(one_line(
            f"{root}: expected the OCT-C8 split folders train/, val/, test/ (each with one "
            f"folder per class); missing: {', '.join(s + '/' for s in missing)}"))
    # Every folder is listed and checked before any image is decoded, so a bad layout
    # fails at once rather than after minutes of decoding.
    out, class_names = {}, None
    for split in SPLITS:
        folder = os.path.join(root, split)
        if class_names is not None and _class_folders(folder) != class_names:
            err = ImageFolderError(one_line(
                f"{folder}: class folders {_class_folders(folder)} differ from train/'s "
                f"{class_names}"))
            if problems is None:
                raise err
            problems.append(str(err))
        files, y, class_names = _list_image_folder(folder, class_names, problems)
        out[split] = (files, y)
    return out, class_names


def load_kvasir(root, image_size=(224, 224), seed=0):
    """Kvasir-v2 (``root/<class>/*.jpg``, 8 classes) split 7:1:2 train/val/test, stratified.

    The paper partitions Kvasir-v2 at random 7:1:2; here the split is stratified
    (every class 70/10/20) and seeded, so runs with the same seed see the same split.

    Args:
      root: the folder holding the class folders (``dyed-lifted-polyps``, ...).
      image_size: ``(height, width)``.
      seed: the split's seed, see :func:`split_stratified`.

    Returns:
      ``({"train": (x, y), "val": (x, y), "test": (x, y)}, class_names)``.
    """
    size = _check_size(image_size)
    files, class_names = list_image_splits(root, split_folders=False, seed=seed)
    return {split: (_read_images(f, size), y) for split, (f, y) in files.items()}, class_names
