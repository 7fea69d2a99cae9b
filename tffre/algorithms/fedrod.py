"""FedRoD: a generic head with a balanced loss and a personal head (Chen & Chao, ICLR 2022);
a FedCB Table 2 baseline.

The model (:meth:`FedRoD.model_fn`, around the task model):

* body → ``features`` h → the task's head, the **generic** head g ("classifier"),
  shared and averaged by the server with the body;
* a **personal** head p ("personal_head", a Dense layer of K outputs) on h,
  each client's own (:class:`~tffre.definition.PersonalLayerMixin`:
  started from the client's last, trained locally, never uploaded);
* the personalised prediction g(h) + p(h) (output ``personal_logits``).

The client objective (FedRoD section 4):

* the body and g minimise the balanced softmax loss (BSM, Ren et al. 2020), the
  cross-entropy over g(h) + log n_c, with n_c the client's count of class c
  (``uses_label_counts``; a class it lacks gets log 1e-8, a margin that
  makes its probability negligible, as log 0 would, without infinities);
* p minimises the cross-entropy of g(h) + p(h) on the client's data, through p
  only: h and g(h) are held fixed (``tf.stop_gradient``), as the authors' code
  detaches them, so the personal head does not pull the shared body.

The global model evaluated and saved is the body with g (FedRoD's generic
model, G-FL), the figure FedCB Table 2 reports beside FedAvg's.
"""

from tffre.definition import Definition, PersonalLayerMixin
from tffre.lazy import tf

MISSING_CLASS_COUNT = 1e-8


def balanced_softmax_loss(y, logits, label_counts):
    """Mean cross-entropy of ``logits + log(n_c)`` (balanced softmax; n_c clamped at 1e-8)."""
    prior = tf.math.log(tf.maximum(tf.cast(label_counts, tf.float32), MISSING_CLASS_COUNT))
    y = tf.cast(tf.reshape(y, [-1]), tf.int32)
    return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        y, tf.cast(logits, tf.float32) + prior, from_logits=True))


class FedRoD(PersonalLayerMixin, Definition):
    """Generic head with BSM, personal head kept per client (see the module docstring)."""

    needs_features = True
    uses_label_counts = True
    personal_layer = "personal_head"

    def model_fn(self, model_fn):
        from tffre.models.heads import task_features, task_num_classes
        name = self.personal_layer

        def make():
            task = model_fn()
            inputs, features = task_features(task)
            generic = task.output["logits"]
            personal = tf.keras.layers.Dense(task_num_classes(task), name=name)(
                tf.stop_gradient(features))
            combined = tf.keras.layers.Add(name="personal_logits")(
                [tf.stop_gradient(generic), personal])
            return tf.keras.Model(inputs, {"features": features, "logits": generic,
                                           "personal_logits": combined}, name="fedrod")
        return make

    def objective(self, ctx):
        y = tf.cast(tf.reshape(ctx.y, [-1]), tf.int32)
        generic = balanced_softmax_loss(y, ctx.outputs["logits"], ctx.label_counts)
        personal = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            y, ctx.outputs["personal_logits"], from_logits=True))
        return tf.add_n([generic, personal] + list(ctx.model.keras_model.losses))
