"""Centralised evaluation of the global model, as in FLCMC section 4.3.

* test accuracy: the global model on every client's test set, weighted by
  test-set size (equivalently, accuracy on the pooled test sets);
* loss: the global model's loss on all clients' training data;
* dev accuracy, when every client has a "dev" split (for choosing a round
  without looking at the test set);
* for relation extraction (a ``negative_label`` is given): test and dev F1,
  micro over the positive classes, or the positive class's F1 for a binary
  set (:func:`tffre.metrics.relation_f1`); with ``macro_f1``, the macro-F1
  over all classes instead (:func:`tffre.metrics.macro_f1`);
* for a binary relation set with a decision threshold (:class:`BinaryThresholdEvaluator`,
  the kind "binary"): the relation predicted where its probability is above the threshold,
  a given one or the one with the best dev F1;
* for document-level RE (:class:`DocREEvaluator`, the evaluation kind "docre"):
  P/R/F1 of the predicted relations over the valid candidate pairs, micro over
  the relation types, every gold relation no candidate pair holds counted as a
  miss, the intra-/inter-sentence F1 and DocRED's Ign F1 where the data carries
  the annotations they need (:func:`tffre.metrics.docre_scores`).

:data:`EVALUATORS` names the kinds; :func:`make_evaluator` builds one. A kind's
``columns`` are the metrics.csv columns it adds to the runner's.

This is a simulation-side measurement: the pooled arrays never enter a
federated computation.
"""

import numpy as np
import tensorflow as tf

from tffre.client_model import ClientModel
from tffre.data.federated import num_rows, take_rows
from tffre.metrics import docre_columns, docre_counts


def main_output(outputs):
    """The model output that holds the class scores (``logits`` of a named-output model)."""
    return ClientModel.main_output(outputs) if isinstance(outputs, dict) else outputs


class GlobalModelEvaluator:
    """Evaluates ``tff.learning.models.ModelWeights`` on pooled client data.

    Args:
      model_fn: no-arg callable returning the Keras model (same architecture
        as the federated one).
      data: a :class:`tffre.data.FederatedData`.
      loss: the Keras loss used for training.
      batch_size: evaluation batch size.
      negative_label: the index of the negative class, to report relation F1.
      macro_f1: report macro-F1 over all classes instead (FedCB's tables).
      train_loss: also score the global model's loss over all training data (``train_loss``);
        on a large set that pass costs more than a round (``--no-train-loss`` skips it).
    """

    #: The metrics.csv columns this kind adds to :data:`tffre.runner.METRIC_COLUMNS`.
    columns = ()

    def __init__(self, model_fn, data, loss, batch_size=256, negative_label=None,
                 macro_f1=False, train_loss=True):
        if macro_f1 and negative_label is not None:
            raise ValueError("give negative_label (relation F1) or macro_f1, not both")
        self.model = model_fn()
        self.negative_label = negative_label
        self.macro_f1 = macro_f1
        self.num_classes = data.num_classes
        # Per-example losses, so the pooled mean weights every example equally.
        self._per_example_loss = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})
        self._splits = pooled_splits(data, train_loss)
        self.batch_size = batch_size
        self._batch = tf.function(self._batch_impl, reduce_retracing=True)
        self._decided = None   # the last evaluation's decided predictions (site_scores)

    def _batch_impl(self, x, y):
        pred = main_output(self.model(x, training=False))
        return self._per_example_loss(y, pred), tf.argmax(pred, axis=-1)

    def predictions(self, split):
        """(per-example losses, predicted class indices) of the current model on ``split``."""
        losses, preds = [], []
        for loss, pred in self._batch_results(split):
            losses.append(loss.numpy())
            preds.append(pred.numpy())
        return np.concatenate(losses), np.concatenate(preds)

    def _batch_results(self, split):
        """``self._batch`` of each batch of ``split``, in order."""
        x, y = self._splits[split]
        # One trace per split layout, its batch dimension free: a split's shorter last batch
        # would otherwise trace the model again (seconds for a transformer).
        self._batch.get_concrete_function(*tf.nest.map_structure(_batch_free_spec, (x, y)))
        for i in range(0, num_rows(x), self.batch_size):
            rows = slice(i, i + self.batch_size)
            yield self._batch(take_rows(x, rows), y[rows])

    def model_for(self, model_weights):
        """Assigns ``model_weights`` to the evaluation model and returns it (a Keras model)."""
        model_weights.assign_weights_to(self.model)
        return self.model

    def evaluate_model(self, splits=None):
        """The metrics of the evaluation model as it is (see :meth:`__call__`), on ``splits``
        (default all: test, train and dev when there is one)."""
        results = {split: self.predictions(split) for split in splits or self._splits}
        self._decided = results
        return self._scores(results, {})

    #: Per-site scores: every evaluation also scores each client's own held-out rows
    #: (:meth:`site_scores`); False for a kind that cannot (document RE's pooled pairs).
    per_site = True

    def site_scores(self, sizes):
        """Each client's scores of the last evaluation on its own held-out rows: the pooled
        predictions cut at the clients' boundaries (the pooled splits are the clients' splits
        in client order, :meth:`tffre.data.FederatedData.pooled`), so no second pass.

        Args:
          sizes: {split: the clients' numbers of rows, in client order}.

        Returns:
          One {metric: value} per client (``test_accuracy``, ``test_f1``, ...; ``num_test``).
        """
        decided = {split: r for split, r in (self._decided or {}).items() if split != "train"}
        rows = []
        for k in range(len(next(iter(sizes.values())))):
            cut, gold = {}, {}
            for split, (losses, preds) in decided.items():
                start = int(np.sum(sizes[split][:k]))
                rows_k = slice(start, start + int(sizes[split][k]))
                cut[split] = (losses[rows_k], preds[rows_k])
                gold[split] = np.asarray(self._splits[split][1]).reshape(-1)[rows_k]
            row = self._scores(cut, {}, gold=gold)
            row["num_test"] = int(sizes["test"][k]) if "test" in sizes else 0
            rows.append(row)
        return rows

    def decision(self):
        """How this evaluation turns the model's probabilities into a label, for a saved
        model to predict as it was scored: None for the most probable label."""
        return None

    def settle(self):
        """Readies :meth:`predictions` and :meth:`decision` for a model :meth:`model_for`
        assigned without an evaluation (a finished run resumed): nothing to do here."""

    def _scores(self, results, out, gold=None):
        """``out`` updated with the scores of ``results`` ({split: (per-example losses,
        predicted class indices)}), against ``gold`` ({split: labels}; default the pooled
        splits')."""
        from tffre.metrics import macro_f1, relation_f1
        for split, (losses, preds) in results.items():
            y = np.asarray(self._splits[split][1]).reshape(-1) if gold is None else gold[split]
            if split == "train":
                out["train_loss"] = float(np.mean(losses)) if len(losses) else float("nan")
                continue
            out[f"{split}_accuracy"] = float(np.mean(preds == y)) if len(y) else float("nan")
            if self.negative_label is not None:
                out[f"{split}_f1"] = relation_f1(y, preds, self.negative_label,
                                                 labels=list(range(self.num_classes)))["f1"]
            elif self.macro_f1:
                out[f"{split}_f1"] = macro_f1(y, preds, self.num_classes)
        return out

    def __call__(self, model_weights, splits=None):
        """{"test_accuracy", "train_loss"} (and "dev_accuracy"; "test_f1"/"dev_f1" for relation
        extraction) of ``model_weights``, on ``splits`` (default all)."""
        self.model_for(model_weights)
        return self.evaluate_model(splits)

    @property
    def splits(self):
        """The evaluated splits' names."""
        return tuple(self._splits)


class BinaryThresholdEvaluator(GlobalModelEvaluator):
    """A binary relation set (GAD, EU-ADR) scored with a decision threshold (evaluation kind
    "binary"): the relation is predicted where the softmax gives it a probability above
    ``threshold``. The argmax is the threshold 0.5; the classification kind keeps it.
    ``threshold="dev"`` tunes it at each evaluation: the threshold of :data:`DOCRE_GRID` with
    the best relation F1 on the dev split scores every split (:func:`best_threshold`, as
    document RE's ``--threshold dev``); the ``threshold`` column says which. F1 rewards
    recall as much as precision, so where relations are common its best threshold often sits
    below 0.5 (Lipton et al. 2014, "Thresholding classifiers to maximize F1 score").
    ``test_f1_argmax`` and ``dev_f1_argmax`` are the same model's F1s at the argmax, for what
    the threshold changes.
    """

    columns = ("threshold", "test_f1_argmax", "dev_f1_argmax")

    def __init__(self, model_fn, data, loss, batch_size=256, negative_label=None,
                 macro_f1=False, threshold=None, train_loss=True):
        if negative_label is None or macro_f1 or data.num_classes != 2:
            raise ValueError(f"a decision threshold applies to a binary relation set (two "
                             f"labels and a negative one), not {data.num_classes} labels")
        super().__init__(model_fn, data, loss, batch_size, negative_label, False, train_loss)
        self.tuned = threshold == "dev"
        #: The threshold applied: the given one, or the last evaluation's tuned one (which
        #: :meth:`predictions` applies, for the per-class table of the final model).
        self.threshold = DOCRE_THRESHOLD if threshold is None or self.tuned \
            else float(threshold)
        self.positive = 1 - negative_label
        from_logits = loss.get_config().get("from_logits", False)
        self._probability = tf.nn.softmax if from_logits else tf.identity

    def _batch_impl(self, x, y):
        pred = main_output(self.model(x, training=False))
        return (self._per_example_loss(y, pred),
                self._probability(pred)[:, self.positive])

    def probabilities(self, split):
        """(per-example losses, the relation's probability) of the current model on ``split``."""
        return super().predictions(split)

    def predictions(self, split):
        """(per-example losses, predicted class indices at :attr:`threshold`)."""
        losses, prob = self.probabilities(split)
        return losses, self._decide(prob, self.threshold)

    def _grid_inputs(self, result):
        """(gold, probabilities, pair mask) of a dev result for :func:`best_threshold`: one
        relation type over one "pair" per sentence, so document RE's grid search serves."""
        gold = np.asarray(self._splits["dev"][1]).reshape(-1) == self.positive
        prob = result[1]
        return gold[:, None, None], prob[:, None, None], np.ones((len(gold), 1), np.int32)

    def _decide(self, prob, threshold):
        return np.where(prob > threshold, self.positive, self.negative_label)

    def decision(self):
        """{"label": the relation's index, "threshold": the one applied, "tuned_on": "dev" or
        None}: the relation is predicted where its probability is above the threshold."""
        return {"label": int(self.positive), "threshold": float(self.threshold),
                "tuned_on": "dev" if self.tuned else None}

    def settle(self):
        """A threshold tuned on dev is tuned for the model as it is now, as an evaluation of
        it would tune it (one pass over dev); a given threshold stays."""
        if self.tuned:
            self.threshold = tuned_threshold(self, {"dev": self.probabilities("dev")})

    def evaluate_model(self, splits=None):
        """The metrics of the evaluation model as it is, the relation predicted above the
        threshold (tuned on dev with ``threshold="dev"``)."""
        results = {split: self.probabilities(split) for split in splits or self._splits}
        self.threshold = tuned_threshold(self, results)
        held_out = {split: r for split, r in results.items() if split != "train"}
        argmax = self._scores({split: (losses, self._decide(prob, DOCRE_THRESHOLD))
                               for split, (losses, prob) in held_out.items()}, {})
        out = {f"{split}_f1_argmax": argmax[f"{split}_f1"] for split in held_out}
        out["threshold"] = self.threshold
        decided = {split: (losses, self._decide(prob, self.threshold))
                   for split, (losses, prob) in results.items()}
        self._decided = decided   # each site is scored at the same (dev-tuned) threshold
        return self._scores(decided, out)


class DocREEvaluator(GlobalModelEvaluator):
    """Document-level RE: P/R/F1 of the relations the global model predicts over the pooled
    candidate pairs (evaluation kind "docre").

    The data's ``x`` is the model's dict of inputs and ``y`` the packed targets
    (:func:`tffre.models.document_model.pack_targets`); ``loss`` is the
    :class:`tffre.models.document_model.DocRELoss` trained with, whose ``kind`` decides how
    logits become predictions (:func:`tffre.models.document_model.predict_relations`: a
    sigmoid above ``threshold`` for "bce", the argmax for "softmax"). ``threshold="dev"``
    ("bce" only) tunes it at each evaluation: the threshold of :data:`DOCRE_GRID` with the
    best F1 on the dev split (:func:`best_threshold`) scores every split, as DocRED's
    baseline (Yao et al. 2019) chooses its theta on dev; the ``threshold`` column says which.
    Annotations
    the data carries (:attr:`tffre.data.FederatedData.annotations`) add scores:
    ``pair_intra`` the intra-/inter-sentence F1 (CDR, GDA), ``pair_in_train``
    DocRED's Ign F1.

    Per split (test, dev): ``{split}_f1``, ``_precision``, ``_recall``,
    ``_accuracy`` (the valid pairs predicted exactly right), and where
    annotated ``_intra_f1``, ``_inter_f1``, ``_ign_f1``; ``train_loss`` is
    the loss averaged over all training pairs (each batch's mean weighted by
    its valid pairs, so the pooled mean is per pair, as ``docre_loss``).

    Every gold relation counts, as BioCreative V's CID evaluation counts every gold
    (chemical, disease) pair: one no candidate pair holds (the ``unscored_gold``
    annotation, per document; :class:`tffre.text.document_features.DocREFeaturizer`)
    is a false negative (:func:`with_unscored_gold`), in the recall and F1, in the
    intra- or inter-sentence F1 by ``unscored_gold_intra``, in Ign F1 through its
    recall, and in the dev F1 a tuned threshold maximises. :attr:`unscored` holds
    each held-out split's count. ``_accuracy`` stays over the candidate pairs.

    Per site (:meth:`site_scores`), each client's own held-out documents are scored the same
    way, at the threshold the pooled evaluation applied.
    """

    columns = tuple(f"{split}_{name}" for split in ("test", "dev")
                    for name in ("precision", "recall", "intra_f1", "inter_f1", "ign_f1")) + \
        ("threshold",)

    def __init__(self, model_fn, data, loss, batch_size=8, negative_label=None,
                 macro_f1=False, threshold=None, train_loss=True):
        from tffre.models.document_model import DocRELoss
        if negative_label is not None or macro_f1:
            raise ValueError("document-level RE evaluation takes neither negative_label nor "
                             "macro_f1: it scores the relations over candidate pairs")
        if not isinstance(loss, DocRELoss):
            raise ValueError(f"document-level RE evaluation needs the DocRELoss it was trained "
                             f"with, got {type(loss).__name__}")
        self.model = model_fn()
        self.kind = loss.kind
        self.tuned = threshold == "dev"
        if self.tuned and loss.kind != "bce":
            raise ValueError("a threshold tuned on dev applies to the bce loss (softmax "
                             "predicts the argmax)")
        self.threshold = DOCRE_THRESHOLD if threshold is None or self.tuned \
            else float(threshold)
        self.negative_label = None
        self.macro_f1 = False
        self.num_classes = data.num_classes
        self.batch_size = batch_size
        self._splits = pooled_splits(data, train_loss)
        self._annotations = {split: data.pooled_annotations(split) for split in self._splits}
        #: {held-out split: its gold relations no candidate pair holds}, counted as misses.
        self.unscored = {split: int(np.sum(notes.get("unscored_gold", 0)))
                         for split, notes in self._annotations.items() if split != "train"}
        self._batch = tf.function(self._batch_impl, reduce_retracing=True)

    def _batch_impl(self, x, y):
        return docre_batch(self.model, x, y, self.kind, self.threshold,
                           probabilities=self.tuned)

    def predictions(self, split):
        """(summed pair losses, valid pairs, predicted multi-hot ``[n, P, R]``, or with a
        threshold tuned on dev the probabilities) of the current model on ``split``."""
        total, pairs, preds = 0.0, 0.0, []
        for loss, weight, pred in self._batch_results(split):
            total += float(loss)
            pairs += float(weight)
            preds.append(pred.numpy())
        return total, pairs, np.concatenate(preds)

    def decision(self):
        """How a saved model predicts as the run scored it (:func:`docre_decision`)."""
        return docre_decision(self.kind, self.threshold, self.tuned)

    def settle(self):
        """A threshold tuned on dev is tuned for the model as it is now, as an evaluation of
        it would tune it (one pass over dev); a given threshold stays."""
        if self.tuned:
            self.threshold = tuned_threshold(self, {"dev": self.predictions("dev")})

    def _grid_inputs(self, result):
        """(gold, probabilities, pair mask) of a dev result for :func:`best_threshold`."""
        y = self._splits["dev"][1]
        return y[..., :-1], result[2], y[..., -1]

    def evaluate_model(self, splits=None):
        """The scores of the evaluation model as it is (see the class docstring)."""
        out = {}
        results = {split: self.predictions(split) for split in splits or self._splits}
        threshold = self.threshold = tuned_threshold(self, results)
        out["threshold"] = threshold
        decided = {}
        for split, (total, pairs, preds) in results.items():
            if split == "train":
                out["train_loss"] = total / pairs if pairs else float("nan")
                continue
            if self.tuned:
                preds = preds > threshold
            y = self._splits[split][1]
            decided[split] = preds
            out.update({f"{split}_{name}": value for name, value in
                        self._split_scores(y, preds, self._annotations[split]).items()})
        self._decided = decided   # each site is scored at the same (dev-tuned) threshold
        return out

    @staticmethod
    def _split_scores(y, preds, notes):
        """:func:`docre_columns` of documents' packed targets ``y``, predicted multi-hot
        ``preds`` and annotations ``notes`` (every gold pair counted)."""
        # The same counts a deployed site sends (tffre.federation.site_evaluation.SiteEvaluator):
        # the scores are a function of their sums.
        counts = docre_counts(y[..., :-1], preds, y[..., -1], intra=notes.get("pair_intra"),
                              in_train=notes.get("pair_in_train"))
        return docre_columns(with_unscored_gold(counts, notes))

    def site_scores(self, sizes):
        """Each client's scores of the last evaluation on its own held-out documents: the
        pooled predictions cut at the clients' boundaries (whole documents, so a client's
        counts are those of its documents' pairs, its unscorable gold pairs among them), at
        the threshold the pooled evaluation applied.

        Args:
          sizes: {split: the clients' numbers of documents, in client order}.

        Returns:
          One {metric: value} per client (``test_f1``, ``test_precision``, ...; ``num_test``
          its valid test pairs, as a deployed site counts them).
        """
        rows = []
        for k in range(len(next(iter(sizes.values())))):
            row = {}
            for split, preds in (self._decided or {}).items():
                start = int(np.sum(sizes[split][:k]))
                docs = slice(start, start + int(sizes[split][k]))
                y = self._splits[split][1][docs]
                notes = {name: value[docs] for name, value in self._annotations[split].items()}
                row.update({f"{split}_{name}": value for name, value in
                            self._split_scores(y, preds[docs], notes).items()})
                if split == "test":
                    row["num_test"] = int(np.sum(y[..., -1]))
            row.setdefault("num_test", 0)
            rows.append(row)
        return rows


#: The sigmoid threshold above which a "bce" model predicts a relation (ATLOP's and the
#: FedLCC authors' 0.5): :class:`DocREEvaluator`'s default, and a deployed site's.
DOCRE_THRESHOLD = 0.5
#: The thresholds a dev-tuned evaluation chooses from (``--threshold dev``): 0.01 to 0.99.
DOCRE_GRID = tuple(round(0.01 * i, 2) for i in range(1, 100))


def docre_decision(kind, threshold=None, tuned=False):
    """A document model's decision rule, as a bundle saves it (:mod:`tffre.bundle`):
    {"loss": "bce", "threshold": ``threshold`` (default :data:`DOCRE_THRESHOLD`), "tuned_on":
    "dev" or None}, or {"loss": "softmax"} (the argmax, none for "no relation")."""
    if kind != "bce":
        return {"loss": kind}
    return {"loss": "bce", "threshold": float(DOCRE_THRESHOLD if threshold is None else threshold),
            "tuned_on": "dev" if tuned else None}


def docre_batch(model, x, y, kind, threshold=DOCRE_THRESHOLD, probabilities=False):
    """One batch of document-level RE evaluation: (the loss summed over the valid pairs, the
    valid pairs, the predicted multi-hot ``[b, P, R]``, or with ``probabilities`` the
    sigmoid of the logits, for a threshold chosen afterwards). The loss is
    :func:`tffre.models.document_model.docre_loss` (FedLCC Eq. 11 for "bce"), a mean over the
    batch's valid pairs, times their number: sums over batches (and sites) divided by the
    summed pairs give the per-pair mean over all of them."""
    from tffre.models.document_model import docre_loss, predict_relations, unpack_targets
    logits = main_output(model(x, training=False))
    labels, pair_mask = unpack_targets(y)
    weight = tf.reduce_sum(pair_mask)
    return (docre_loss(labels, logits, pair_mask, kind) * weight, weight,
            tf.sigmoid(logits) if probabilities else predict_relations(logits, kind, threshold))


def with_unscored_gold(counts, notes):
    """:func:`tffre.metrics.docre_counts` ``counts`` with the gold relations no candidate
    pair holds added as false negatives: the sum of ``notes["unscored_gold"]`` (per
    document) to ``fn`` and, where intra/inter counts are there, the sum of
    ``notes["unscored_gold_intra"]`` to ``fn_intra`` and the rest to ``fn_inter``. Without
    the annotation, ``counts`` as they are. BioCreative V's CID evaluation counts every gold
    pair, so a pair the model cannot score is a miss."""
    missed = notes.get("unscored_gold")
    if missed is None:
        return counts
    out = dict(counts)
    total = int(np.sum(missed))
    out["fn"] += total
    if "fn_intra" in out:
        intra = int(np.sum(notes.get("unscored_gold_intra", 0)))
        out["fn_intra"] += intra
        out["fn_inter"] += total - intra
    return out


def best_threshold(gold, prob, pair_mask, grid=None, missed=0):
    """The threshold of ``grid`` (default :data:`DOCRE_GRID`) whose predictions ``prob >
    t`` score the best micro F1 (:func:`docre_columns`) over the valid pairs, ``missed``
    more gold relations counted as false negatives (those no candidate pair holds); among
    equal F1s, the one nearest :data:`DOCRE_THRESHOLD`."""
    grid = DOCRE_GRID if grid is None else grid
    best, key = DOCRE_THRESHOLD, None
    for t in grid:
        counts = docre_counts(gold, np.asarray(prob) > t, pair_mask)
        counts["fn"] += int(missed)
        f1 = docre_columns(counts)["f1"]
        candidate = (f1, -abs(t - DOCRE_THRESHOLD))
        if key is None or candidate > key:
            best, key = float(t), candidate
    return best


def tuned_threshold(evaluator, results):
    """The threshold ``evaluator`` applies to ``results`` ({split: its predictions}): its
    fixed one, or with ``threshold="dev"`` (``evaluator.tuned``) :func:`best_threshold` on
    the dev split's probabilities (``evaluator._grid_inputs``). A pass over the training
    data alone (the training loss) needs none and gets the evaluator's own; held-out splits
    without dev raise."""
    if not evaluator.tuned or not set(results) - {"train"}:
        return evaluator.threshold
    if "dev" not in results:
        raise ValueError("a threshold tuned on dev needs a dev split")
    # The dev F1 as the evaluation scores it: a document evaluator's unscorable gold
    # relations are misses at every threshold.
    return best_threshold(*evaluator._grid_inputs(results["dev"]),
                          missed=getattr(evaluator, "unscored", {}).get("dev", 0))


def pooled_splits(data, train_loss=True):
    """{split: pooled (x, y)} an evaluator scores: test, dev when there is one, and train
    (for ``train_loss``, a pass over all training data) unless ``train_loss`` is False."""
    names = ["test"] + (["train"] if train_loss else []) + \
        (["dev"] if data.has_split("dev") else [])
    return {name: data.pooled(name) for name in names}


def _batch_free_spec(array):
    """The TensorSpec of ``array``'s batches: its shape with the first dimension free."""
    array = np.asarray(array)
    return tf.TensorSpec((None,) + array.shape[1:], tf.as_dtype(array.dtype))


#: Evaluation kinds: {name: evaluator class}; a task's model names one
#: (:attr:`tffre.runner.TaskModel.evaluation`).
EVALUATORS = {"classification": GlobalModelEvaluator, "binary": BinaryThresholdEvaluator,
              "docre": DocREEvaluator}


def make_evaluator(kind, model_fn, data, loss, **options):
    """The evaluator of ``kind`` (a key of :data:`EVALUATORS`) for ``model_fn`` on ``data``."""
    if kind not in EVALUATORS:
        raise ValueError(f"unknown evaluation kind {kind!r}; valid: {', '.join(EVALUATORS)}")
    return EVALUATORS[kind](model_fn, data, loss, **options)


def evaluate_state(evaluator, process, state, sizes=None, client_ids=()):
    """The metrics of a round's model: the global model's, or for an algorithm evaluated as
    personal models (FedRep: ``process.evaluation == "personal"``) the mean over the clients
    trained so far of the global model with each one's personal weights (the global model's
    before any client has trained).

    With ``sizes`` ({split: the clients' numbers of held-out rows, in the order of
    ``client_ids``}) it returns (metrics, per-site scores or None for a kind without them): each client scored on its own rows
    (:meth:`GlobalModelEvaluator.site_scores`), a personal row's client with its own personal
    weights once it has trained (the global model's before).
    """
    import tensorflow_federated as tff
    weights = process.get_model_weights(state)
    personal = process.personal_indices
    sites = sizes is not None and getattr(evaluator, "per_site", False)
    if process.evaluation != "personal" or not personal:
        out = evaluator(weights)
        if sizes is None:
            return out
        return out, evaluator.site_scores(sizes) if sites else None
    kept = {c: s for c, s in sorted(process.client_states.items()) if float(s["seen"]) > 0}
    held_out = [s for s in evaluator.splits if s != "train"]
    site_rows = None
    if sites:   # the global model's scores, for the clients without personal weights yet
        evaluator(weights, held_out)
        site_rows = evaluator.site_scores(sizes)
    if not kept:
        out = evaluator(weights)
        return out if sizes is None else (out, site_rows)
    rows = []
    order = {c: k for k, c in enumerate(client_ids)}   # a client's row in ``sizes``
    for client, client_state in kept.items():
        trainable = list(weights.trainable)
        for j, i in enumerate(personal):
            trainable[i] = client_state["personal"][j]
        rows.append(evaluator(tff.learning.models.ModelWeights(
            trainable=trainable, non_trainable=list(weights.non_trainable)), held_out))
        if sites and client in order:   # this client's personal model on its own rows
            site_rows[order[client]] = evaluator.site_scores(sizes)[order[client]]
    out = {k: float(np.mean([r[k] for r in rows])) for k in rows[0]}
    # The training loss stays the global model's (one pass, not one per client).
    if "train" in evaluator.splits:
        out["train_loss"] = evaluator(weights, ("train",))["train_loss"]
    return out if sizes is None else (out, site_rows)
