"""Centralised evaluation of the global model, as in FLCMC section 4.3.

* test accuracy: the global model on every client's test set, weighted by
  test-set size (equivalently, accuracy on the pooled test sets);
* loss: the global model's loss on all clients' training data;
* dev accuracy, when every client has a "dev" split (for choosing a round
  without looking at the test set);
* for relation extraction (a ``negative_label`` is given): test and dev F1,
  micro over the positive classes, or the positive class's F1 for a binary
  set (:func:`tffre.metrics.relation_f1`).

This is a simulation-side measurement: the pooled arrays never enter a
federated computation.
"""

import numpy as np
import tensorflow as tf

from tffre.client_model import ClientModel


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
    """

    def __init__(self, model_fn, data, loss, batch_size=256, negative_label=None):
        self.model = model_fn()
        self.negative_label = negative_label
        self.num_classes = data.num_classes
        # Per-example losses, so the pooled mean weights every example equally.
        self._per_example_loss = loss.__class__.from_config({**loss.get_config(), "reduction": "none"})
        self._splits = {"test": data.pooled("test"), "train": data.pooled("train")}
        if data.has_split("dev"):
            self._splits["dev"] = data.pooled("dev")
        self.batch_size = batch_size
        self._batch = tf.function(self._batch_impl, reduce_retracing=True)

    def _batch_impl(self, x, y):
        pred = main_output(self.model(x, training=False))
        return self._per_example_loss(y, pred), tf.argmax(pred, axis=-1)

    def predictions(self, split):
        """(per-example losses, predicted class indices) of the current model on ``split``."""
        x, y = self._splits[split]
        losses, preds = [], []
        for i in range(0, len(y), self.batch_size):
            loss, pred = self._batch(x[i:i + self.batch_size], y[i:i + self.batch_size])
            losses.append(loss.numpy())
            preds.append(pred.numpy())
        return np.concatenate(losses), np.concatenate(preds)

    def model_for(self, model_weights):
        """Assigns ``model_weights`` to the evaluation model and returns it (a Keras model)."""
        model_weights.assign_weights_to(self.model)
        return self.model

    def evaluate_model(self):
        """The metrics of the evaluation model as it is (see :meth:`__call__`)."""
        from tffre.metrics import relation_f1
        out = {}
        for split in self._splits:
            losses, preds = self.predictions(split)
            y = np.asarray(self._splits[split][1]).reshape(-1)
            if split == "train":
                out["train_loss"] = float(np.mean(losses)) if len(losses) else float("nan")
                continue
            out[f"{split}_accuracy"] = float(np.mean(preds == y)) if len(y) else float("nan")
            if self.negative_label is not None:
                out[f"{split}_f1"] = relation_f1(y, preds, self.negative_label,
                                                 labels=list(range(self.num_classes)))["f1"]
        return out

    def __call__(self, model_weights):
        """{"test_accuracy", "train_loss"} (and "dev_accuracy"; "test_f1"/"dev_f1" for relation
        extraction) of ``model_weights``."""
        self.model_for(model_weights)
        return self.evaluate_model()
