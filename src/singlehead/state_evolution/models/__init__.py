"""The state-evolution models, and the one place that asks what a problem is (:func:`model_for`).

A *model* turns a :class:`~singlehead.Problem` into what the solver iterates: its blocks of overlaps, its map
and the result it reports. Each lives in a module of its own and is chosen here, from what the problem's
student and channel declare (``Student.symmetric``, ``Channel.multihead_theory``), never from their types:

* :mod:`.tied` — a symmetric student, one head: one block ``(q, m, Sigma)``;
* :mod:`.blocks` — a non-symmetric (untied) student: a symmetric and an antisymmetric block;
* :mod:`.linear_heads` — several heads on a channel whose output is linear in the logits: the exact reduction to
  one head (a transform of the problem and of the tied or block model's result);
* :mod:`.heads` — several heads on a softmax channel: per-head overlap matrices (experimental).

A problem no model serves is refused here with a ``ValueError`` naming the parameter.
"""

from __future__ import annotations

from singlehead.model.problem import Problem
from singlehead.state_evolution.models.base import SEModel

__all__ = ["SEModel", "model_for"]


def model_for(problem: Problem) -> SEModel:
    """The state-evolution model of ``problem`` (see the module docstring).

    Raises
    ------
    ValueError
        Several heads on a channel that declares no theory of several heads (``Channel.multihead_theory``
        is ``None``), naming ``heads``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> model_for(Problem()).name, model_for(Problem(student="untied")).name
    ('tied', 'blocks')
    >>> model_for(Problem(heads=2)).name, model_for(Problem(channel="linear", T=1, heads=2)).name
    ('heads', 'linear_heads')
    """
    from singlehead.state_evolution.models import blocks, heads, linear_heads, tied

    if problem.multihead:
        kind = problem.channel.multihead_theory
        if kind == "reduction":
            return linear_heads.LinearHeadsModel(problem, model_for)
        if kind == "heads":
            return heads.HeadsModel(problem)
        raise ValueError(
            f"heads: the {problem.channel.name!r} channel has no state evolution of several heads "
            f"(Channel.multihead_theory is {kind!r}); use heads = teacher_heads = 1 with it (got "
            f"heads={problem.heads}, teacher_heads={problem.teacher_heads})"
        )
    if problem.student.symmetric:
        return tied.TiedModel(problem)
    return blocks.BlocksModel(problem)
