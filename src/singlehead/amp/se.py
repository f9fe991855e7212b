"""State-evolution iterates of ERM-GAMP and Bayes-GAMP, and the finite-``d`` prior of one instance."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from singlehead.bayes import denoising_mmse
from singlehead.model.problem import Problem
from singlehead.numerics.spectra.finite_d import DEFAULT_DRAWS
from singlehead.numerics.spectra.prior_model import prior_from_eigenvalues
from singlehead.state_evolution import (
    PriorModel,
    SEOptions,
    output_side,
    prior_model,
    prior_side,
)
from singlehead.thresholds import informative_directions


def se_iterates(
    problem: Problem,
    q0: float,
    m0: float,
    Sigma0: float,
    n_iter: int,
    *,
    prior: Any = "auto",
    quad: Any = None,
) -> dict[str, np.ndarray]:
    """Undamped SE iterates ``x_{t+1} = prior_side(output_side(x_t))``, ``x = (q, m, Sigma)``.

    This is the trajectory undamped ERM-GAMP follows from ``S^0`` with overlaps ``(q0, m0)`` and
    ``V^0 = Sigma0`` (module docstring). Returns arrays ``q, m, Sigma`` of length ``n_iter + 1``
    and ``qhat, mhat, Sigmahat`` of length ``n_iter``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.amp import se_iterates
    >>> it = se_iterates(Problem(T=2, alpha=0.5, noise=0.5), q0=0.1, m0=0.1, Sigma0=1.0, n_iter=5)
    >>> it["q"].shape, it["qhat"].shape                 # x_0 .. x_5 and the five conjugates
    ((6,), (5,))
    """
    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior)
    if quad is None:
        quad = SEOptions().quadrature(problem)
    xs = [(float(q0), float(m0), float(Sigma0))]
    hats = []
    warm = None
    for _ in range(int(n_iter)):
        q, m, Sig = xs[-1]
        out = output_side(q, m, Sig, problem=problem, Q0=pm.Q0, quad=quad, warm=warm)
        if out.branches is not None and not problem.channel.convex_prox:
            warm = out.branches
        pr = prior_side(out.qhat, out.mhat, out.Sigmahat, problem=problem, prior=pm)
        hats.append((out.qhat, out.mhat, out.Sigmahat))
        xs.append((pr.q, pr.m, pr.Sigma))
    a, h = np.array(xs), np.array(hats).reshape(-1, 3)
    return {
        "q": a[:, 0],
        "m": a[:, 1],
        "Sigma": a[:, 2],
        "qhat": h[:, 0],
        "mhat": h[:, 1],
        "Sigmahat": h[:, 2],
        "Q0": pm.Q0,
    }


def bayes_se_iterates(problem: Problem, V0: float, n_iter: int, *, prior: Any = "auto") -> dict[str, np.ndarray]:
    """Bayes SE iterates ``V_{t+1} = mmse((V_t + Delta/2)/(2 c_T alpha))`` (docs: Theory, :ref:`theory-bayes`;
    ``q = Q0 - V``).

    Channels with their own Bayes output side (hardmax): ``V_{t+1} = mmse(1/qhat_t)``,
    ``qhat_t = 2 alpha I(Q0 - V_t, V_t)`` with ``I``
    :meth:`~singlehead.model.channels.Channel.bayes_output_information`.

    The MSE ``||S^t - S0||_F^2/d`` of Bayes-GAMP follows ``V_t`` (Nishimori: ``m = q``).

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.amp import bayes_se_iterates
    >>> it = bayes_se_iterates(Problem(T=2, alpha=0.1), V0=1.5, n_iter=5)
    >>> [round(float(v), 3) for v in it["V"][:3]]       # V = Q0 - q decreases to the MMSE
    [1.5, 0.732, 0.552]
    """
    pm = prior if isinstance(prior, PriorModel) else prior_model(problem, prior)
    a = 2 * informative_directions(problem) * problem.alpha
    Dh = problem.noise / 2
    ch = problem.channel
    Vs = [float(V0)]
    for _ in range(int(n_iter)):
        if ch.own_bayes_output:  # qhat = 2 alpha E||g_out||^2 at q = Q0 - V (Nishimori)
            qh = 2 * problem.alpha * ch.bayes_output_information(problem.T, pm.Q0 - Vs[-1], Vs[-1], problem.noise)
            Vs.append(denoising_mmse(pm, 1.0 / qh if qh > 0 else float("inf")))
        else:
            Vs.append(denoising_mmse(pm, (Vs[-1] + Dh) / a))
    V = np.array(Vs)
    return {"V": V, "q": pm.Q0 - V, "Q0": pm.Q0}


def instance_prior(S0: np.ndarray | torch.Tensor, *, draws: int = DEFAULT_DRAWS, seed: int = 0) -> PriorModel:
    """Finite-``d`` SE prior model built from the eigenvalues of one sampled target ``S0``.

    Comparing AMP on an instance with the SE iterates of *that* instance (same ``Q0`` and
    spectrum, :class:`singlehead.numerics.spectra.FiniteDSpectrum` with ``draws`` fixed GOE draws) removes
    the ``O(1/d)`` target-to-target fluctuation from the comparison.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.sim.data import sample_sequences
    >>> problem = Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> from singlehead.amp import instance_prior
    >>> prior = instance_prior(S0)
    >>> prior.mode, 1.0 < prior.Q0 < 2.0                # Q0 = Tr S0^2 / d of this draw
    ('finite', True)
    """
    S = S0.numpy() if isinstance(S0, torch.Tensor) else np.asarray(S0, dtype=float)
    return prior_from_eigenvalues(np.linalg.eigvalsh(S), draws=draws, seed=seed)
