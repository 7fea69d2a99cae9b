"""FedRep: a shared representation, personal heads (Collins et al., ICML 2021); a FedCB Table 2
baseline.

The body (every trainable weight but the head's) is averaged by the server as in
FedAvg; the head (the Keras layer ``personal_layer``, "classifier")
is each client's own: it starts from the client's last head (the broadcast one
before its first round), is trained locally and never uploaded
(:class:`~tffre.definition.PersonalLayerMixin`). The server's copy
of the head stays as initialised, so the global model's own accuracy is not
FedRep's measure: each client's model (shared body, its head) is.

Deviation, documented: FedRep trains the head for some epochs with the body
fixed, then the body with the head fixed. Here head and body train together
for the round's local epochs (one optimizer, one loss); the alternating
schedule would need a per-phase trainable set, which the client loop does not
offer yet.
"""

from tffre.definition import Definition, PersonalLayerMixin


class FedRep(PersonalLayerMixin, Definition):
    """Personal head, averaged body (see the module docstring).

    Evaluated as personal models: the mean, over the clients trained so far, of the
    shared body with each client's head on the common test set.
    """

    evaluation = "personal"
