"""A site's evaluation counts: what each site sends so that the server computes, from their
sums, the scores the simulation's evaluator computes on pooled data (:class:`SiteEvaluator`).
"""

import collections

import numpy as np


class SiteEvaluator:
    """Summed evaluation counts of a model on a site's splits, of the task's evaluation kind
    (:attr:`tffre.tasks.sites.SiteModel.evaluation`); the server adds the sites' counts and
    computes the scores the simulation's evaluator computes on pooled data
    (:func:`tffre.federation.round_driver.evaluation_columns`):

    * "classification": per split the loss sum, the example count and the confusion matrix
      (accuracy and F1 as :class:`tffre.evaluation.GlobalModelEvaluator`);
    * "docre" (document-level RE): per split the pair loss summed over the valid pairs, the
      valid pairs (``count/<split>``) and :func:`tffre.metrics.docre_counts`
      (``docre/<name>/<split>``: TP/FP/FN, the exactly right pairs, and per intra-/inter-
      sentence pairs where the site's data carries ``pair_intra``), from which P/R/F1 follow
      as :class:`tffre.evaluation.DocREEvaluator` computes them. DocRED's Ign F1 is not
      counted: it needs the facts of every site's training split.

    Args:
      annotations: {split: {name: array}} the evaluation reads beside the data ("docre":
        ``pair_intra``), or None.
      batch_size: default 256 examples, 8 documents for "docre" (as DocREEvaluator).
      threshold: "docre": the sigmoid above which a pair is counted a relation (the job's
        ``--threshold``; default :data:`tffre.evaluation.DOCRE_THRESHOLD`).
    """

    def __init__(self, model_fn, loss, splits, batch_size=None, kind="classification",
                 annotations=None, threshold=None):
        import tensorflow as tf
        from tffre.evaluation import DOCRE_THRESHOLD, EVALUATORS, docre_batch, main_output
        if kind not in EVALUATORS:
            raise ValueError(f"unknown evaluation kind {kind!r}; valid: {', '.join(EVALUATORS)}")
        self.model = model_fn()
        self.splits = splits
        self.kind = kind
        self.annotations = annotations or {}
        if threshold is not None and kind != "docre":
            raise ValueError(f"a threshold applies to the docre evaluation, not {kind!r}")
        if kind == "docre":
            self.batch_size = batch_size or 8
            # The loss's kind decides how logits become predictions, as in simulation.
            self._batch = tf.function(
                lambda x, y: docre_batch(self.model, x, y, loss.kind, DOCRE_THRESHOLD
                                         if threshold is None else float(threshold)),
                reduce_retracing=True)
            return
        self.batch_size = batch_size or 256
        per_example = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})

        def batch(x, y):
            pred = main_output(self.model(x, training=False))
            return per_example(y, pred), tf.argmax(pred, axis=-1, output_type=tf.int32)
        self._batch = tf.function(batch, reduce_retracing=True)

    def counts(self, weights, num_classes):
        """{name: array}: ``loss/<split>``, ``count/<split>`` and ``confusion/<split>``
        ("classification") or ``docre/<name>/<split>`` ("docre")."""
        weights.assign_weights_to(self.model)
        if self.kind == "docre":
            return self._docre_counts()
        from tffre.data.federated import take_rows
        out = collections.OrderedDict()
        for split, (x, y) in self.splits.items():
            y = np.asarray(y).reshape(-1)
            total, confusion = 0.0, np.zeros((num_classes, num_classes), np.int64)
            for i in range(0, len(y), self.batch_size):
                rows = slice(i, i + self.batch_size)
                losses, preds = self._batch(take_rows(x, rows), y[rows])
                total += float(np.sum(losses.numpy(), dtype=np.float64))
                np.add.at(confusion, (y[rows], preds.numpy()), 1)
            out[f"loss/{split}"] = np.float64(total)
            out[f"count/{split}"] = np.int64(len(y))
            out[f"confusion/{split}"] = confusion
        return out

    def _docre_counts(self):
        from tffre.data.federated import take_rows
        from tffre.evaluation import with_unscored_gold
        from tffre.metrics import docre_counts
        out = collections.OrderedDict()
        for split, (x, y) in self.splits.items():
            y = np.asarray(y)
            total, pairs, preds = 0.0, 0.0, []
            for i in range(0, len(y), self.batch_size):
                rows = slice(i, i + self.batch_size)
                loss, weight, pred = self._batch(take_rows(x, rows), y[rows])
                total += float(loss)
                pairs += float(weight)
                preds.append(pred.numpy())
            out[f"loss/{split}"] = np.float64(total)
            out[f"count/{split}"] = np.int64(round(pairs))
            if split == "train":   # only its loss is reported (train_loss)
                continue
            # An empty split sends zero counts, so every site sends the same names.
            pred = np.concatenate(preds) if preds else np.zeros(y[..., :-1].shape, np.int32)
            notes = self.annotations.get(split, {})
            # Every gold pair counts: one no candidate pair holds is a miss (as simulated).
            counts = with_unscored_gold(docre_counts(y[..., :-1], pred, y[..., -1],
                                                     intra=notes.get("pair_intra")), notes)
            for name, value in counts.items():
                out[f"docre/{name}/{split}"] = np.int64(value)
        return out
