"""What the sides of a deployment agree on (:class:`DeployJob`) and what each site loads.

A :class:`DeployJob` is the run's shared description: the task, dataset,
algorithm and hyperparameters (``python -m tffre run``'s names), the task
options that shape the model (never a local path), the batch size and seed,
and what the server learnt from the sites (labels, entity types, the number of
sites). The ServerApp sends it with every training message, so a site that
restarts rebuilds the same round from it; its :meth:`DeployJob.key` names the
round (a site caches one round per key).

**FedED's D_v** (an algorithm that ``needs_server_data``): the server reads its
labelled set from ``server-data`` (a file or folder of the dataset's format on
the server's machine) and tokenizes it as the sites tokenize theirs (the job's
labels, entity types, max_len: a task's :meth:`tffre.tasks.sites.Sites.server_data`). The job
carries only the shape and dtype of D_v's inputs (``server_inputs``): a site
builds the same round from placeholder zeros of that shape
(:func:`task_context`), since FedED's round takes only the types of its
``server_x`` extra from them; the real inputs arrive with the first broadcast
as a constant (sent once: :func:`tffre.federation.split_round.constant_extras`).
D_v's labels never leave the server.

What each side loads is the task's: the sites its ``RECIPE`` derives
(:class:`tffre.tasks.recipe.RecipeSites`), found from the job's ``task`` or dataset by
:func:`load_task`. A site's data and encoder folder come from its own node
configuration (``flower-supernode --node-config 'data="/site/gad"
encoder="/site/minilm"'``), never from the server.
"""

import importlib

import numpy as np

from tffre.tasks.sites import DeployJob  # noqa: F401 (the job is the task interface's input)


#: Hyperparameters that stay at the server: differential privacy's noise seed (a site that
#: knew it could regenerate the noise and remove it).
SERVER_ONLY_HPARAMS = ("dp_seed",)


def public_hparams(hparams):
    """The typed ``hparams`` as the sites get them: the server-only ones unset."""
    import dataclasses
    return dataclasses.replace(hparams, **{k: None for k in SERVER_ONLY_HPARAMS
                                           if hasattr(hparams, k)})


def server_inputs(x):
    """The job's description of D_v's inputs ``x``: {"shape", "dtype"}, or for a dict of
    arrays (a split encoder's {"hidden", "inputs"}) {name: {"shape", "dtype"}}."""
    if isinstance(x, dict):
        return {k: server_inputs(v) for k, v in sorted(x.items())}
    x = np.asarray(x)
    return {"shape": [int(d) for d in x.shape], "dtype": x.dtype.name}


def _zeros_of(described):
    """Zero arrays of a :func:`server_inputs` description."""
    if "shape" in described and "dtype" in described:
        return np.zeros(described["shape"], described["dtype"])
    return {k: _zeros_of(v) for k, v in described.items()}


def task_context(job, server_data=None):
    """The :class:`tffre.definition.TaskContext` of ``job`` (the same on every side): every
    site trains every round, so the population is also the expected clients per round
    (differential privacy's denominator).

    ``server_data``: D_v's (x, y) arrays, at the server. A site has none and gets zeros of
    the job's ``server_inputs`` shape (and zero labels): they give the round its types; the
    values come with the broadcast. Both are batched by the job's batch size, as the runner
    batches D_v (FedED predicts on D_v in chunks of that size)."""
    import tensorflow as tf
    from tffre.definition import TaskContext
    if server_data is None and job.server_inputs:
        x = _zeros_of(job.server_inputs)
        server_data = (x, np.zeros(len(tf.nest.flatten(x)[0]), np.int32))
    return TaskContext.of(num_clients=job.num_clients, clients_per_round=job.num_clients,
                          concepts=job.concepts, prompts=job.facts.get("prompts", "text"),
                          server_arrays=server_data, batch_size=job.batch_size)


def load_task(name=None, dataset=None):
    """The deployment side of a task (a :class:`tffre.tasks.sites.Sites`): ``name`` a task's
    name ("relations", "imcs", ...: the sites of its ``RECIPE``), "module:attribute" for one of
    your own, or None for ``dataset``'s task."""
    from tffre import tasks
    if not name:
        if not dataset:
            raise ValueError("no task: give the dataset or the task")
        return tasks.task_of(dataset).sites()
    if name in tasks.MODULES:
        return tasks.task_named(name).sites()
    module, _, attr = str(name).partition(":")
    if not attr:
        raise ValueError(f"unknown deployment task {name!r}: give one of "
                         f"{', '.join(tasks.MODULES)} or \"module:attribute\"")
    try:
        task = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"task {name!r} cannot be imported ({err})") from None
    return task() if isinstance(task, type) else task
