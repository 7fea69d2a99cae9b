"""Server optimizers: what the server does with the aggregated model delta (Reddi et al., ICLR 2021).

Every registry row ends its round with a server step on the aggregate Delta_t (TFF's sign: the
clients' mean of ``theta_t - theta_k``, a pseudo-gradient). The default is FLCMC's plain step
``theta_{t+1} = theta_t - eta Delta_t`` (eta = 1 for the mean, Eq. 6; lambda for attention,
Eq. 14), exactly as before the optimizers existed. The others are Reddi et al.'s
"Adaptive Federated Optimization", Algorithm 2, written in TFF's sign (their Delta is our
-g), per coordinate:

    sgdm:     m_t = beta m_{t-1} + g_t;           theta -= eta m_t    (FedAvgM, Hsu et al. 2019)
    adagrad:  v_t = v_{t-1} + g_t^2                                   (Alg. 2, FedAdagrad)
    yogi:     v_t = v_{t-1} - (1 - b2) g_t^2 sign(v_{t-1} - g_t^2)    (Alg. 2, FedYogi)
    adam:     v_t = b2 v_{t-1} + (1 - b2) g_t^2                       (Alg. 2, FedAdam)
    with      m_t = b1 m_{t-1} + (1 - b1) g_t,  theta -= eta m_t / (sqrt(v_t) + tau)
    from      m_{-1} = 0, v_{-1} = tau^2 (Alg. 2: "v_{-1} >= tau^2").

The paper's algorithm has **no bias correction**. TFF's ``tff.learning.optimizers`` (what
``build_weighted_fed_avg(server_optimizer_fn=...)`` runs) differs, and ``server_optimizer_form
"tff"`` gives its form instead:

* adam and yogi step with ``eta sqrt(1 - b2^t) / (1 - b1^t)`` (Kingma and Ba's bias
  correction), from v = 0 (adam) or v = 1e-6 (yogi's ``initial_preconditioner_value``);
* adagrad has no momentum (b1 is not used), starts from v = 0.1 and puts tau inside the
  root: ``theta -= eta g / sqrt(v + tau)``;
* tau is TFF's ``epsilon``; sgdm is the same in both forms.

Flower 1.23's FedYogi and FedAdagrad are the paper's form started from v = 0 (they equal this
module's with ``initial_v=0``). Its FedAdam is neither form: it bias-corrects with the
exponent ``round + 1`` (so round 1 already uses ``b^2``). Both are documented and tested
(``tests/tffre/test_server_optimizers.py``).

An optimizer is a small Keras-like object on plain tensors: :meth:`ServerOptimizer.build`
makes its state (the slots) for the shapes it steps, :meth:`ServerOptimizer.update_step` does
the maths, :meth:`ServerOptimizer.get_config` serialises it. Its state lives in the server
state (``state["server_optimizer"]``), so checkpoints, resume and a deployment's server carry it
like the model. The plain step keeps no state and adds no key, so every existing row computes
what it computed before, bit for bit.

The declarations (:class:`ServerOptimizerHparams`) load without TensorFlow: the command line
reads them for its flags (``--server-optimizer``, ``--server-learning-rate``, ...).
"""

import collections
import dataclasses
from typing import Optional

from tffre.hparams import (Params, choice, non_negative_float, optional, param, positive_float)
from tffre.lazy import tf

#: The server optimizers (``--server-optimizer``).
SERVER_OPTIMIZERS = ("sgd", "sgdm", "adam", "yogi", "adagrad")
#: The adaptive ones (Reddi et al.'s Algorithm 2).
ADAPTIVE = ("adam", "yogi", "adagrad")
#: ``--server-optimizer-form``: Reddi et al.'s Algorithm 2, or TFF's ``tff.learning.optimizers``.
FORMS = ("paper", "tff")
#: The adaptive optimizers' default server learning rate (Reddi et al. tune eta on a grid;
#: 10^-2 is within their best values for most tasks, Table 8 ff.).
DEFAULT_ADAPTIVE_LEARNING_RATE = 0.01
#: TFF's initial preconditioners (``build_yogi``'s ``initial_preconditioner_value`` and
#: ``build_adagrad``'s ``initial_accumulator_value``), used by the "tff" form.
TFF_INITIAL_V = {"adam": 0.0, "yogi": 1e-6, "adagrad": 0.1}


def _momentum(value):
    """A momentum or decay rate in [0, 1)."""
    value = non_negative_float(value)
    if value >= 1.0:
        raise ValueError(f"expected a value in [0, 1), got {value!r}")
    return value


@dataclasses.dataclass(frozen=True)
class ServerOptimizerHparams(Params):
    """The server step's settings, which every registry row takes (Reddi et al. 2021, Alg. 2)."""

    server_optimizer: str = param(
        "sgd", choice(*SERVER_OPTIMIZERS), "the server's optimizer on the aggregated delta: "
        "sgd (theta - eta * delta: FLCMC Eq. 6 / 14), sgdm (FedAvgM), adam (FedAdam), "
        "yogi (FedYogi), adagrad (FedAdagrad)", paper="Reddi et al. 2021, Algorithm 2")
    server_learning_rate: Optional[float] = param(
        None, optional(positive_float), "the server learning rate eta; default the "
        "aggregator's step (1 for the mean, --stepsize for attention) for sgd and sgdm, "
        f"{DEFAULT_ADAPTIVE_LEARNING_RATE} for adam, yogi and adagrad",
        paper="Reddi et al. 2021, Algorithm 2")
    server_momentum: float = param(0.9, _momentum, "sgdm's momentum beta",
                                   paper="Hsu et al. 2019 (FedAvgM)")
    server_beta1: float = param(0.9, _momentum, "adam/yogi/adagrad: the first moment's decay "
                                "beta_1 (0: no momentum)", paper="Reddi et al. 2021, Algorithm 2")
    server_beta2: float = param(0.99, _momentum, "adam/yogi: the second moment's decay beta_2",
                                paper="Reddi et al. 2021, Algorithm 2")
    server_tau: float = param(1e-3, positive_float, "adam/yogi/adagrad: the degree of "
                              "adaptivity tau (TFF's epsilon)",
                              paper="Reddi et al. 2021, Algorithm 2")
    server_optimizer_form: str = param(
        "paper", choice(*FORMS), "paper: Reddi et al.'s Algorithm 2 (no bias correction, "
        "v from tau^2); tff: tff.learning.optimizers' form (bias correction, TFF's initial v, "
        "adagrad without momentum)")

    def check(self):
        if self.server_optimizer == "sgd" and self.server_optimizer_form != "paper":
            raise ValueError("--server-optimizer-form applies to sgdm, adam, yogi and adagrad")


def server_learning_rate(hp, aggregator_step):
    """The server learning rate of ``hp``: its own, else ``aggregator_step`` for sgd and sgdm
    (1 for the mean, lambda for attention), else :data:`DEFAULT_ADAPTIVE_LEARNING_RATE`."""
    if hp.server_learning_rate is not None:
        return float(hp.server_learning_rate)
    if hp.server_optimizer in ADAPTIVE:
        return DEFAULT_ADAPTIVE_LEARNING_RATE
    return float(aggregator_step)


class ServerOptimizer:
    """One server optimizer on a list of tensors (see the module docstring for the maths).

    Args:
      kind: one of :data:`SERVER_OPTIMIZERS`.
      learning_rate: eta.
      momentum: sgdm's beta.
      beta1: the adaptive optimizers' first-moment decay (Reddi et al., Algorithm 2).
      beta2: adam's and yogi's second-moment decay.
      tau: the degree of adaptivity (TFF's epsilon).
      form: "paper" or "tff" (:data:`FORMS`).
      initial_v: the second moment's start; default tau^2 (the paper's least v_{-1}) or TFF's
        (:data:`TFF_INITIAL_V`). 0 gives Flower's FedYogi and FedAdagrad.
    """

    def __init__(self, kind="sgd", learning_rate=1.0, momentum=0.9, beta1=0.9, beta2=0.99,
                 tau=1e-3, form="paper", initial_v=None):
        if kind not in SERVER_OPTIMIZERS:
            raise ValueError(f"server optimizer must be one of {SERVER_OPTIMIZERS}, got {kind!r}")
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        self.kind, self.form = kind, form
        self.learning_rate, self.momentum = float(learning_rate), float(momentum)
        self.beta1, self.beta2, self.tau = float(beta1), float(beta2), float(tau)
        if initial_v is None:
            initial_v = TFF_INITIAL_V.get(kind, 0.0) if form == "tff" else self.tau ** 2
        self.initial_v = float(initial_v)

    @classmethod
    def from_hparams(cls, hp, aggregator_step):
        """The optimizer ``hp`` declares (:class:`ServerOptimizerHparams`' fields)."""
        return cls(hp.server_optimizer, server_learning_rate(hp, aggregator_step),
                   momentum=hp.server_momentum, beta1=hp.server_beta1, beta2=hp.server_beta2,
                   tau=hp.server_tau, form=hp.server_optimizer_form)

    def get_config(self):
        """The constructor's arguments (``ServerOptimizer(**config)`` rebuilds it)."""
        return dict(kind=self.kind, learning_rate=self.learning_rate, momentum=self.momentum,
                    beta1=self.beta1, beta2=self.beta2, tau=self.tau, form=self.form,
                    initial_v=self.initial_v)

    @property
    def stateful(self):
        """False for the plain step, which keeps nothing (and adds nothing to the state)."""
        return self.kind != "sgd"

    def _slots(self):
        """The names of the per-tensor slots: m (momentum), v (second moment)."""
        if self.kind == "sgd":
            return ()
        if self.kind == "sgdm":
            return ("m",)
        if self.kind == "adagrad" and self.form == "tff":
            return ("v",)
        return ("m", "v")

    def _counts_steps(self):
        return self.form == "tff" and self.kind in ("adam", "yogi")

    def build(self, shapes):
        """The initial state for tensors of ``shapes`` (numpy; None for the plain step):
        {slot: [array per tensor]} and, for the bias-corrected forms, the step count."""
        import numpy as np
        if not self.stateful:
            return None
        state = collections.OrderedDict()
        for slot in self._slots():
            start = self.initial_v if slot == "v" else 0.0
            state[slot] = [np.full(tuple(s), start, np.float32) for s in shapes]
        if self._counts_steps():
            state["step"] = np.int32(0)
        return state

    def state_spec(self, shapes):
        """The TensorSpecs of :meth:`build`'s state (None for the plain step)."""
        state = self.build(shapes)
        if state is None:
            return None
        return tf.nest.map_structure(lambda a: tf.TensorSpec(a.shape, tf.as_dtype(a.dtype)),
                                     state)

    def update_step(self, state, weights, gradients):
        """One server step: (new weights, new state) from ``weights`` and the aggregate
        ``gradients`` (TFF's sign: the mean of theta_t - theta_k). Plain TensorFlow."""
        lr = tf.constant(self.learning_rate, tf.float32)
        if self.kind == "sgd":
            # FLCMC Eq. 6 / 14, written exactly as the round wrote it before (bit for bit).
            return [w - tf.cast(lr, w.dtype) * g for w, g in zip(weights, gradients)], state
        new = collections.OrderedDict()
        if self.kind == "sgdm":   # FedAvgM: m_t = beta m_{t-1} + g_t; theta -= eta m_t
            m = [tf.cast(self.momentum, a.dtype) * a + g
                 for a, g in zip(state["m"], gradients)]
            new["m"] = m
            return [w - tf.cast(lr, w.dtype) * a for w, a in zip(weights, m)], new
        b1, b2, tau = self.beta1, self.beta2, self.tau
        squares = [tf.square(g) for g in gradients]
        if self.kind == "adagrad":
            v = [p + s for p, s in zip(state["v"], squares)]                 # Alg. 2, Adagrad
        elif self.kind == "yogi":
            v = [p - (1.0 - b2) * s * tf.sign(p - s)                          # Alg. 2, Yogi
                 for p, s in zip(state["v"], squares)]
        else:
            v = [b2 * p + (1.0 - b2) * s for p, s in zip(state["v"], squares)]  # Alg. 2, Adam
        new["v"] = v
        if self.kind == "adagrad" and self.form == "tff":
            # TFF's build_adagrad: no momentum, epsilon inside the root.
            return [w - lr * g / tf.sqrt(p + tau)
                    for w, g, p in zip(weights, gradients, v)], new
        m = [b1 * a + (1.0 - b1) * g for a, g in zip(state["m"], gradients)]   # Alg. 2, m_t
        new["m"] = m
        step_size = lr
        if self._counts_steps():
            # TFF's bias correction (Kingma and Ba's alpha_t), which the paper leaves out.
            step = state["step"] + 1
            t = tf.cast(step, tf.float32)
            step_size = lr * tf.sqrt(1.0 - tf.pow(b2, t)) / (1.0 - tf.pow(b1, t))
            new["step"] = step
        new.move_to_end("m", last=False)
        return [w - step_size * a / (tf.sqrt(p) + tau)
                for w, a, p in zip(weights, m, v)], new
