"""State evolution (SE) of the ERM minimiser of single-head tied attention.

Implements the six-order-parameter fixed point of arXiv 2509.24914 (Sec. 3, "Main results";
conventions: docs, Theory, :ref:`theory-logits` and :ref:`theory-se`), with the spectral ("nuclear route") prior
side of arXiv 2505.17958 and a deterministic, quadrature-based output side.

Order parameters (all per ``d``, ``Q0 = Tr S0^2/d``):

* ``q = Tr Shat^2/d``, ``m = Tr Shat S0/d``, ``Sigma`` (the prox parameter / response);
* conjugates ``qhat``, ``mhat``, ``Sigmahat``.

**Prior (matrix) side.** Effective denoising of ``Y = S0 + delta Z`` (``Z`` GOE, semicircle on
``[-2, 2]``) with ``delta = sqrt(qhat)/mhat``:

* factorized student (nuclear norm ``lam d Tr S``, rank cap ``p = kappa d``):
  ``Shat = eta f(Y)``, ``f(x) = (x - eps)_+ 1[x > c]``, ``eps = 2 lam/mhat``,
  ``eta = mhat/Sigmahat``, ``c = max(eps, quantile of mu_delta at 1 - kappa)``, and with
  ``J(delta, eps) = int f^2 dmu_delta``::

      q     = eta^2 J
      m     = eta [J - (delta/2) dJ/ddelta - (eps/2) dJ/deps]
      Sigma = dJ/ddelta / (2 delta Sigmahat)           (= D(eta f)/mhat, D the free divergence)

* direct student (Frobenius ``lam d ||S||_F^2``, which is ``2 lam ||S||^2`` in the effective
  problem, the same factor 2 as in ``eps = 2 lam/mhat``): ``Shat = eta' Y`` with
  ``eta' = mhat/(Sigmahat + 4 lam)``, so ``q = eta'^2 (Q0 + delta^2)``, ``m = eta' Q0``,
  ``Sigma = 1/(Sigmahat + 4 lam)``.

**Output (channel) side.** ``K = T(T+1)/2`` iid pairs ``(z0_k, z_k) ~ N(0, [[Q0, m], [m, q]])``,
teacher logits ``y = z0 + xi`` with ``xi_k ~ N(0, Delta/2)``, prox point ``h*`` of
:func:`singlehead.numerics.prox.prox_channel`, ``g = h* - z``::

    qhat     =  2 alpha E ||g||^2 / Sigma^2
    mhat     =  2 alpha E <g, q z0 - m z> / (Sigma (Q0 q - m^2))
    Sigmahat = -2 alpha E <g, Q0 z - m z0> / (Sigma (Q0 q - m^2))

The expectation is taken over the ``2K`` Gaussian directions of ``(y, z)`` (``z0`` enters
linearly and is replaced by ``E[z0 | y, z]``) with fixed scrambled-Sobol nodes
(common random numbers: the map is deterministic and smooth). Its error is estimated from
the spread over independent scrambles. The linear channel is done in closed form
(``mhat = Sigmahat = 2 alpha K/(Sigma + 1/4)``,
``qhat = 2 alpha K (Q0 - 2m + q + Delta/2)/(Sigma + 1/4)^2``).

**Metrics** (same definitions as :class:`~singlehead.Result`): test error
``E ||chan_beta0(M(z0)) - chan_beta(M(z))||_F^2`` (``z0`` noiseless, or ``z0 + xi`` for the noisy
version), train error ``E ||chan_beta0(M(y)) - chan_beta(M(h*))||_F^2``, matrix error
``Q0 - 2m + q``, penalty ``lam eta int f dmu_delta`` (factorized: ``lam Tr S/d``) or ``lam q``
(direct), rank fraction ``mu_delta(f > 0)``.

**Complete rank collapse.** For large ``lam`` the factorized student's fixed point is ``S = 0``
(``q = m = Sigma = 0``: no eigenvalue of ``Y`` survives the threshold). There the output side is
its ``Sigma -> 0`` limit at zero student logits (``g = -Sigma grad ell(0)``; the conjugates
``qhat0, mhat0, Sigmahat0`` stay finite and do not depend on ``lam``), and ``S = 0`` is a fixed
point iff ``eps0 = 2 lam/mhat0`` is at or above the top edge of ``mu_delta0``,
``delta0 = sqrt(qhat0)/mhat0``, i.e. ``lam >= lam_c = mhat0 top(mu_delta0)/2``
(:func:`collapse_point`). The transition is continuous: below ``lam_c`` the non-trivial fixed
point has ``q -> 0``. :func:`theory` returns the collapsed solution (``extras["collapsed"]``)
when ``S = 0`` is a fixed point and the solver reaches it or finds no other one; its errors are
those of predicting with ``h = 0``.

seq2seq has the same theory as seq2lab (docs: Theory, :ref:`theory-channels`): the channel enters only through the
``T x T`` attention matrix.

Layout: :mod:`.quadrature` (the Sobol nodes and their error estimate), :mod:`.output` (the
channel side, its degenerate limit and the channel test errors), :mod:`.prior` (the target's
prior model, the matrix side, the collapse point), :mod:`singlehead.state_evolution.fixed_point` (the u-transform of
each
block of overlaps, Newton/Broyden, the damped iteration), :mod:`.se_map` (the map of one problem
and its :class:`~.se_map.MapSettings`), :mod:`.stages` (one solve attempt), :mod:`.replicon` (the
replicon and prox-jump test of replica symmetry at a fixed point), :mod:`.driver` (:func:`theory`)
and :mod:`.sweep` (:func:`theory_curve`); :mod:`.multihead` maps a problem with several heads to its
single-head equivalent where one exists (the linear channel).
"""

from __future__ import annotations

from singlehead.state_evolution.api import iter_theory_curve, stability, theory, theory_curve
from singlehead.state_evolution.multihead import effective_single_head, multihead_result
from singlehead.state_evolution.options import SEOptions, Tuning, WarmStart
from singlehead.state_evolution.output import OutputSide, channel_test_errors, output_side
from singlehead.state_evolution.prior import PriorModel, PriorSide, collapse_point, prior_model, prior_side
from singlehead.state_evolution.quadrature import OutputQuadrature
from singlehead.state_evolution.stability_record import Stability
from singlehead.state_evolution.stages import SEState

__all__ = [
    "SEOptions",
    "Tuning",
    "WarmStart",
    "OutputQuadrature",
    "PriorModel",
    "prior_model",
    "OutputSide",
    "output_side",
    "channel_test_errors",
    "PriorSide",
    "prior_side",
    "Stability",
    "stability",
    "SEState",
    "collapse_point",
    "theory",
    "theory_curve",
    "iter_theory_curve",
    "effective_single_head",
    "multihead_result",
]
