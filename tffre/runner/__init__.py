"""The experiment runner: several algorithms, the same clients, metrics to files, resumable.

Split by concern:

* :mod:`tffre.runner.run_settings`: :class:`RunSettings` (the run's declared options) and
  :class:`PreparedTask` (what a task prepares: its data and :class:`TaskModel`);
* :mod:`tffre.runner.loop`: :func:`run_experiment`, a simulated run (its clients:
  :class:`tffre.runner.loop.SimulatedRounds`);
* :mod:`tffre.runner.rounds`: the round loop of one algorithm and what a run writes
  around it, shared with a deployment (:mod:`tffre.deploy.server_app`), which differs only
  in where the clients run;
* :mod:`tffre.runner.processes`: each algorithm's process, its initial weights, reuse;
* :mod:`tffre.runner.checkpoints`: checkpoints and resume;
* :mod:`tffre.runner.outputs`: metrics.csv, TensorBoard, per-class tables, summaries;
* :mod:`tffre.runner.centralised`: the centralised upper bound.
* :mod:`tffre.runner.per_site`: each client's own held-out scores (``per_site.csv``).

Files in ``settings.out``: ``metrics.csv``, ``tensorboard/<algorithm>/``,
``checkpoints/<algorithm>/``, ``models/<algorithm>/`` (when ``save_model`` is
given), ``per_class/``, ``per_site.csv`` (and ``tensorboard/<algorithm>/sites/<site>/``),
``summary.json`` and ``curves.png``.

The settings import without TensorFlow (the command line reads their declarations);
the other names load on first use (PEP 562).
"""

import importlib

from tffre.runner.run_settings import PreparedTask, RunSettings, TaskModel  # noqa: F401

_LAZY = {"run_experiment": "loop", "sample_clients": "loop", "data_seed": "loop",
         "METRIC_COLUMNS": "outputs", "prepare_out_dir": "outputs", "summarise": "outputs",
         "pretrained_weights": "processes", "reuse_processes": "processes"}
__all__ = ["PreparedTask", "RunSettings", "TaskModel", *_LAZY]


def __getattr__(name):
    if name == "Job":   # the name before PreparedTask ("job" now means only DeployJob)
        import warnings
        warnings.warn("tffre.runner.Job is now tffre.runner.PreparedTask", DeprecationWarning,
                      stacklevel=2)
        return PreparedTask
    if name in _LAZY:
        return getattr(importlib.import_module(f"tffre.runner.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'tffre.runner' has no attribute {name!r}")
