"""The one place a deployment builds an algorithm's round: :func:`make_round`.

Both sides of a deployment build the same round from the same description:
the ServerApp to prepare, aggregate and update, each ClientApp to train. This
function copies what :func:`tffre.builder.build_algorithm` does up to the round
(hyperparameters resolved, the definition, the trainer, the round factory:
:func:`tffre.builder.round_factory`) and reads the round off one eager slot, as
the local executor does (:class:`tffre.federation.split_round.SplitRound`).
"""

from tffre import builder
from tffre.federation.split_round import SplitRound


def make_round(name, model_fn, *, loss, input_spec, hparams, metrics=None, context=None,
               trains=True):
    """(:class:`tffre.federation.split_round.SplitRound`, the algorithm's model_fn, its definition)
    for registry algorithm ``name`` with ``hparams`` ({name: value}, as ``python -m tffre run``
    names them; unset ones take the registry's defaults).

    ``model_fn`` is the task's Keras model; the returned one is the model the algorithm
    trains (the task's, or the definition's around it: FedCB's classifier, FedRoD's head),
    which the server evaluates and saves. ``trains=False`` (the server): the round never
    trains in this process, so its upload's spec is traced without the training step.
    """
    factory, definition, algorithm_model_fn = builder.round_factory(
        name, model_fn, loss=loss, input_spec=input_spec, metrics=metrics, context=context,
        **dict(hparams))
    return SplitRound(factory, trains=trains), algorithm_model_fn, definition
