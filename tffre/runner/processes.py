"""Building an algorithm's process for a run, from the same initial weights, and reusing it.

Every algorithm of a run starts from the weights of a model built right after
``tf.keras.utils.set_random_seed(seed)``, with the task's pretrained weights
put in after ``initialize`` (``set_model_weights``; never through
``model_fn``: TFF issue #2313). :func:`reuse_processes` keeps processes across
runs of one Python process (an example's seeds and alphas).
"""

import tensorflow as tf
import tensorflow_federated as tff

from tffre import builder, registry

_CACHE = None


def reuse_processes(enabled=True):
    """Keep the processes :func:`tffre.runner.run_experiment` builds, for its later calls in
    this Python process (e.g. an example's seeds and betas): building and tracing a
    ResNet-18 round takes longer than ten of its rounds.

    A process is reused when the algorithm, its hyperparameters, the model's architecture,
    the input spec, the loss and the executor settings are all the same; its client
    states are cleared and each run starts from the initial weights of its own seed, as
    a fresh build would. (Server extras start from the first build's; no algorithm of the
    FedCB tables draws them at random.) Processes given a server set (FedED) are not
    kept, nor those whose model draws at random in training (dropout: the traced client
    step's random kernels keep their state, so a reused process would go on with the last
    run's masks, and a run would depend on the runs before it in the same Python process).
    """
    global _CACHE
    _CACHE = {} if enabled else None


def _architecture(model):
    """The layer types and weight shapes of ``model`` (not its values)."""
    return tuple((type(layer).__name__, tuple(tuple(w.shape) for w in layer.weights))
                 for layer in model.layers)


def draws_at_random(model):
    """True when a layer of ``model`` draws at random in training (a Keras random layer,
    such as ``Dropout``, with a non-zero rate; Transformers' encoders hold such layers)."""
    from keras.src import backend
    for module in [model, *model.submodules]:
        if isinstance(getattr(module, "_random_generator", None), backend.RandomGenerator) \
                and getattr(module, "rate", None) != 0:
            return True
    return False


def start(name, hparams, prepared, context, settings):
    """(process, initial state) of algorithm ``name`` with ``hparams`` for ``prepared``: built, or
    reused (:func:`reuse_processes`).

    Either way the state starts from the weights of a model built right after
    ``set_random_seed(settings.seed)``, with the task's pretrained weights in it, so a seed
    gives the same run with or without reuse.
    """
    spec = registry.get_spec(name)   # the row, looked up once
    recipe = builder.ModelRecipe(prepared.model.model_fn, prepared.model.loss,
                                 prepared.data.element_spec(), prepared.metrics)
    how = builder.Execution(**settings.execution())

    def build():
        return builder.build(spec, registry.resolve_hparams(spec.name, hparams), recipe,
                             context).process(how)
    tf.keras.utils.set_random_seed(settings.seed)
    kept = _CACHE is not None and context.server_data is None
    if kept:
        probe = prepared.model.model_fn()
        kept = not draws_at_random(probe)
        if not kept:   # built as a run without reuse builds it
            tf.keras.utils.set_random_seed(settings.seed)
    if not kept:
        process = build()
    else:
        key = (spec.name, repr(hparams), repr(settings.execution()), repr(recipe.input_spec),
               repr(prepared.model.loss.get_config()),
               repr([m().name for m in prepared.metrics or ()]), repr(context),
               _architecture(probe))
        process = _CACHE.get(key)
        if process is None:
            process = _CACHE[key] = build()
        process.client_states = {}
        process.served = set()
    tf.keras.utils.set_random_seed(settings.seed)
    weights = pretrained_weights(process.model_fn, prepared.model.load_pretrained)
    return process, process.set_model_weights(process.initialize(), weights)


def pretrained_weights(model_fn, load_pretrained=None):
    """``ModelWeights`` (numpy) of a fresh model of ``model_fn`` after ``load_pretrained``
    (when given)."""
    model = model_fn()
    if load_pretrained is not None:
        load_pretrained(model)
    return tff.learning.models.ModelWeights(
        trainable=[v.numpy() for v in model.trainable_weights],
        non_trainable=[v.numpy() for v in model.non_trainable_weights])
