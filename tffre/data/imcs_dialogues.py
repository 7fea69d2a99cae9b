"""IMCS-V2 (DialoAMC) loader and its classification tasks.

Reads the corpus exactly as its authors distribute it (GitHub
lemuria-wchen/imcs21 ``dataset/``; CBLUE's ``IMCS-V2_{train,dev,test}.json``):
one JSON object per file, keyed by example_id. A record holds ``diagnosis``,
``self_report`` (also spelled ``self-report``), ``dialogue``, ``report``,
``explicit_info`` and ``implicit_info``; a dialogue turn holds
``sentence_id``, ``speaker`` ("医生"/"患者"), ``sentence``, ``dialogue_act``,
``BIO_label``, ``symptom_norm``, ``symptom_type`` (aligned lists; "0" absent,
"1" present, "2" uncertain) and ``local_implicit_info``.

Tasks (``to_examples(dialogues, task)``):

* ``symptom`` -- sentence level, binary: 1 if the sentence names a symptom the
  patient has (after resolving a norm repeated in the sentence with the
  priority 1 > 0 > 2, any norm is "1"), else 0. A negated symptom ("不咳嗽",
  type "0") and an uncertain one ("2") are therefore 0. (FLCMC section 3.4.3.)
* ``dialogue-act`` -- sentence level, the 16 IMCS dialogue acts (the DAC task).
* ``diagnosis`` -- dialogue level, the 10 diseases; the text is the
  self-report followed by every turn. ``sentence_id`` is empty.

:func:`load_imcs_splits` gives the splits a run trains and scores on (a single training file,
or a folder with a train split only, gets a seeded 20% of its dialogues held out as test,
with a note, as the sentence and document sets do). Given a ``problems`` list, the loaders are lenient (the data
check, :mod:`tffre.data.check_dialogues`): a bad record is recorded and skipped instead of
stopping the load, so one pass finds every problem; without one they raise at the first, and
what they load is the same either way.
"""

import collections
import collections.abc
import dataclasses
import json
import os
from typing import Dict, List

import pandas as pd

from tffre.data.splits import (SPLITS, TEST_FRACTION, complete_splits, note_single_file,
                               split_named)

DIALOGUE_ACTS = (
    "Request-Symptom", "Inform-Symptom", "Request-Etiology", "Inform-Etiology",
    "Request-Basic_Information", "Inform-Basic_Information",
    "Request-Existing_Examination_and_Treatment", "Inform-Existing_Examination_and_Treatment",
    "Request-Drug_Recommendation", "Inform-Drug_Recommendation", "Request-Medical_Advice",
    "Inform-Medical_Advice", "Request-Precautions", "Inform-Precautions", "Diagnose", "Other")
DIAGNOSES = ("小儿支气管炎", "小儿发热", "小儿腹泻", "上呼吸道感染", "小儿消化不良", "小儿感冒",
             "小儿咳嗽", "新生儿黄疸", "小儿便秘", "小儿支气管肺炎")
# English names, for plots (matplotlib has no CJK font on most servers).
DIAGNOSES_EN = ("bronchitis", "fever", "diarrhea", "upper respiratory infection", "dyspepsia",
                "common cold", "cough", "neonatal jaundice", "constipation", "bronchopneumonia")
SPEAKERS = ("医生", "患者")
SYMPTOM_TYPES = ("0", "1", "2")
TASKS = ("symptom", "dialogue-act", "diagnosis")
RECORD_FIELDS = ("diagnosis", "dialogue")
TURN_FIELDS = ("sentence_id", "speaker", "sentence", "dialogue_act", "symptom_norm", "symptom_type")
LABEL_FIELDS = ("diagnosis", "dialogue_act", "symptom_norm", "symptom_type")
EXPECTED = ("expected IMCS records: a JSON object keyed by example_id, each record an object "
            "with a 'dialogue' list of turns and a 'diagnosis'")


class ImcsFormatError(ValueError):
    """Malformed IMCS input; the message names the file, example_id, sentence_id and field."""

    def __init__(self, path, message, example_id=None, sentence_id=None, field=None):
        where = [os.path.basename(path)]
        if example_id is not None:
            where.append(f"example_id={example_id}")
        if sentence_id is not None:
            where.append(f"sentence_id={sentence_id}")
        if field is not None:
            where.append(f"field={field}")
        super().__init__(f"{', '.join(where)}: {message}")
        self.path, self.example_id, self.sentence_id, self.field = path, example_id, sentence_id, field


class UnlabeledSplitError(ImcsFormatError):
    """The file has no labels (IMCS ``test_input.json``) and cannot be used for training."""


@dataclasses.dataclass
class Dialogue:
    """One validated IMCS record."""
    example_id: str
    split: str
    diagnosis: str
    self_report: str
    turns: List[dict]
    source: str


def resolve_symptoms(norms, types):
    """Resolves each norm's status in one sentence; a repeated norm takes 1 > 0 > 2."""
    resolved = {}
    for norm, status in zip(norms, types):
        old = resolved.get(norm)
        resolved[norm] = status if old is None else min(old, status, key="102".index)
    return resolved


def symptom_label(turn):
    """The ``symptom`` task label of a turn: 1 if any resolved symptom status is "1"."""
    return int("1" in resolve_symptoms(turn["symptom_norm"], turn["symptom_type"]).values())


def _split_name(path):
    """The split a file's name names (the one rule of every task,
    :func:`tffre.data.splits.split_named`), else its lower-cased stem (a split no run uses,
    which ``load_imcs_splits`` notes)."""
    return split_named(path) or os.path.splitext(os.path.basename(path))[0].lower()


def _json_kind(value):
    """The JSON name of a decoded value's type, for error messages."""
    for kind, types in (("object", dict), ("array", list), ("string", str), ("boolean", bool),
                        ("number", (int, float))):
        if isinstance(value, types):
            return kind
    return "null"


def _check_record_shape(path, eid, record):
    """Checks that a record is an object with a ``dialogue`` list: the IMCS shape."""
    if not isinstance(record, dict):
        raise ImcsFormatError(path, f"record is a JSON {_json_kind(record)}; {EXPECTED}", eid)
    if "dialogue" not in record:
        raise ImcsFormatError(path, f"missing field; {EXPECTED}", eid, field="dialogue")
    if not isinstance(record["dialogue"], list):
        kind = _json_kind(record["dialogue"])
        raise ImcsFormatError(path, f"dialogue must be a list of turns, got a JSON {kind}; "
                              f"{EXPECTED}", eid, field="dialogue")


def _is_unlabeled(record):
    """True for a record shaped like IMCS test input: sentence turns, no label field anywhere."""
    turns = record["dialogue"]
    return (bool(turns) and "diagnosis" not in record
            and all(isinstance(t, dict) and "sentence" in t for t in turns)
            and not any(f in t for t in turns for f in LABEL_FIELDS))


def _check_labels_present(path, records):
    """Raises UnlabeledSplitError for a file without labels, like IMCS's test_input.json.

    Runs after the shape check, so other JSON is reported as malformed, not as test input.
    """
    with_turns = [(eid, r) for eid, r in records.items() if r["dialogue"]]
    if "test_input" in os.path.basename(path).lower() or (
            with_turns and all(_is_unlabeled(r) for _, r in with_turns)):
        raise UnlabeledSplitError(
            path, "this file has no labels (diagnosis, dialogue_act, symptom_norm, symptom_type); "
            "it is the IMCS unlabeled test input and cannot be used for training or evaluation",
            example_id=(with_turns or list(records.items()))[0][0])


def _turn_problems(path, eid, index, turn):
    """Yields each problem of one turn as an :class:`ImcsFormatError` (the first is the one a
    run raises); a valid turn's symptom types become strings."""
    if not isinstance(turn, dict):
        yield ImcsFormatError(path, f"turn {index} is not an object", eid, field="dialogue")
        return
    sid = turn.get("sentence_id", f"#{index}")
    missing = [field for field in TURN_FIELDS if field not in turn]
    for field in missing:
        yield ImcsFormatError(path, "missing field", eid, sid, field)
    if missing:
        return  # the checks below read those fields
    found = False
    if not isinstance(turn["sentence"], str):
        found = True
        yield ImcsFormatError(path, "sentence must be a string", eid, sid, "sentence")
    if turn["speaker"] not in SPEAKERS:
        found = True
        yield ImcsFormatError(path, f"speaker {turn['speaker']!r} is not one of {SPEAKERS}",
                              eid, sid, "speaker")
    if turn["dialogue_act"] not in DIALOGUE_ACTS:
        found = True
        yield ImcsFormatError(path, f"unknown dialogue act {turn['dialogue_act']!r}",
                              eid, sid, "dialogue_act")
    norms, types = turn["symptom_norm"], turn["symptom_type"]
    if not isinstance(norms, list) or not isinstance(types, list):
        yield ImcsFormatError(path, "symptom_norm and symptom_type must be lists", eid, sid,
                              "symptom_norm" if not isinstance(norms, list) else "symptom_type")
        return
    if len(norms) != len(types):
        found = True
        yield ImcsFormatError(path, f"unaligned symptom lists: {len(norms)} norms but "
                              f"{len(types)} types", eid, sid, "symptom_type")
    for status in types:
        if str(status) not in SYMPTOM_TYPES:
            found = True
            yield ImcsFormatError(path, f"symptom_type {status!r} is not one of 0/1/2",
                                  eid, sid, "symptom_type")
    if not found:
        turn["symptom_type"] = [str(status) for status in types]  # some exports use ints


def _record_problems(path, eid, record):
    """Yields each problem of one record (shaped as IMCS), then of each of its turns, in the
    order a run raises them."""
    for field in RECORD_FIELDS:
        if field not in record:
            yield ImcsFormatError(path, "missing field", eid, field=field)
    report = record.get("self_report", record.get("self-report"))
    if report is None:
        yield ImcsFormatError(path, "missing field (also looked for 'self-report')", eid,
                              field="self_report")
    for field, value in (("diagnosis", record.get("diagnosis", "")), ("self_report",
                                                                      report or "")):
        if not isinstance(value, str):
            yield ImcsFormatError(path, f"{field} must be a string, got a JSON "
                                  f"{_json_kind(value)}", eid, field=field)
    for i, turn in enumerate(record["dialogue"]):
        yield from _turn_problems(path, eid, i, turn)


def _read_records(path, problems):
    """The file's top-level JSON; with ``problems`` (lenient), a key given twice in an object
    is a problem (JSON keeps its last value, the others are lost)."""
    duplicates = []

    def keep_last(pairs):
        obj = dict(pairs)
        if len(obj) < len(pairs):
            counts = collections.Counter(key for key, _ in pairs)
            duplicates.append((obj, {k: n for k, n in counts.items() if n > 1}))
        return obj

    try:
        with open(path, encoding="utf-8") as f:
            # The hook only in lenient mode: a run reads the file exactly as before.
            records = json.load(f, object_pairs_hook=keep_last if problems is not None
                                else None)
    except json.JSONDecodeError as err:
        raise ImcsFormatError(path, f"invalid JSON at line {err.lineno} column {err.colno}: "
                              f"{err.msg}") from err
    if duplicates and isinstance(records, dict):
        # Where each object with a repeated key sits: the top level, a record or a turn.
        where = {id(records): (None, None)}
        for eid, record in records.items():
            where[id(record)] = (eid, None)
            turns = record.get("dialogue") if isinstance(record, dict) else None
            for i, turn in enumerate(turns if isinstance(turns, list) else ()):
                if isinstance(turn, dict):
                    where[id(turn)] = (eid, turn.get("sentence_id", f"#{i}"))
        for obj, repeated in duplicates:
            if id(obj) not in where:
                continue  # deeper (e.g. inside local_implicit_info): not read by a task
            eid, sid = where[id(obj)]
            for key, n in repeated.items():
                if eid is None:
                    problems.append(str(ImcsFormatError(
                        path, f"given {n} times in this file; JSON keeps the last record, "
                        "the others are lost", key)))
                else:
                    problems.append(str(ImcsFormatError(
                        path, f"given {n} times; JSON keeps the last value", eid, sid,
                        key)))
    return records


def load_split_file(path, problems=None):
    """Reads and validates one IMCS split file.

    Args:
      path: the file.
      problems: None (a run): the first problem raises. A list (the data check): each
        problem's message is appended and its record skipped, a file that cannot be read as
        IMCS records is one problem and no dialogues; a key given twice in a JSON object is
        a problem too (JSON keeps the last). The dialogues loaded are the same either way.

    Returns:
      (dialogues, num_skipped): the validated :class:`Dialogue` list, and how
      many records had no turns (skipped).

    Raises:
      ImcsFormatError: invalid JSON, JSON that is not IMCS records, a missing
        field, unaligned symptom lists, a symptom_type outside 0/1/2 (the
        message names file, example_id, sentence_id and field).
      UnlabeledSplitError: a file without labels (``test_input.json``).
    """
    try:
        return _load_split_file(path, problems)
    except ImcsFormatError as err:
        if problems is None:
            raise
        problems.append(str(err))
        return [], 0


def _load_split_file(path, problems):
    records = _read_records(path, problems)
    if not isinstance(records, dict):
        raise ImcsFormatError(path, f"the top level is a JSON {_json_kind(records)}; {EXPECTED}")
    if not records:
        raise ImcsFormatError(path, f"no records; {EXPECTED}")
    shaped = {}
    for eid, record in records.items():
        try:
            _check_record_shape(path, eid, record)
            shaped[eid] = record
        except ImcsFormatError as err:
            if problems is None:
                raise
            problems.append(str(err))
    if not shaped:
        return [], 0
    _check_labels_present(path, shaped)
    split = _split_name(path)
    dialogues, skipped = [], 0
    for eid, record in shaped.items():
        found = False
        for err in _record_problems(path, eid, record):
            if problems is None:
                raise err
            problems.append(str(err))
            found = True
        if found:
            continue
        if not record["dialogue"]:
            skipped += 1
            continue
        report = record.get("self_report", record.get("self-report"))
        dialogues.append(Dialogue(str(eid), split, record["diagnosis"], report,
                                  record["dialogue"], path))
    return dialogues, skipped


def load_imcs(path, verbose=True, *, notes=None, problems=None):
    """Loads one IMCS split file, or every ``*.json`` split file in a folder.

    Args:
      path: a file such as ``IMCS-V2_train.json`` or a folder holding the
        split files (``test_input.json`` in a folder is left out, with a note).
      verbose: print a summary (dialogues per split, skipped empty dialogues).
      notes: a list, or None: what was left out or skipped is appended to it (and not
        printed) instead of printed.
      problems: a list, or None: lenient, see :func:`load_split_file`.

    Returns:
      {split: [Dialogue, ...]}, split names taken from the file names
      ("train", "dev", "test").
    """
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".json"))
        files = [os.path.join(path, n) for n in names if "test_input" not in n.lower()]
        left_out = [n for n in names if "test_input" in n.lower()]
        if not files:
            raise FileNotFoundError(f"{path}: no labeled IMCS split files (*.json)")
    elif os.path.isfile(path):
        files, left_out = [path], []
    else:
        raise FileNotFoundError(f"{path}: no such IMCS file or folder")
    out: Dict[str, List[Dialogue]] = {}
    summary = []
    for file in files:
        dialogues, skipped = load_split_file(file, problems)
        split = _split_name(file)
        out.setdefault(split, []).extend(dialogues)
        name = os.path.basename(file)
        summary.append(f"{name}: {len(dialogues)} dialogues"
                       + (f", {skipped} with no turns skipped" if skipped and notes is None
                          else ""))
        if skipped and notes is not None:
            notes.append(f"{name}: {skipped} dialogue(s) with no turns skipped")
    left_out = [f"{name}: left out (unlabeled IMCS test input)" for name in left_out]
    if notes is not None:
        notes.extend(left_out)
    if verbose:
        for line in summary + ([] if notes is not None else left_out):
            print(line)
    return out


def load_imcs_splits(path, *, seed, notes=None, problems=None, verbose=False):
    """``{"train", ["dev",] "test": [Dialogue]}``: the dialogues a run trains and scores on.

    Loads ``path`` with :func:`load_imcs`. A folder gives the splits its file names say; a
    single file is the whole set, whatever its name (``IMCS-V2_dev.json`` alone: its
    dialogues, with a note that its name says 'dev'), as a single file of a sentence or
    document set is (:func:`tffre.data.splits.note_single_file`). Then, as the sentence and document
    sets do (:func:`tffre.data.splits.complete_splits`): without a test or a dev split, a
    seeded :data:`tffre.data.splits.TEST_FRACTION` of the training dialogues (whole
    dialogues) is held out as test. A dev split without a test split is scored as the test
    set (the labels of IMCS's test input are not public). What was done is appended to
    ``notes``.

    Raises ValueError for data without training dialogues; in lenient mode (``problems`` a
    list) data whose train split could not be read is returned as it is, the problems saying
    why.
    """
    loaded = load_imcs(path, verbose=verbose, notes=notes, problems=problems)
    if os.path.isfile(path):
        # A single file is the whole set, whatever its name, in every task.
        note_single_file(path, notes)
        splits = {"train": [d for group in loaded.values() for d in group]}
    else:
        unused = [s for s in loaded if s not in SPLITS]
        if unused and notes is not None:
            notes.append(f"split(s) {', '.join(unused)} not used: a split file's name holds "
                         f"{', '.join(SPLITS)}")
        splits = {s: loaded[s] for s in SPLITS if loaded.get(s)}
    if problems and not splits.get("train"):
        return splits
    if "test" not in splits and "dev" in splits:
        if not splits.get("train"):
            raise ValueError(f"{path}: no training dialogues (a file named *train*.json)")
        if notes is not None:
            notes.append("no test split: the dev split is scored as the test set")
        return splits
    completed = complete_splits(splits, seed=seed, dev_fraction=None,
                                test_fraction=TEST_FRACTION, notes=notes, what="dialogues",
                                source=path)
    # Each dialogue names its split (to_examples' split column): a held-out one, test.
    return {name: [d if d.split == name else dataclasses.replace(d, split=name)
                   for d in group] for name, group in completed.items()}


def _dialogue_list(dialogues):
    """Flattens ``dialogues`` (a list of Dialogue, or load_imcs's {split: [Dialogue]})."""
    usage = "pass a list of Dialogue or the {split: [Dialogue]} mapping returned by load_imcs"
    if isinstance(dialogues, collections.abc.Mapping):
        items = []
        for split, group in dialogues.items():
            if not isinstance(group, (list, tuple)):
                raise TypeError(f"to_examples got split {split!r} as a {type(group).__name__}; "
                                f"{usage}")
            items.extend(group)
    elif isinstance(dialogues, (str, bytes, Dialogue)) or not isinstance(
            dialogues, collections.abc.Iterable):
        raise TypeError(f"to_examples got a {type(dialogues).__name__}; {usage}")
    else:
        items = list(dialogues)
    bad = next((d for d in items if not isinstance(d, Dialogue)), None)
    if bad is not None:
        raise TypeError(f"to_examples got a {type(bad).__name__} where a Dialogue was expected; "
                        f"{usage}")
    return items


def to_examples(dialogues, task):
    """A task's examples as a DataFrame: example_id, split, sentence_id, speaker, text, label.

    Args:
      dialogues: a list of :class:`Dialogue`, or the {split: [Dialogue]}
        mapping from :func:`load_imcs` (its splits in order).
      task: "symptom", "dialogue-act" or "diagnosis" (see the module docstring).

    Returns:
      A pandas DataFrame; ``split`` is each Dialogue's split. Labels are ints:
      0/1 (symptom), the index in :data:`DIALOGUE_ACTS` (dialogue-act) or in
      :data:`DIAGNOSES` (diagnosis).

    Raises:
      TypeError: ``dialogues`` is neither of the above.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {', '.join(TASKS)}")
    rows = []
    for d in _dialogue_list(dialogues):
        if task == "diagnosis":
            if d.diagnosis not in DIAGNOSES:
                raise ImcsFormatError(d.source, f"unknown diagnosis {d.diagnosis!r}",
                                      d.example_id, field="diagnosis")
            text = "。".join([d.self_report] + [t["sentence"] for t in d.turns])
            rows.append((d.example_id, d.split, "", "", text, DIAGNOSES.index(d.diagnosis)))
            continue
        for t in d.turns:
            label = symptom_label(t) if task == "symptom" else DIALOGUE_ACTS.index(t["dialogue_act"])
            rows.append((d.example_id, d.split, str(t["sentence_id"]), t["speaker"], t["sentence"],
                         label))
    return pd.DataFrame(rows, columns=["example_id", "split", "sentence_id", "speaker", "text",
                                       "label"])


def num_classes(task):
    """Number of label classes of ``task``."""
    return {"symptom": 2, "dialogue-act": len(DIALOGUE_ACTS), "diagnosis": len(DIAGNOSES)}[task]


def label_names(task, english=False):
    """Human-readable label names of ``task``, index-aligned with the labels."""
    return {"symptom": ("no present symptom", "present symptom"),
            "dialogue-act": DIALOGUE_ACTS,
            "diagnosis": DIAGNOSES_EN if english else DIAGNOSES}[task]


def symptom_norms(dialogues):
    """The set of symptom norms annotated in ``dialogues`` (for the jieba dictionary)."""
    return {n for d in dialogues for t in d.turns for n in t["symptom_norm"]}
