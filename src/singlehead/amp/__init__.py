"""Approximate message passing (GAMP) for single-head tied attention (docs: Theory, :ref:`theory-erm`, :ref:`theory-se`,
:ref:`theory-bayes`, :ref:`theory-amp`).

Two algorithms on the equivalent matrix-sensing problem of arXiv 2509.24914 (Sec. 2):

* **ERM-GAMP** (:func:`amp`): generalised AMP (Rangan 2011, "Generalized approximate message
  passing for estimation with random linear mixing"; Bayati & Montanari 2011 for the state
  evolution) whose output step is the ``K``-dimensional proximal step of the channel
  (:func:`singlehead.numerics.prox.prox_channel` / :func:`~singlehead.numerics.prox.prox_softmax`) and whose
  matrix step is the proximal map of the regulariser, i.e. the spectral soft threshold
  ``eta ReLU(Y - eps)`` (nuclear norm, optional rank cap) or a linear shrinkage (Frobenius).
  Its fixed points are stationary points of the ERM objective (shown below) and its
  iterates follow the six-order-parameter state evolution of :mod:`singlehead.state_evolution`.
* **Bayes-GAMP** (:func:`amp` with ``bayes=True``): GAMP-RIE in the spirit of Maillard,
  Troiani, Martin, Krzakala & Zdeborová (arXiv 2408.03733) for the attention-indexed model of
  arXiv 2506.01582: the matrix denoiser is the rotation-invariant estimator (RIE, Bun, Allez,
  Bouchaud & Potters 2016) ``x -> x - 2 v H_{mu_v}(x)`` applied to the eigenvalues, and the
  output denoiser is the posterior mean of the channel. For softmax channels the labels fix the
  logits up to the global shift ``u`` (:func:`singlehead.numerics.prox.shift_direction`), so the posterior
  of the ``K`` logits given the labels and the Gaussian message is Gaussian, of rank ``c_T = K-1``
  (exactly; label noise handled too). Its iterates follow the Bayes state evolution (docs: Theory, :ref:`theory-bayes`).

Sensing operator and normalisations
-----------------------------------
Sample ``mu`` has ``K = T(T+1)/2`` logits, stored as a ``K``-vector with the convention of
``singlehead.numerics.prox`` (off-diagonal ``h_ab``, diagonal ``h_aa / sqrt 2``), so that every
component has variance ``q = Tr S^2/d``. Each is a Frobenius inner product
``v_{mu k} = <A_{mu k}, S>`` with

* ``A_{mu,(a,b)} = (x_a x_b^T + x_b x_a^T)/(2 sqrt d)`` for ``a < b``,
* ``A_{mu,(a,a)} = (x_a x_a^T - I)/sqrt(2 d)``,

``E ||A_{mu k}||_F^2 = (d+1)/2``. In the Frobenius-orthonormal coordinates ``theta`` of the
``N = d(d+1)/2``-dimensional space of symmetric matrices, every entry of the sensing matrix has
variance ``a = 1/d``. The adjoint is ``A^T g = sum_mu (X_mu^T B_mu X_mu - Tr(B_mu) I)/sqrt d``
with ``B_mu = M(g_mu)/2`` (``M`` = :func:`singlehead.numerics.prox.vec_to_mat`).

One GAMP iteration (scalar variances; ``t`` the iteration index)::

    omega^t  = A(S^t) - V^t g^{t-1}                           (n, K) Onsager-corrected logits
    h*       = prox_{V^t loss}(omega^t)                        K-dim prox of the channel
    g^t      = (h* - omega^t) / V^t
    Gamma^t  = sum_mu Tr[I - (I + V^t Hess loss(h*_mu))^{-1}] / V^t   (= -sum d g/d omega)
    tau^t    = d / Gamma^t                                     (= 1/(a Gamma))
    R^t      = S^t + tau^t A^T g^t
    S^{t+1}  = prox_{tau^t r}(R^t)                             r = lam d Tr S (+ PSD, rank cap)
                                                                 or lam d ||S||_F^2
    V^{t+1}  = tau^t div(R -> S)(R^t) / d                      (= ||A_k||^2 tau div / N)

``div`` is the exact finite-``d`` divergence of the spectral map ``R = U diag(nu) U^T ->
U diag(f) U^T`` over symmetric matrices, ``sum_i f'(nu_i) + sum_{i<j} (f_i - f_j)/(nu_i - nu_j)``
(docs, Theory, :ref:`theory-prior-side`, writes ``(1/d^2)[...]``, i.e. ``div/N`` to leading order).
``prox_{tau r}`` is ``ReLU(nu - lam d tau)`` on the eigenvalues (top ``p`` kept for the
factorized student with ``kappa < 1``), or ``R/(1 + 2 lam d tau)`` for the direct student.

**Fixed points are stationary points.** At a fixed point ``h* = omega + V g = A(S)`` and
``g = -grad loss(A(S))`` (prox optimality), while ``S = prox_{tau r}(S + tau A^T g)`` means
``A^T g in d r(S)``: together ``0 in A^T grad loss(A S) + d r(S)``, the stationarity condition
of ``sum_mu loss_mu + r(S)``, the (unnormalised) ERM objective of :func:`~singlehead.solve_reference`.
Damping (convex combination of new and old ``S``, ``V``, ``g``) does not move the fixed points.

**Link with the state evolution (docs: Theory, :ref:`theory-se`).** Matching the effective matrix problem
``R = eta (S0 + delta Z)``, ``Shat = eta ReLU(Y - eps)`` with the iteration above gives
``Sigma = V``, ``Sigmahat = 2/(d tau) = 2 alpha E Tr(-dg/domega)`` (per sample),
``qhat = 2 alpha E ||g||^2``, ``mhat`` by Stein's lemma, ``eta delta = sqrt(qhat)/Sigmahat`` (the
noise in ``R`` has ``theta``-variance ``tau^2 n E||g||^2 / d = 2 (eta delta)^2 / d``, i.e. GOE
``eta delta Z``) and threshold ``lam d tau = eta eps``: exactly the SE normalisation. Hence the
SE iterates are ``(q, m, Sigma)_{t+1} = prior_side(output_side((q, m, Sigma)_t))``
(:func:`se_iterates`), started at the empirical ``(q, m)`` of ``S^0`` and ``Sigma = V^0``.

Bayes variant: ``g = P (w - omega)/(V + Delta/2)`` with ``w`` the logits read off the labels,
``P`` the projector orthogonal to the shift (softmax) or the identity (linear);
``Gamma = n c_T/(V + Delta/2)``; the matrix step is the RIE at ``v = d tau/2``
(``R ~ S0 + sqrt(v) Z``); ``V`` as above. SE: ``V_{t+1} = mmse((V_t + Delta/2)/(2 c_T alpha))``
(:func:`bayes_se_iterates`, docs: Theory, :ref:`theory-bayes`).

seq2seq: the labels ``y = P0 X/sqrt d`` determine the attention labels
``P0 = sqrt(d) y X^T (X X^T)^{-1}`` exactly, and ``||P X/sqrt d - y||^2 = ||P - P0||^2 + O(d^{-1/2})``;
AMP runs the seq2lab problem with labels ``P0`` (a stationary point of that objective, which
differs from the seq2seq ERM objective only at order ``d^{-1/2}``). Metrics use the true channel.

Layout: :mod:`.operator` (sensing operator), :mod:`.denoisers` (matrix step), :mod:`.output`
(output step, ERM objective), :mod:`.algorithm` (the iteration, :class:`AMPOptions`, :func:`amp`),
:mod:`.se` (state-evolution iterates).
"""

from __future__ import annotations

from singlehead.amp.algorithm import AMPOptions, AMPRun, amp, bayes_amp, run_amp
from singlehead.amp.denoisers import spectral_divergence
from singlehead.amp.operator import SensingOperator
from singlehead.amp.output import erm_objective
from singlehead.amp.se import bayes_se_iterates, instance_prior, se_iterates

__all__ = [
    "SensingOperator",
    "AMPRun",
    "run_amp",
    "amp",
    "bayes_amp",
    "se_iterates",
    "bayes_se_iterates",
    "spectral_divergence",
    "erm_objective",
    "instance_prior",
    "AMPOptions",
]
