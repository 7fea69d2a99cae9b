"""Train/dev/test splits: completing what a distribution leaves out, with seeded slices of train.

Published copies often lack a split: BioBERT's GAD and EU-ADR folds ship an empty
``dev.tsv``, GDA has no dev file, a single file has no test. :func:`complete_splits`
fills the gaps the same way for sentence-level examples (pandas DataFrames) and documents
(lists), and says what it did in a note. Both the runs (``tffre.tasks``) and the data
check (:mod:`tffre.data.check`) call it, so they see the same splits.
"""

import os
import re

SPLITS = ("train", "dev", "test")
#: The words in a file's name that name each split (CDR_TestSet, GDA's testing.txt, train.data).
SPLIT_WORDS = {"train": ("train",), "dev": ("dev",), "test": ("test",)}
DEV_FRACTION = 0.2    # FedLCC: GDA's training set "divided ... in a ratio of 8 to 2"; FedED: 20%
TEST_FRACTION = 0.2
# The seeds' second words: each held-out slice draws from RandomState([seed, salt]). They are
# the values the tasks used before this module, so the held-out sets stay the same.
TEST_SALT = 7
DEV_SALT = 13


def splits_named(filename):
    """Every split a file's name names (lower-cased, the word not preceded by a letter), in
    train/dev/test order: EoG's ``train+dev.data`` names two."""
    lower = os.path.basename(os.fspath(filename)).lower()
    return [split for split, words in SPLIT_WORDS.items()
            if any(re.search(rf"(?<![a-z]){word}", lower) for word in words)]


def split_named(filename):
    """The split a file's name names (:func:`splits_named`), or None when it names none or
    several (EoG's ``train+dev.data``)."""
    found = splits_named(filename)
    return found[0] if len(found) == 1 else None


def note_single_file(path, notes):
    """A single file is the whole set in every task, whatever its name (its test split is then
    held out by :func:`complete_splits`); when its name names a dev or test split, appends a
    note to ``notes`` saying how it was read and how to use it as that split instead."""
    named = split_named(path)
    if named in ("dev", "test") and notes is not None:
        notes.append(f"{os.path.basename(os.fspath(path))}: a single file is read as the whole "
                     f"set, although its name says {named!r} (to use it as the {named} split, "
                     f"give the folder that holds it and a train file)")


def take(items, index):
    """The rows ``index`` of a DataFrame (index reset) or the items of a list, in that order."""
    if hasattr(items, "iloc"):
        return items.iloc[index].reset_index(drop=True)
    return [items[i] for i in index]


def holdout(items, fraction, seed, salt):
    """``(kept, held out)``: a seeded ``round(len * fraction)`` of ``items`` held out.

    The held-out positions are the first ones of ``RandomState([seed, salt]).permutation``;
    both parts keep the original order.
    """
    import numpy as np  # here: a check of complete splits needs no numpy (CDR in < 3 s)

    order = np.random.RandomState([seed, salt]).permutation(len(items))
    cut = int(round(len(items) * fraction))
    return take(items, np.sort(order[cut:])), take(items, np.sort(order[:cut]))


def complete_splits(splits, *, seed, dev_fraction=DEV_FRACTION, test_fraction=None, notes=None,
                    what="examples", source=None):
    """``{"train", "dev", "test": ...}``: ``splits`` with a missing test and dev cut out of train.

    ``splits`` maps split names to DataFrames or lists; it must hold a non-empty "train".
    A missing "test" is held out of train when ``test_fraction`` is given (a seeded
    ``test_fraction``, salt :data:`TEST_SALT`), else it is an error. Then a missing "dev"
    is held out of what train is left when ``dev_fraction`` is given (salt
    :data:`DEV_SALT`); with ``dev_fraction=None`` the result has no "dev". Each hold-out
    appends a note to ``notes`` (a list, if given), e.g. "no dev split: held out 959 of
    4796 training examples (20%, seeded) as dev"; ``what`` names the items in it,
    ``source`` (the data's path) the errors. The input is not changed.
    """
    where = f"{source}: " if source else ""
    if not len(splits.get("train", ())):
        raise ValueError(f"{where}no training {what} (a train split)")
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise ValueError(f"{where}unknown split(s) {', '.join(unknown)}; valid: "
                         f"{', '.join(SPLITS)}")
    out = dict(splits)
    for name, fraction, salt in (("test", test_fraction, TEST_SALT), ("dev", dev_fraction,
                                                                       DEV_SALT)):
        if name in out:
            continue
        if fraction is None:
            if name == "test":
                raise ValueError(f"{where}no test split")
            continue
        if not 0 < fraction < 1:
            raise ValueError(f"{name} fraction must be in (0, 1), got {fraction!r}")
        train = out["train"]
        out["train"], out[name] = holdout(train, fraction, seed, salt)
        if not len(out["train"]):
            raise ValueError(f"{where}{len(train)} training {what} are too few to hold out "
                             f"{fraction:.0%} as {name}")
        if notes is not None:
            notes.append(f"no {name} split: held out {len(out[name])} of {len(train)} training "
                         f"{what} ({fraction:.0%}, seeded) as {name}")
    return {name: out[name] for name in SPLITS if name in out}
