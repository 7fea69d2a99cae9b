"""A deployment task for end-to-end tests: ``tiny``'s model on a site's ``.npz`` file.

Node configuration: ``data`` = an ``.npz`` with ``x`` (float32 [n, 6]) and ``y`` (int32 [n]);
the first half is evaluated again as the site's ``test`` split. Servers and sites load it
as ``task="deploy_tiny_task:TASK"`` (this folder and ``tests/tffre`` on ``PYTHONPATH``).
"""

import dataclasses

import numpy as np

from deploy_fakes import TinyTask
from tffre.tasks.recipe import RecipeSites
from tffre.tasks.relations import RelationRecipe
from tffre.tasks.sites import SiteDataError, site_path


class NpzTask(TinyTask):
    """:class:`deploy_fakes.TinyTask` reading each site's arrays from its node configuration."""

    def __init__(self):
        super().__init__(arrays={})

    def _site(self, site):
        path = site_path(site, "data")
        try:
            with np.load(path) as saved:
                return saved["x"], saved["y"]
        except (OSError, KeyError, ValueError) as err:
            raise SiteDataError(f"{path}: {err}") from None


TASK = NpzTask()


class AnyAlgorithmTask(NpzTask):
    """:class:`NpzTask` with the model each algorithm needs: named outputs (a representation
    beside the logits) for MOON and FedCMC, as ``test_flower_round`` gives them; chosen from
    the job, so one set of SuperNodes serves runs of every algorithm."""

    NEEDS_NAMED = ("moon", "fedcmc")

    def model(self, job, site):
        self.named = job is not None and job.algorithm.lower() in self.NEEDS_NAMED
        return super().model(job, site)


ANY_ALGORITHM = AnyAlgorithmTask()


def tiny_dropout_model():
    """``tiny_model`` with dropout between its layers: its training draws random masks."""
    import tensorflow as tf
    from tiny import NUM_CLASSES, NUM_FEATURES
    return tf.keras.Sequential([
        tf.keras.Input((NUM_FEATURES,)),
        tf.keras.layers.Dense(5, activation="tanh",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=1)),
        tf.keras.layers.Dropout(0.5),
        tf.keras.layers.Dense(NUM_CLASSES, activation="softmax",
                              kernel_initializer=tf.keras.initializers.GlorotUniform(seed=2))])


class DropoutTask(NpzTask):
    """:class:`NpzTask` whose model has dropout: what a site's round draws shows in its results
    (``tffre.federation.seeding``)."""

    def model_fn(self):
        return tiny_dropout_model


DROPOUT = DropoutTask()


class RelationsWithoutDropoutRecipe(RelationRecipe):
    """The relation recipe with the classifier's dropout off."""

    def config(self, spec, tokenizer, encoder_dir):
        return dataclasses.replace(super().config(spec, tokenizer, encoder_dir), dropout=0.0)


class RelationsWithoutDropout(RecipeSites):
    """The relation task's sites with the classifier's dropout off: a deployed round equals
    the local executor's only for a deterministic model (the two draw dropout masks apart:
    :mod:`tffre.federation.seeding`). Sites load it as ``deploy_tiny_task:RELATIONS``."""

    def __init__(self):
        super().__init__(RelationsWithoutDropoutRecipe())


RELATIONS = RelationsWithoutDropout()
