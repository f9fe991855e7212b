"""Output channels of the attention-indexed model as objects (docs: Theory, :ref:`theory-logits`, :ref:`theory-se`,
:ref:`theory-bayes`, :ref:`theory-amp`).

A channel maps a batch of logit matrices ``h`` (shape ``(..., T, T)``) to outputs:

* :class:`Seq2Lab` (``"seq2lab"``): ``sigma(beta h)``, the row-wise softmax, ``(..., T, T)``;
* :class:`Seq2Seq` (``"seq2seq"``): ``sigma(beta h) X / sqrt(d)``, ``(..., T, d)`` (value =
  identity; the ``1/sqrt(d)`` makes its square loss equal the seq2lab one to leading order, so
  the two share one theory);
* :class:`Linear` (``"linear"``): ``h`` itself (no softmax, no temperature);
* :class:`Hardmax` (``"hardmax"``): labels the one-hot row argmax of the teacher's logits, the
  student's output ``sigma(beta h)`` as for seq2lab.

The per-sequence loss is ``||yhat - y||_F^2`` summed over one sequence's output
(:func:`squared_error`). A channel object owns everything that depends on the channel, so that
simulation, training, the state evolution, AMP and the Bayes baseline share one definition:

* validation of ``(T, beta, beta0)``;
* the forward map (numpy or torch) used by data generation, training and evaluation, and the
  training loss's derivative in the logits;
* the output side of the state evolution in the ``K = T(T+1)/2`` field coordinates of
  :mod:`singlehead.numerics.attention_maps` (``M(v)`` symmetric, diagonal times ``sqrt 2``): the labels
  made from teacher fields, the fit loss ``ell(h) = ||labels - chan_beta(M(h))||_F^2`` with its
  gradient and Hessian, the proximal map and its starting points, closed forms where they exist;
* the logits that reproduce observed labels (AMP's starts, the Bayes denoiser);
* the channel's counts for the thresholds (informative directions ``c_T``).

New channels subclass :class:`Channel` and are registered with :func:`register_channel`; the
base class supplies a generic Newton prox, quadrature test errors and an autograd training
loss, so a new channel needs only its forward map and its fit loss. Names are resolved once, by
:func:`get_channel`, where a problem is built (``Problem``, the CLI, JSON and CSV readers).
"""

from __future__ import annotations

from singlehead.model.channels.base import Channel, squared_error
from singlehead.model.channels.hardmax import Hardmax
from singlehead.model.channels.linear import Linear
from singlehead.model.channels.softmax import Seq2Lab, Seq2Seq
from singlehead.model.registry import Registry

__all__ = [
    "Channel",
    "Seq2Lab",
    "Seq2Seq",
    "Linear",
    "Hardmax",
    "register_channel",
    "get_channel",
    "channel_names",
    "squared_error",
]


_REGISTRY: Registry[Channel] = Registry("channel", Channel)


def register_channel(cls: type[Channel]) -> type[Channel]:
    """Register a :class:`Channel` subclass under ``cls.name`` (usable as a class decorator).

    Registered names are accepted by :class:`~singlehead.model.problem.Problem`, the CLI and the
    JSON/CSV readers. Re-registering a name replaces the earlier class.

    Examples
    --------
    >>> from dataclasses import dataclass
    >>> from typing import ClassVar
    >>> @register_channel
    ... @dataclass(frozen=True)
    ... class Doubled(Linear):
    ...     name: ClassVar[str] = "doubled_linear_example"
    >>> "doubled_linear_example" in channel_names()
    True
    """
    return _REGISTRY.register(cls)


def channel_names() -> tuple[str, ...]:
    """Names of the registered channels, in registration order (the built-in ones first).

    Examples
    --------
    >>> channel_names()[:3]
    ('seq2lab', 'seq2seq', 'linear')
    """
    return _REGISTRY.names()


def get_channel(spec: str | Channel) -> Channel:
    """The channel object for a registered name (a :class:`Channel` passes through).

    An unknown name raises ``ValueError`` naming the parameter and the registered names.

    Examples
    --------
    >>> get_channel("linear")
    Linear()
    """
    return _REGISTRY.get(spec)


for _cls in (Seq2Lab, Seq2Seq, Linear, Hardmax):
    register_channel(_cls)
