"""A site's randomness as a function of the job's seed, the round and the site, never of what
the site's process ran before.

A site's process lives across rounds and runs (Flower's long-lived ClientApp process:
:mod:`tffre.deploy.launch`), while plain Flower starts a new process for every message. Both
must give the same uploads, and a run repeated on the same running sites must give the same
results. What a long-lived process
carries from one round (or run) to the next, and what is done about it here:

* **Dropout masks.** Keras' ``Dropout`` (and every ``BaseRandomLayer``, such as the
  Transformers encoder's dropouts) draws from TensorFlow's *stateful* random kernels by
  default: each kernel keeps its Philox counter for the life of the process, so round 2
  continues round 1's stream, and a run repeated on a running site starts where the last
  run stopped (a fresh process starts every stream at its beginning). Resetting those
  kernels means ``tf.random.set_seed``, which drops every cached kernel: the client's
  training function is instantiated again each round (1.5-4 s a round for the 2-layer
  MiniLM, 1 s for the benchmark's LSTM). :class:`SiteRandomness` instead gives each such
  layer Keras' own ``tf.random.Generator``-backed generator (``rng_type="stateful"``, what
  ``tf.keras.backend.experimental.enable_tf_random_generator`` selects), whose state is a
  variable: before each round it is set from (job seed, round, site, layer), an assignment,
  no retrace. The masks still differ from round to round and from site to site.
* **Python's and numpy's global generators** are seeded from (job seed, round, site) before
  the site's work for a round, and from (job seed, site) before it builds the job's round (a
  task's own ``site_data`` may shuffle with them) (:func:`seed_globals`). Flower's SecAgg+
  rounds each value stochastically with numpy's global generator
  (``flwr/common/secure_aggregation/quantization.py``), after the site's work: so a secure
  run repeats too. Its masks and secret shares come from the operating system
  (``os.urandom``, PyCryptodome), never from these seeds; what the job's seed makes
  predictable is only which way each value was rounded, less than one quantization step
  (``2 C / 2**22``, :mod:`tffre.deploy.secagg`).
* **TensorFlow's global seed** stays the job's seed, set once when the round is built, as
  the simulation sets it: the dataset shuffles' op seeds pair with it
  (:meth:`tffre.federation.site_runtime.SiteRuntime.build`).
* **Anything else** (a task's layer calling ``tf.random.uniform`` itself): the traced
  training is searched for stateful random ops left (:func:`stateful_random_ops`); if there
  are any, the site resets TensorFlow's kernels before each round instead (correct, at the
  cost above) and says so once in its log.

Needing nothing here: the optimizer's state (each round starts from a fresh optimizer's,
or the server's with ``keep_optimizer_state``, assigned in the client's ``begin``, as are
the model's weights and metrics); the round cached per job (its variables are all assigned
at a round's start); Keras' layer-name counters (names only). A site's folder keeps a
stateful algorithm's client state by (job, round): saving a round's drops the later rounds
an earlier run of the same job left (:meth:`tffre.federation.site_runtime.SiteRuntime.train`).
"""

import hashlib
import random

import numpy as np

#: TensorFlow's stateful random ops (their state lives in the kernel, not in a variable).
STATEFUL_RANDOM_OPS = frozenset({
    "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal",
    "ParameterizedTruncatedNormal", "RandomGamma", "RandomPoisson", "RandomPoissonV2",
    "Multinomial", "RandomShuffle", "RandomCrop"})


def derive_seed(*parts, bits=63):
    """A seed in [0, 2**bits) from ``parts`` (ints and strings), the same in every process."""
    text = "/".join(str(p) for p in parts)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % (1 << bits)


def seed_globals(*parts):
    """Seeds Python's and numpy's global generators from ``parts``; returns the seed."""
    seed = derive_seed(*parts, bits=32)
    random.seed(seed)
    np.random.seed(seed)
    return seed


def keras_models(parts):
    """The Keras models a site's training runs: each trainer slot's model and its frozen
    copies (MOON's global and previous models, ...)."""
    found = []
    for slot in getattr(parts, "slots", []):
        for model in [slot.slot.model, *slot.slot.frozen.values()]:
            found.append(getattr(model, "keras_model", model))
    return found


def _random_layers(models):
    """The layers (in a fixed order) of ``models`` that draw from a Keras RandomGenerator."""
    from keras.src import backend
    seen, out = set(), []
    for model in models:
        for module in [model, *model.submodules]:
            generator = getattr(module, "_random_generator", None)
            if isinstance(generator, backend.RandomGenerator) and id(module) not in seen:
                seen.add(id(module))
                out.append(module)
    return out


class SiteRandomness:
    """The dropout generators of a site's round, reset per round (see the module docstring).

    Build it after the round's models exist and before the client's training is traced: a
    trace keeps the random ops it was traced with.

    Args:
      parts: the site's :class:`tffre.federation.split_round.SplitRound`.
    """

    def __init__(self, parts):
        from keras.src import backend
        self.generators = []
        for layer in _random_layers(keras_models(parts)):
            old = layer._random_generator
            if old._rng_type != backend.RandomGenerator.RNG_LEGACY_STATEFUL:
                generator = old   # already a generator (or stateless): reset it if it has state
            else:
                # A user seed on the layer is kept as the generator's initial seed; the round's
                # reset replaces the state anyway.
                generator = backend.RandomGenerator(old._seed, rng_type="stateful")
                layer._random_generator = generator
            generator._maybe_init()
            if getattr(generator, "_generator", None) is not None:
                self.generators.append(generator)
        self.fallback = ()   # stateful op types left in the traced training (see reset)

    def check(self, parts):
        """Looks for stateful random ops left in the traced client training (after the trace);
        returns their types (empty when every draw is reset per round)."""
        self.fallback = tuple(sorted(stateful_random_ops(training_functions(parts))))
        return self.fallback

    def reset(self, seed, rnd, site):
        """Every generator's state from (``seed``, ``rnd``, ``site``, its index); with stateful
        ops left (:meth:`check`), TensorFlow's kernels are reset too (``set_seed``)."""
        for i, generator in enumerate(self.generators):
            generator._generator.reset_from_seed(derive_seed(seed, rnd, site, i))
        if self.fallback:
            import tensorflow as tf
            tf.random.set_seed(seed)


def training_functions(parts):
    """The concrete functions traced for the client's training (each slot's client loop)."""
    functions = []
    for slot in getattr(parts, "slots", []):
        run = slot.run
        listed = getattr(run, "_list_all_concrete_functions", None)
        if listed is not None:
            functions.extend(listed())
    return functions


def stateful_random_ops(functions):
    """The types of TensorFlow's stateful random ops in ``functions``' graphs (the nested
    functions of their loops and conditions included)."""
    found = set()
    for function in functions:
        graph = function.graph.as_graph_def()
        types = {node.op for node in graph.node}
        for nested in graph.library.function:
            types.update(node.op for node in nested.node_def)
        found.update(types & STATEFUL_RANDOM_OPS)
    return found
