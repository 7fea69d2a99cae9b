"""Executors: where a :class:`tffre.mapreduce.Round` runs.

* ``"tff"`` (:mod:`tffre.execution.tff`): TFF's own runtime, the reference.
  Each round is one TFF computation that lowers to MapReduceForm. TFF 0.87's
  only runtime is the ``worker_binary`` subprocess, a CPU-only TensorFlow build
  (TFF issues #3709 and #4600: 0% GPU use), so it never uses a GPU.
* ``"local"`` (:mod:`tffre.execution.local`): the same round functions called
  in this Python process, on TensorFlow's devices (GPU when present), with
  clients one after another or ``max_parallel_clients`` at a time, in threads
  or in worker processes (:mod:`tffre.execution.workers`).
* ``"auto"``: ``local`` when TensorFlow sees a GPU, else ``tff``.

Both return a :class:`tffre.process.MeasuredLearningProcess` with the same
``initialize``/``next``/``get_model_weights``/``set_model_weights`` and the
same round metrics.
"""

EXECUTORS = ("auto", "tff", "local")


def resolve_executor(executor):
    """``executor`` with "auto" resolved: "local" when a GPU is visible, else "tff"."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if executor != "auto":
        return executor
    import tensorflow as tf
    return "local" if tf.config.list_physical_devices("GPU") else "tff"


def build_process(factory, *, executor="auto", max_parallel_clients=1, loop="while",
                  client_workers="threads", **info):
    """The learning process of the round ``factory`` makes (a
    :class:`tffre.mapreduce.RoundFactory`) on ``executor`` (see the module docstring).

    ``info``: what the process carries for the runner: ``name``, ``hparams``,
    ``model_fn`` and ``evaluation`` (see :class:`tffre.process.MeasuredLearningProcess`).
    """
    executor = resolve_executor(executor)
    if executor == "tff":
        from tffre.execution.tff import build_tff_process
        return build_tff_process(factory, **info)
    from tffre.execution.local import build_local_process
    return build_local_process(factory, max_parallel_clients=max_parallel_clients, loop=loop,
                               client_workers=client_workers, **info)
