"""The data check of IMCS-V2 dialogues (``python -m tffre data check --dataset imcs``).

:func:`check_dialogues` loads the dialogues as a run does
(:func:`tffre.data.imcs_dialogues.load_imcs_splits`: the same files, the same held-out test split of a
single file), but leniently: a bad record is recorded and skipped, so one pass finds every
problem, each naming file, example_id, sentence_id and field. Per split it reports the
dialogues and sentences, the label distribution of ``--task`` (the examples a run makes with
:func:`tffre.data.imcs_dialogues.to_examples`) and their lengths in jieba tokens (the run's segmenter)
with how many a run would cut at ``max_len``.

Besides the loader's problems it reports a dialogue (example_id) found in two split files
and, for ``--task diagnosis``, a diagnosis outside IMCS's ten (a run refuses it). Whatever the
task, it prints the verbatim overlap of each other split's sentences (utterances) with the
training split's (:func:`verbatim_overlap`): a score on sentences a model saw in training
measures memory, not generalisation. No TensorFlow is imported.
"""

import collections
import os

from tffre.data.check_report import CheckReport, SplitSummary, repeats

# What one example of each task is, for the report's first lines.
EXAMPLE_OF = {"symptom": "one example per sentence", "dialogue-act": "one example per sentence",
              "diagnosis": "one example per dialogue (its self-report and every turn)"}


def _shared_dialogues(splits, problems):
    """Problems for dialogues (example_ids) read twice: in two splits, or from two files of
    one split (a key repeated within a file is the loader's problem: JSON keeps one)."""
    for name, d, other, first in repeats(splits, lambda d: d.example_id):
        problems.append(f"{os.path.basename(d.source)}, example_id={d.example_id}: also in "
                        f"{os.path.basename(first.source)}, " + (
                            f"the same ({name}) split" if other == name
                            else f"the {other} split: a dialogue in two splits"))


OVERLAP_TITLE = ("sentences found verbatim in train (the same text; a model may answer "
                 "these from memory)")
OVERLAP_HEAD = ["split", "sentences", "in train", "share", "distinct", "distinct in train"]


def verbatim_overlap(splits):
    """``{split: (sentences, in train, distinct, distinct in train)}`` for each split of
    ``splits`` ({split: [Dialogue]}) but "train": its sentences (turns), how many have the
    very text (the same string, whitespace included) of a training turn, and the same two
    counts over its distinct texts. Empty without a training split."""
    train = {t["sentence"] for d in splits.get("train", ()) for t in d.turns}
    if not train:
        return {}
    out = {}
    for name, dialogues in splits.items():
        if name == "train":
            continue
        texts = [t["sentence"] for d in dialogues for t in d.turns]
        distinct = set(texts)
        out[name] = (len(texts), sum(t in train for t in texts), len(distinct),
                     len(distinct & train))
    return out


def _overlap_table(splits):
    """The report's table of :func:`verbatim_overlap` (none without a training split)."""
    rows = [[name, n, shared, f"{shared / n:.1%}" if n else "-", distinct, distinct_shared]
            for name, (n, shared, distinct, distinct_shared) in verbatim_overlap(splits).items()]
    return [(OVERLAP_TITLE, OVERLAP_HEAD, rows)] if rows else []


def _known_diagnoses(splits, problems):
    """``splits`` without the dialogues whose diagnosis the diagnosis task refuses, each a
    problem (the message :func:`tffre.data.imcs_dialogues.to_examples` raises in a run)."""
    from tffre.data import imcs_dialogues as imcs
    out = {}
    for name, dialogues in splits.items():
        out[name] = []
        for d in dialogues:
            if d.diagnosis in imcs.DIAGNOSES:
                out[name].append(d)
            else:
                problems.append(str(imcs.ImcsFormatError(
                    d.source, f"unknown diagnosis {d.diagnosis!r} (--task diagnosis takes "
                    "IMCS's 10)", d.example_id, field="diagnosis")))
    return out


def check_dialogues(dataset, path, *, task, max_len, segmenter_for, seed=0):
    """Loads what a run of ``task`` would load from ``path`` and returns a
    :class:`tffre.data.check.CheckReport` of it.

    Args:
      dataset: the name in the report ("imcs").
      path: the IMCS file or folder a run's ``--data`` names.
      task: "symptom", "dialogue-act" or "diagnosis" (``--task``).
      max_len: the run's tokens per example; the report counts the examples longer.
      segmenter_for: a function of the loaded splits returning the run's
        :class:`tffre.text.MedicalSegmenter` (``--user-dict``, ``--dict-from-clients``:
        :func:`tffre.tasks.imcs.segmenter_for`); given by the task, as the text layer sits
        above this one.
      seed: the run's seed (which dialogues a single file's held-out test split takes).
    """
    from tffre.data import imcs_dialogues as imcs

    notes, problems, splits = [], [], {}
    try:
        splits = imcs.load_imcs_splits(path, seed=seed, notes=notes, problems=problems)
    except (ValueError, OSError) as e:  # a missing folder, no training dialogues
        problems.append(str(e))
    _shared_dialogues(splits, problems)
    tables = _overlap_table(splits)   # of every dialogue read, before a task leaves any out
    if task == "diagnosis":
        splits = _known_diagnoses(splits, problems)
    # With --dict-from-clients the run adds the training norms: none when unreadable.
    segmenter = segmenter_for({"train": [], **splits})
    names = list(imcs.label_names(task))
    summaries = []
    for name, dialogues in splits.items():
        examples = imcs.to_examples(dialogues, task)
        counts = collections.Counter(examples["label"])
        summaries.append(SplitSummary(
            name, len(dialogues), {label: counts.get(k, 0) for k, label in enumerate(names)},
            {}, {"sentences": sum(len(d.turns) for d in dialogues)},
            [len(tokens) for tokens in segmenter.cut_all(examples["text"])],
            labelled=len(examples)))
    text = "the self-report and the turns" if task == "diagnosis" else "the sentence"
    return CheckReport("dialogues", dataset, str(path), summaries, names, notes, problems,
                       max_len, f"{text}, segmented by the run's jieba", "jieba tokens",
                       about=f"--task {task}: {EXAMPLE_OF[task]}",
                       label_title=f"label (--task {task})", tables=tables)
