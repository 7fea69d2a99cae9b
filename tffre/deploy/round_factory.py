"""The one place a deployment builds an algorithm's round: :func:`make_round`.

Both sides of a deployment build the same round from the same description:
the ServerApp to prepare, aggregate and update, each ClientApp to train. The
round comes from the one build path, :func:`tffre.builder.build` (the row
looked up once, its hyperparameters resolved), as the executors' rounds do, and
is read off one eager slot, as the local executor does
(:class:`tffre.federation.split_round.SplitRound`).
"""

from tffre import builder
from tffre.federation.split_round import SplitRound
from tffre.registry import get_spec, resolve_hparams


def make_round(name, model_fn, *, loss, input_spec, hparams, metrics=None, context=None,
               trains=True):
    """(:class:`tffre.federation.split_round.SplitRound`, the algorithm's model_fn, its definition)
    for registry algorithm ``name`` with ``hparams`` (its typed ``Hparams`` object, or
    {name: value} as ``python -m tffre run`` names them; unset ones take the registry's
    defaults).

    ``model_fn`` is the task's Keras model; the returned one is the model the algorithm
    trains (the task's, or the definition's around it: FedCB's classifier, FedRoD's head),
    which the server evaluates and saves. ``trains=False`` (the server): the round never
    trains in this process, so its upload's spec is traced without the training step.
    """
    spec = get_spec(name)
    values = hparams if isinstance(hparams, spec.hparams_class()) else dict(hparams)
    built = builder.build(spec, resolve_hparams(spec.name, values),
                          builder.ModelRecipe(model_fn, loss, input_spec, metrics), context)
    return SplitRound(built.factory, trains=trains), built.model_fn, built.definition
