"""Relation-extraction scores and the communication tables of the RE papers.

No TensorFlow here: the functions take plain label sequences (strings or
ints) and return Python floats or pandas DataFrames, so they can score
predictions written to disk by any model.

Scores (FedED, Sui et al. 2020, Section 4.1; FedCMC Section 4.1):

* Multi-class sets (2010 i2b2/VA, ChemProt/CPR) report micro-averaged F1 over
  the *positive* relation classes: the negative class ("None", "false") is
  not a relation, so predicting it is neither a predicted positive nor a hit.
  With ``P`` the set of positive labels::

      TP = #{i : pred_i == true_i and pred_i in P}
      precision = TP / #{i : pred_i in P}
      recall    = TP / #{i : true_i in P}
      F1        = 2 TP / (#{pred in P} + #{true in P})   (= 2 p r / (p + r))

  This is ``sklearn.metrics.precision_recall_fscore_support(average="micro",
  labels=<all labels but the negative one>)``, which :func:`relation_f1` calls.
* Binary sets (GAD, EU-ADR, PGR) report the F1 of the positive class, which
  is the same computation with ``P = {positive label}``.

* Document-level RE (CDR, GDA, CHR, DocRED; FedLCC, after ATLOP):
  :func:`docre_scores` counts the predicted (pair, relation) facts over the
  valid candidate pairs, micro over the relation types, with the intra- and
  inter-sentence split of CDR/GDA and DocRED's Ign F1.

Zero denominators give 0.0 (sklearn's ``zero_division=0``), never NaN.
:func:`relation_f1`, :func:`macro_f1` and :func:`per_class_table` are thin
wrappers over scikit-learn's ``precision_recall_fscore_support``; what they add
is the papers' conventions (the negative label left out of the micro scores,
the gold-positive support, the table's row order and micro row) and labels
compared as given (sklearn refuses a mix of string and number labels, so they
go to it as integer codes).

Tables: :func:`per_class_table` is FedED Table 6 (class-wise scores),
:func:`rounds_to_target` is FedED Table 8 / Fig. 2 (rounds to reach an F1),
:func:`communication_table` is FedED Table 7 (bytes uploaded per client and
round).
"""

import collections
import math
from collections.abc import Mapping

import numpy as np
import pandas as pd
from sklearn.metrics import precision_recall_fscore_support

MICRO_ROW = "micro (positive classes)"

# Decimal units, as the papers print sizes (FedED Table 7: "423MB", "42KB", "323B").
_UNITS = ("B", "KB", "MB", "GB", "TB")


def _pair(y_true, y_pred):
    y_true, y_pred = list(y_true), list(y_pred)
    for name, values in (("y_true", y_true), ("y_pred", y_pred)):
        for i, item in enumerate(values):
            if isinstance(item, (list, tuple, np.ndarray)):
                raise ValueError(f"{name} must be a 1-D sequence of labels, got {item!r} at {i}")
    if len(y_true) != len(y_pred):
        raise ValueError(f"y_true has {len(y_true)} labels, y_pred {len(y_pred)}")
    return y_true, y_pred


def _encoded(y_true, y_pred, labels):
    """``y_true``, ``y_pred`` and ``labels`` as integer codes, one per distinct label.

    sklearn refuses a mix of string and number labels, and sorts the labels it
    sees; the codes let it compare labels as given (``1 != "1"``) in any mix.
    """
    codes = {}

    def encode(values):
        return np.array([codes.setdefault(v, len(codes)) for v in values], dtype=np.int64)

    labels = encode(labels)
    return encode(y_true), encode(y_pred), labels


def _micro(true, pred, positive):
    """relation_f1's dict for integer codes: sklearn's micro P/R/F1 over ``positive``."""
    p, r, f, _ = precision_recall_fscore_support(true, pred, labels=positive, average="micro",
                                                 zero_division=0)
    return {"precision": float(p), "recall": float(r), "f1": float(f),
            "support": int(np.isin(true, positive).sum())}


def _ratio(num, den):
    return float(num) / float(den) if den else 0.0


def _scores(hits, predicted, actual):
    return {"precision": _ratio(hits, predicted), "recall": _ratio(hits, actual),
            # 2TP / (2TP + FP + FN), which is 2pr / (p + r) when both are non-zero.
            "f1": _ratio(2 * hits, predicted + actual), "support": int(actual)}


def relation_f1(y_true, y_pred, negative_label, labels=None):
    """Micro precision, recall and F1 over the positive (non-negative) relation classes.

    The standard score of the RE papers: micro-F1 for multi-class sets
    (i2b2, ChemProt), the positive-class F1 for binary sets (GAD, EU-ADR,
    PGR; pass ``labels=["0", "1"], negative_label="0"``). Both are the same
    computation, see the module docstring: sklearn's
    ``precision_recall_fscore_support(average="micro", zero_division=0)`` over
    the positive labels.

    Args:
      y_true: gold labels (strings or ints, compared as given: ``1 != "1"``).
      y_pred: predicted labels, same length.
      negative_label: the "no relation" label; predicting it never counts as
        a predicted positive, and gold examples with it are not in recall's
        denominator. It need not occur in the data.
      labels: the label set. Defaults to every label seen in ``y_true`` or
        ``y_pred``. As in sklearn, a label outside ``labels`` counts like
        the negative class (neither a predicted nor a gold positive).

    Returns:
      ``{"precision", "recall", "f1"}`` as Python floats (0.0 where a
      denominator is zero) and ``"support"``: the number of gold positives.
    """
    y_true, y_pred = _pair(y_true, y_pred)
    if labels is None:
        labels = y_true + y_pred
    true, pred, codes = _encoded(y_true, y_pred,
                                 [label for label in labels if label != negative_label])
    return _micro(true, pred, np.unique(codes))


def trivial_baselines(y_train, y_test, num_labels, negative_label=None):
    """What guessing scores on the test set, to read a model's figures beside: the training
    majority class's accuracy; with a ``negative_label`` (relation sets) also its relation F1,
    and for a binary set the all-positive guess's F1 (2p / (1 + p) for a positive share p;
    GAD's is about 0.69)."""
    y_train, y_test = np.asarray(y_train), np.asarray(y_test)
    majority = int(np.bincount(y_train, minlength=num_labels).argmax())
    out = {"majority_class_test_accuracy": float(np.mean(y_test == majority))}
    if negative_label is not None:
        out["majority_class_test_f1"] = relation_f1(
            y_test, np.full_like(y_test, majority), negative_label=negative_label)["f1"]
        if num_labels == 2:
            out["all_positive_test_f1"] = relation_f1(
                y_test, np.full_like(y_test, 1 - negative_label),
                negative_label=negative_label)["f1"]
    return out


def lookup_baselines(train_texts, y_train, splits, num_labels):
    """What remembering the training set scores: ``{"lookup_<split>_accuracy": accuracy}``
    for each ``split`` of ``splits`` (``{name: (texts, labels)}``).

    Each text is looked up among ``train_texts``: a text found there (the same string,
    verbatim) gets the training label it carries; a text the training set holds with
    several labels gets the most common of them, a tie going to the smaller label id; a
    text not found gets the training majority class (the smaller id on a tie, as in
    :func:`trivial_baselines`). A model that only memorised its training sentences scores
    this, so a score near it says nothing about generalisation."""
    y_train = np.asarray(y_train)
    if len(train_texts) != len(y_train):
        raise ValueError(f"{len(train_texts)} training texts but {len(y_train)} labels")
    majority = int(np.bincount(y_train, minlength=num_labels).argmax())
    counts = collections.defaultdict(lambda: np.zeros(num_labels, dtype=np.int64))
    for text, label in zip(train_texts, y_train):
        counts[text][int(label)] += 1
    # argmax takes the first maximum: the smaller label id on a tie.
    known = {text: int(c.argmax()) for text, c in counts.items()}
    out = {}
    for name, (texts, labels) in splits.items():
        labels = np.asarray(labels)
        guess = np.array([known.get(text, majority) for text in texts], dtype=np.int64)
        out[f"lookup_{name}_accuracy"] = float(np.mean(guess == labels)) if len(labels) else None
    return out


def docre_baselines(gold, pair_mask):
    """What guessing scores on document-level RE's test pairs (``gold`` ``[n, P, R]``,
    ``pair_mask`` ``[n, P]``): the majority guess, no relation for any pair (F1 0), and with
    one relation type (CDR, GDA: binary) the all-positive guess, that relation for every
    candidate pair (F1 2p / (1 + p) for a positive share p of the pairs)."""
    gold = np.asarray(gold)
    out = {"majority_class_test_f1": 0.0}
    if gold.shape[-1] == 1:
        out["all_positive_test_f1"] = docre_scores(gold, np.ones_like(gold), pair_mask)["f1"]
    return out


def docre_scores(gold, pred, pair_mask, intra=None, in_train=None):
    """Precision, recall and F1 of the positive relations of document-level RE.

    Every (valid pair, relation type) is one decision: a hit when predicted
    and gold, so the scores are micro over the relation types ("no relation"
    is not a type), as ATLOP's and DocRED's evaluations count facts.

    Args:
      gold, pred: ``[n, P, R]`` 0/1 arrays (the featurizer's multi-hot labels and
        :func:`tffre.models.document_model.predict_relations`).
      pair_mask: ``[n, P]``, 1 on the real candidate pairs (padding is ignored).
      intra: optional ``[n, P]``, 1 where the pair's two entities share a sentence
        (the featurizer's ``pair_intra``): adds ``intra_f1`` (those pairs only) and
        ``inter_f1`` (the others), the split CDR and GDA results are reported by.
      in_train: optional ``[n, P, R]``, 1 where the fact is among the training set's
        (:func:`tffre.data.formats.docred.fact_keys`): adds DocRED's ``ign_f1``, whose precision
        leaves out correct facts seen in training, ``(TP - TP_train) / (#pred - TP_train)``,
        with the ordinary recall (DocRED's ``evaluation.py``).

    Returns:
      ``{"precision", "recall", "f1", "support", "accuracy"}`` (accuracy: the valid pairs
      whose whole prediction vector is right) and the optional keys, as Python floats
      (0.0 for a zero denominator).
    """
    counts = docre_counts(gold, pred, pair_mask, intra=intra, in_train=in_train)
    return {"support": counts["tp"] + counts["fn"], **docre_columns(counts)}


#: The scores :func:`docre_columns` gives, in metrics.csv's order.
DOCRE_SCORES = ("accuracy", "f1", "precision", "recall", "intra_f1", "inter_f1", "ign_f1")


def docre_counts(gold, pred, pair_mask, intra=None, in_train=None):
    """The additive counts document-level RE is scored from: {name: int}.

    Every (valid pair, relation type) is one decision (micro over the relation types, as
    :func:`docre_scores`): ``tp`` predicted and gold, ``fp`` predicted only,
    ``fn`` gold only; ``pairs`` the valid pairs and ``exact`` those whose whole prediction
    vector is right. With ``intra`` ([n, P], 1 where the pair's entities share a sentence)
    the same three counts over the intra-sentence pairs (``tp_intra``...) and the others
    (``tp_inter``...); with ``in_train`` ([n, P, R], DocRED's training facts) ``tp_seen``,
    the true positives seen in training (Ign F1).

    Counts of disjoint sets of documents add up to the counts of their union, so a
    deployment's sites each send theirs and the server scores the sums
    (:func:`docre_columns`) as this module scores the pooled split.
    """
    gold = np.asarray(gold).astype(bool)
    pred = np.asarray(pred).astype(bool)
    valid = np.asarray(pair_mask).astype(bool)
    if gold.shape != pred.shape or gold.shape[:-1] != valid.shape:
        raise ValueError(f"gold {gold.shape}, pred {pred.shape} and pair_mask {valid.shape} "
                         f"do not match ([n, P, R], [n, P, R], [n, P])")

    def confusion(where, suffix=""):
        w = where[..., None]
        return {f"tp{suffix}": int(np.sum(gold & pred & w)),
                f"fp{suffix}": int(np.sum(~gold & pred & w)),
                f"fn{suffix}": int(np.sum(gold & ~pred & w))}

    out = {"pairs": int(np.sum(valid)),
           "exact": int(np.sum(np.all(gold == pred, axis=-1) & valid)), **confusion(valid)}
    if intra is not None:
        intra = np.asarray(intra).astype(bool)
        out.update(confusion(valid & intra, "_intra"))
        out.update(confusion(valid & ~intra, "_inter"))
    if in_train is not None:
        seen = np.asarray(in_train).astype(bool)
        out["tp_seen"] = int(np.sum(gold & pred & valid[..., None] & seen))
    return out


def docre_columns(counts):
    """{score: float} of (summed) :func:`docre_counts`: ``accuracy``, ``precision``,
    ``recall``, ``f1`` and, where counted, ``intra_f1``/``inter_f1`` and ``ign_f1``; 0.0 for a
    zero denominator, as :func:`docre_scores` on the pooled arrays.

    P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2TP / (2TP + FP + FN) (FedLCC Sect. 5.1's
    micro P/R/F1 over the relation facts); Ign F1 (DocRED) takes the precision without the
    facts seen in training, (TP - TP_seen) / (TP + FP - TP_seen), with the same recall."""
    c = {k: int(v) for k, v in counts.items()}

    def scores(suffix=""):
        tp = c[f"tp{suffix}"]
        return _scores(tp, tp + c[f"fp{suffix}"], tp + c[f"fn{suffix}"])

    main = scores()
    out = {"accuracy": _ratio(c["exact"], c["pairs"]), "f1": main["f1"],
           "precision": main["precision"], "recall": main["recall"]}
    if "tp_intra" in c:
        out["intra_f1"] = scores("_intra")["f1"]
        out["inter_f1"] = scores("_inter")["f1"]
    if "tp_seen" in c:
        precision = _ratio(c["tp"] - c["tp_seen"], c["tp"] + c["fp"] - c["tp_seen"])
        out["ign_f1"] = _ratio(2 * precision * main["recall"], precision + main["recall"])
    return {name: out[name] for name in DOCRE_SCORES if name in out}


def macro_f1(y_true, y_pred, num_classes):
    """The unweighted mean over classes 0..num_classes-1 of each class's F1 (FedCB's F1-score).

    sklearn's ``f1_score(average="macro", labels=range(K), zero_division=0)``: a
    class with neither gold nor predicted examples scores 0.
    """
    true, pred, classes = _encoded(*_pair(y_true, y_pred), range(num_classes))
    return float(precision_recall_fscore_support(true, pred, labels=classes, average="macro",
                                                 zero_division=0)[2])


def per_class_table(y_true, y_pred, labels, negative_label=None):
    """Class-wise precision, recall, F1 and support, like FedED Table 6.

    One row per label in ``labels`` order (sklearn's ``average=None``), except
    that the negative label (if given and in ``labels``) is moved to the last
    class row, so the relation classes read first, as in the papers' tables. A
    final row labelled :data:`MICRO_ROW` ("micro (positive classes)") holds
    :func:`relation_f1` over all labels but the negative one (all labels
    when ``negative_label`` is None); its support is the number of gold
    positives.

    Args:
      y_true: gold labels (strings or ints, compared as given).
      y_pred: predicted labels, same length.
      labels: the labels to report; a label outside it is counted in no row.
      negative_label: the "no relation" label, or None.

    Returns:
      A DataFrame with columns label, precision, recall, f1 (floats, 0.0 on
      zero division) and support (int).
    """
    y_true, y_pred = _pair(y_true, y_pred)
    labels = list(labels)
    if len(set(labels)) != len(labels):
        raise ValueError(f"labels has duplicates: {labels}")
    ordered = [label for label in labels if label != negative_label]
    ordered += [label for label in labels if label == negative_label]
    true, pred, codes = _encoded(y_true, y_pred, ordered)
    p, r, f, s = precision_recall_fscore_support(true, pred, labels=codes, average=None,
                                                 zero_division=0)
    rows = [{"label": label, "precision": float(p[i]), "recall": float(r[i]),
             "f1": float(f[i]), "support": int(s[i])} for i, label in enumerate(ordered)]
    positive = codes[[label != negative_label for label in ordered]]
    rows.append({"label": MICRO_ROW, **_micro(true, pred, positive)})
    table = pd.DataFrame(rows, columns=["label", "precision", "recall", "f1", "support"])
    table["label"] = table["label"].astype(object)
    return table


def _round_items(f1_by_round):
    if isinstance(f1_by_round, (pd.Series, Mapping)):
        return list(f1_by_round.items())
    return [tuple(item) for item in f1_by_round]


def _plain(value):
    return value.item() if isinstance(value, np.generic) else value


def rounds_to_target(f1_by_round, target):
    """The first round whose F1 reaches ``target``, or None: FedED Table 8 and Fig. 2.

    FedED reports the number of communication rounds needed to reach a test
    F1 of 72% ("-" when a run never does); rounds are taken in increasing
    order whatever the input order.

    Args:
      f1_by_round: ``{round: f1}``, a pandas Series indexed by round, or a
        sequence of ``(round, f1)`` pairs. Rounds without a score (None or
        NaN) are skipped.
      target: the F1 to reach (``>=``), on the same scale as the scores
        (0.72 for fractions, 72 for percentages).

    Returns:
      The round number (a Python scalar) or None if it is never reached.
    """
    scored = []
    for round_num, f1 in _round_items(f1_by_round):
        if f1 is None:
            continue
        f1 = float(f1)
        if math.isnan(f1):
            continue
        scored.append((_plain(round_num), f1))
    for round_num, f1 in sorted(scored, key=lambda item: item[0]):
        if f1 >= target:
            return round_num
    return None


def mean_and_sd(values, scale=1.0):
    """The mean and sample sd (n - 1) of one figure over seeds, as ``(mean, sd)``.

    A run without the figure (None, or NaN once pandas or JSON holds it) is left out, not
    averaged. One value has no spread: its sd is 0.0. No value gives ``(None, None)``.
    ``scale`` multiplies each value first (100 for percentages).
    """
    kept = np.asarray([v for v in values if pd.notna(v)], float) * scale
    if not len(kept):
        return None, None
    # The sample sd, as "mean ± sd over three seeds" usually is.
    return float(kept.mean()), float(kept.std(ddof=1)) if len(kept) > 1 else 0.0


def format_bytes(num_bytes):
    """A size as the papers print it: decimal units, three significant digits, no space.

    ``format_bytes(323) == "323B"``, ``format_bytes(42_300) == "42.3KB"``,
    ``format_bytes(423_000_000) == "423MB"`` (1 KB = 1000 B).
    """
    if num_bytes < 0 or not math.isfinite(num_bytes):
        raise ValueError(f"size must be a finite number >= 0, got {num_bytes}")
    value, unit = float(num_bytes), 0
    # Step up while the value, rounded to 3 significant digits, is 1000 or more,
    # so 999_999 B prints "1MB", not "1e+03KB".
    while unit < len(_UNITS) - 1 and float(f"{value:.3g}") >= 1000:
        value, unit = value / 1000.0, unit + 1
    if unit == 0:
        return f"{round(value):d}B"
    return f"{value:.3g}{_UNITS[unit]}"


def communication_table(rows):
    """Bytes each algorithm moves per client and per round, like FedED Table 7.

    FedED compares what each selected platform uploads per round (the whole
    model for FedAvg/FedAtt, predicted labels for FedED); the round total is
    that times the clients selected per round (C * K, see
    :func:`tffre.data.partition.clients_per_round`).

    Args:
      rows: ``{algorithm: (upload_bytes_per_client, broadcast_bytes_per_client,
        clients_per_round)}``; byte counts are numbers >= 0, clients an int >= 1.

    Returns:
      A DataFrame, one row per algorithm in input order, with columns
      algorithm, clients_per_round, upload_bytes_per_client,
      broadcast_bytes_per_client, upload_bytes_per_round,
      broadcast_bytes_per_round, upload_per_client and upload_per_round
      (human-readable, :func:`format_bytes`: decimal units, 1 KB = 1000 B).
    """
    records = []
    for algorithm, spec in rows.items():
        upload, broadcast, clients = spec
        if isinstance(clients, bool) or int(clients) != clients or clients < 1:
            raise ValueError(f"{algorithm}: clients_per_round must be an int >= 1, got {clients}")
        for name, value in (("upload", upload), ("broadcast", broadcast)):
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{algorithm}: {name} bytes must be >= 0, got {value}")
        clients = int(clients)
        records.append({
            "algorithm": algorithm, "clients_per_round": clients,
            "upload_bytes_per_client": _plain(upload),
            "broadcast_bytes_per_client": _plain(broadcast),
            "upload_bytes_per_round": _plain(upload) * clients,
            "broadcast_bytes_per_round": _plain(broadcast) * clients,
            "upload_per_client": format_bytes(upload),
            "upload_per_round": format_bytes(upload * clients),
        })
    columns = ["algorithm", "clients_per_round", "upload_bytes_per_client",
               "broadcast_bytes_per_client", "upload_bytes_per_round",
               "broadcast_bytes_per_round", "upload_per_client", "upload_per_round"]
    return pd.DataFrame(records, columns=columns)
