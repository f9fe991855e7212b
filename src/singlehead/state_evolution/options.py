"""Solver settings of the state evolution (:class:`SEOptions`) and the warm start of a sweep (:class:`WarmStart`)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from singlehead.model.problem import Problem
from singlehead.model.validation import check as _check
from singlehead.model.validation import finite as _finite
from singlehead.model.validation import is_int as _is_int
from singlehead.numerics.spectra.finite_d import DEFAULT_DRAWS
from singlehead.state_evolution.quadrature import OutputQuadrature

__all__ = ["SEOptions", "Tuning", "WarmStart", "SE_METHODS", "check_symmetric_options"]

SE_METHODS = ("broyden", "hybr", "iterate")
#: the heads model's ansätze (``multihead_se.solve``)
ANSATZE = ("unspecialised", "specialised", "general")
#: the heads model's own options and tuning constants (no other model reads them)
HEADS_ONLY = ("ansatz", "threads", "history", "union_every", "prior_tol", "inexact", "track_z")
PROX_BRANCHES = ("global", "teacher", "z")
#: up to the fields of this ``T`` the default node count is the student's ``quadrature_points`` (see
#: ``SEOptions.points``)
LONG_SEQUENCE_T = 8
#: the fewest default nodes per scramble for long sequences
MIN_LONG_POINTS = 32


@dataclass(frozen=True)
class Tuning:
    """The state-evolution solver's tuning constants (frozen, validated on construction).

    The defaults are the measured ones; changing them changes which stage finds a hard point and what
    it costs, not the fixed point a converged solve reports. :class:`SEOptions` holds one
    (``SEOptions.tuning``) and accepts each field as a keyword of its own.

    Parameters
    ----------
    switch : float
        Residual at which the damped pre-iteration hands over to the root solver (> 0).
    coarse : bool
        Without a warm start, first solve on the node set thinned 8x (to ``max(tol, 1e-4)``),
        then polish on the full set from there.
    floor_after : int or None
        From this many map evaluations of a solve attempt on, a residual below the map's own
        quadrature error (``residual_floor``: the standard error of one SE step over the node
        scrambles, in the residual's units) ends the attempt, reported as converged at the
        quadrature floor; ``None``: never. Points that reach ``tol`` sooner are unaffected. Near
        ``alpha_interp`` at ``lam = 1e-5`` the prox's quadrature error (relative 1e-3 at
        ``Sigma ~ 1e2-1e4``) keeps the residual at 1e-5 to 7e-4 for hundreds of evaluations
        (often ending unconverged at the budget); iterating below that floor
        moves the point by less than the quadrature leaves it undetermined.
    prox_screen : int or None
        With ``"global"``, the extra Newton starts of the prox (cold starts beside the first one, or
        beside the tracked branches) run only on the first ``1/prox_screen`` of each scramble's nodes
        and where the prox objective is not convex between the first start's minimum and them; on
        every node only when they reach a minimum on those first nodes that the others missed
        (``prox_screen.screened_prox``; default 8: the output side
        is the unscreened one to 1e-9 at the tested points). ``None``: every start on every node.
    exact_switch : float
        With exact Jacobians, the damped pre-iteration hands over to Newton's method at this
        residual (0.3; handing over at once, far from the fixed point, lets Newton's method lose
        hard problems that the damped iteration brings into its basin).
    thin_factor, thin_min_nodes : int
        Coarse stage node set: the first ``1/thin_factor`` of each scramble's nodes (a Sobol prefix
        is itself balanced), used when a scramble has at least ``thin_min_nodes`` nodes (8, 64).
    coarse_tol, coarse_max_iter : float, int
        The coarse stage (and each continuation point) solves to ``max(tol, coarse_tol)`` within
        ``min(fallback_iter, coarse_max_iter)`` steps (1e-4, 60).
    accept_coarse : float
        A coarse (or continuation) point with residual below this is accepted as a start; the
        re-solve with every prox start runs only where the stages reached it (1e-3; elsewhere
        the re-solve costs time without changing which points converge).
    continuation_from, continuation_per_decade, continuation_max_iter : float, int, int
        The continuation in ``lam`` starts at ``continuation_from`` (1e-2), takes
        ``continuation_per_decade`` points per decade (4), each within ``continuation_max_iter``
        steps (200); for ``lam = 0`` it goes down to ``1e-6 continuation_from`` and polishes at 0.
    union_max_evals : int
        Map evaluations of the re-solve with every prox start (cold and tracked; the dearest
        evaluations; 40, which bounds the cost of a point that stays unconverged).
    fallback_iter : int
        Steps of the damped iteration that a root finder falls back on (150).
    history, union_every, prior_tol, inexact, track_z : int, int, float, bool, bool
        The heads model's solver (several heads on a softmax channel): residuals kept by its Anderson
        iteration (4); every ``union_every`` evaluations (5) the prox runs its cold starts beside the tracked
        branch; the denoiser's tolerance (1e-7); ``inexact``: the denoiser is solved only as accurately as the
        iteration needs while far from the fixed point (the steps that decide convergence are exact);
        ``track_z``: the prox's start from ``z`` continues the previous evaluation's branch (``False``).
    quick_max_evals, quick_max_iter, quick_union_max_evals : int
        The quick attempt from a warm start (:meth:`SEOptions.quick_attempt`): at most ``quick_max_evals``
        map evaluations (100), its fallback iteration ``quick_max_iter`` steps (30), its re-solve
        with every prox start ``quick_union_max_evals`` evaluations (6; each costs about ten
        ordinary ones), no continuation. (A smaller quick budget makes chains through hard
        points, such as the interpolation peak at very small ``lam``, fail their quick attempts
        and pay for the cold solve.)

    Examples
    --------
    >>> from singlehead.state_evolution import SEOptions, Tuning
    >>> SEOptions(tuning=Tuning(union_max_evals=10)) == SEOptions(union_max_evals=10)
    True
    """

    switch: float = 3e-2
    coarse: bool = True
    floor_after: int | None = 150
    prox_screen: int | None = 8
    exact_switch: float = 0.3
    thin_factor: int = 8
    thin_min_nodes: int = 64
    coarse_tol: float = 1e-4
    coarse_max_iter: int = 60
    accept_coarse: float = 1e-3
    continuation_from: float = 1e-2
    continuation_per_decade: int = 4
    continuation_max_iter: int = 200
    union_max_evals: int = 40
    quick_max_evals: int = 100
    quick_max_iter: int = 30
    quick_union_max_evals: int = 6
    fallback_iter: int = 150
    history: int = 4
    union_every: int = 5
    prior_tol: float = 1e-7
    inexact: bool = True
    track_z: bool = False

    def __post_init__(self) -> None:
        for name in ("inexact", "track_z"):
            _check(isinstance(getattr(self, name), bool), name, "True or False", getattr(self, name))
        _check(_is_int(self.history) and self.history >= 0, "history", "an integer >= 0", self.history)
        _check(_finite(self.prior_tol) and self.prior_tol > 0, "prior_tol", "> 0", self.prior_tol)
        _check(
            self.prox_screen is None or (_is_int(self.prox_screen) and self.prox_screen >= 2),
            "prox_screen",
            "an integer >= 2 or None",
            self.prox_screen,
        )
        _check(_finite(self.switch) and self.switch > 0, "switch", "> 0", self.switch)
        _check(_finite(self.exact_switch) and self.exact_switch > 0, "exact_switch", "> 0", self.exact_switch)
        _check(isinstance(self.coarse, bool), "coarse", "True or False", self.coarse)
        _check(
            self.floor_after is None or (_is_int(self.floor_after) and self.floor_after >= 1),
            "floor_after",
            "an integer >= 1 or None",
            self.floor_after,
        )
        for name in (
            "thin_factor",
            "thin_min_nodes",
            "coarse_max_iter",
            "continuation_per_decade",
            "continuation_max_iter",
            "union_max_evals",
            "quick_max_evals",
            "quick_max_iter",
            "quick_union_max_evals",
            "fallback_iter",
            "union_every",
        ):
            _check(
                _is_int(getattr(self, name)) and getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name)
            )
        for name in ("coarse_tol", "accept_coarse", "continuation_from"):
            _check(_finite(getattr(self, name)) and getattr(self, name) > 0, name, "> 0", getattr(self, name))


#: the keyword names of :class:`Tuning` (also accepted by :class:`SEOptions`)
TUNING_FIELDS = tuple(f.name for f in dataclasses.fields(Tuning))


@dataclass(frozen=True, init=False)
class SEOptions:
    """Solver settings of the state evolution (frozen, validated on construction): the user's options and,
    in ``tuning``, the solver's :class:`Tuning` constants.

    Every field of :class:`Tuning` is also accepted as a keyword (``SEOptions(thin_factor=16)`` is
    ``SEOptions(tuning=Tuning(thin_factor=16))``) and read as an attribute (``options.thin_factor``).

    A field given as ``None`` takes the default of the problem's model (``model_for``: ``tied``, ``blocks``,
    ``heads``, ``linear_heads``; :meth:`resolved`); an option that does not apply to the problem's model, set away
    from its default, is refused with a ``ValueError`` naming it.

    Parameters
    ----------
    tol : float or None
        Target residual: relative change of the overlaps under one SE step (> 0). ``None``: the model's,
        ``1e-6`` (tied, blocks) or ``1e-4`` (heads, whose prior side is sampled).
    max_iter : int or None
        The most SE map evaluations the point's solver may take, over all its attempts and stages (>= 1): past
        it the solve stops and reports the best point, unconverged (one more evaluation there reports its
        metrics). ``None``: the model's, no cap beyond each attempt's
        ``max_evals`` (tied, blocks) or 60 evaluations of the full map per ansatz (heads).
    damping : float
        Fallback iteration ``x <- (1 - damping) x + damping F(x)``, in ``(0, 1]``.
    n_points, n_scrambles : int
        Output quadrature: ``n_scrambles`` scrambled Sobol sets of ``n_points`` nodes in twice as
        many dimensions as the student's fields (fixed nodes: a deterministic map).
        ``n_points >= 16`` or ``None`` (the default: the student's ``Student.quadrature_points``,
        2048 for a symmetric student's ``K`` fields, 4096 for the untied student's ``T^2``; see
        :meth:`points`), ``n_scrambles >= 1``.
    node_seed : int
        Seed of the quadrature nodes and of the finite-``d`` prior's GOE draws (not a data seed).
    draws : int
        GOE draws of the finite-``d`` prior mode (an integer >= 1; default 3): the prior-side
        map is averaged over them inside the iteration.
    sample_dim, sample_draws : int
        A sampled prior side (non-symmetric students, several heads): ``sample_draws`` instances of dimension
        ``sample_dim``, drawn with ``sample_seed`` (defaults 100 and ``None``: the model's, 8 for blocks, 4 for
        heads; ``>= 4`` and ``>= 1``).
    sample_extrapolate : bool or None
        A sampled block prior side is extrapolated in ``1/D`` (``None``: the blocks model's ``True``): the map is
        ``2 F_D - F_{D/2}`` with ``sample_draws`` instances at ``D = sample_dim`` and
        ``2 sample_draws`` at ``D/2`` (``sample_dim // 2 >= 4``), which removes the ``1/D``
        finite-size bias of the instances (Richardson extrapolation).
    sample_seed : int or None
        Seed of a sampled prior side's instances (an integer >= 0; ``None``, the default: ``node_seed``).
        Changing it redraws the instances and nothing else: the spread of a result over sample seeds
        is the sampling error its error bars estimate.
    draw_errors : bool
        With a sampled prior side, also compute the sampling error of every reported metric
        (``extras["<metric>_draws_se"]``): each instance's deviation from the mean map, carried
        to the fixed point by the map's linear response, its spread over instances inflated by
        the Student-t quantile of its degrees of freedom (``extras["draws_dof"]``).
    method : {"broyden", "hybr", "iterate"}
        ``"broyden"``/``"hybr"``: damped iteration on
        ``u = (log q, atanh(m/sqrt(Q0 q)), log Sigma)`` until the residual is below ``Tuning.switch``,
        then a root finder on ``G(u) = u(F(x(u))) - u`` — Broyden's method with a
        finite-difference (or given) initial Jacobian, or MINPACK's hybrid method — with damped
        iteration as fallback; ``"iterate"``: damped iteration only (at most ``Tuning.fallback_iter`` steps).
    max_evals : int
        Budget of SE map evaluations of one solve attempt (>= 1; a warm-started attempt that
        fails is redone from the default start with a budget of its own), counted over all its
        stages (coarse, full, continuation, the re-solve with every prox start): past it the
        attempt stops and returns the best point the full map saw, unconverged. It bounds the
        cost of the rare point that no stage solves and is a count, so the result does not
        depend on the machine's speed. The default leaves room for the hardest points that do
        converge (near perfect recovery at very small lam, noiseless, where the continuation in
        lam needs several hundred evaluations).
    continuation : bool
        If the solve fails and ``lam < Tuning.continuation_from``, follow the fixed point from
        ``continuation_from`` down to ``problem.lam`` and polish from there (small ``lam`` gives
        ``Sigma ~ 1/lam`` in the interpolation regime, far from any generic initial guess).
    prox_branch : {"global", "teacher", "z"}
        Which minimum of the (non-convex) output prox the SE uses. ``"global"`` (default): the
        lowest of the Newton runs from ``z``, the interpolating point and their midpoint, tracked
        along the solve (the replica-symmetric theory of the global ERM minimiser). ``"teacher"``:
        the local minimum reached by Newton from the teacher's logits at the student's temperature
        (``(beta0/beta) y``); ``"z"``: the one reached from the student's field ``z``. The local
        branches are deterministic maps with no jumps; where the prox has one minimum all three
        agree. At the interpolation peak at very small lam, where replica symmetry fails, neither
        branch reproduces ERM extrapolated to d = inf; the teacher branch is the closer one.
    exact_jacobian : bool
        Solve with Newton's method on the exact Jacobian of the SE map (default ``True``) instead of
        Broyden's rank-one updates. The output side is differentiated on its fixed nodes by the
        implicit function theorem on the prox (``dh = (I + Sigma H)^{-1} (dz + g dSigma/Sigma)``, with
        every node's minimum held), the prior side by forward differences in ``(qhat, mhat,
        Sigmahat)``; computed only where the solver uses it. Newton's last step is taken without
        evaluating the map when the quadratic rate of the previous two predicts convergence (the
        reporting evaluation measures the residual there), and an ``alpha`` sweep predicts each point
        from the previous ones' tangents ``du/dlog alpha``. Closed-form output sides (the linear
        channel) and the small-``q`` control-variate regime keep Broyden's method.
    ansatz : {None, "unspecialised", "specialised", "general"}
        The heads model's subspace of overlaps (``heads = teacher_heads``: the restricted ones;
        ``multihead_se.solve``). ``None``: with as many student as teacher heads, the unspecialised and the
        general ansatz are both solved and the lower training objective's fixed point is returned; otherwise
        the general one.
    threads : int or None
        The heads model's prior draws and jackknife solves run on this many threads (``None``: the size of the
        process's BLAS pool); the numbers do not depend on it.
    tuning : Tuning
        The stages' tuning constants (default ``Tuning()``).
    Examples
    --------
    >>> from singlehead.state_evolution import SEOptions
    >>> options = SEOptions(tol=1e-8, max_evals=500)
    >>> options.tol, options.method
    (1e-08, 'broyden')
    >>> SEOptions(thin_factor=16).tuning.thin_factor, SEOptions(thin_factor=16).thin_factor
    (16, 16)
    >>> SEOptions(damping=0.0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: damping must be ...
    """

    tol: float | None = None
    max_iter: int | None = None
    damping: float = 0.5
    n_points: int | None = None
    n_scrambles: int = 4
    node_seed: int = 0
    draws: int = DEFAULT_DRAWS
    sample_dim: int = 100
    sample_draws: int | None = None
    sample_extrapolate: bool | None = None
    sample_seed: int | None = None
    draw_errors: bool = True
    method: str = "broyden"
    continuation: bool = True
    max_evals: int = 1000
    prox_branch: str = "global"
    exact_jacobian: bool = True
    ansatz: str | None = None
    threads: int | None = None
    tuning: Tuning = field(default_factory=lambda: Tuning())

    def __init__(
        self,
        tol: float | None = None,
        max_iter: int | None = None,
        damping: float = 0.5,
        n_points: int | None = None,
        n_scrambles: int = 4,
        node_seed: int = 0,
        draws: int = DEFAULT_DRAWS,
        sample_dim: int = 100,
        sample_draws: int | None = None,
        sample_extrapolate: bool | None = None,
        sample_seed: int | None = None,
        draw_errors: bool = True,
        method: str = "broyden",
        continuation: bool = True,
        max_evals: int = 1000,
        prox_branch: str = "global",
        exact_jacobian: bool = True,
        ansatz: str | None = None,
        threads: int | None = None,
        tuning: Tuning | None = None,
        **tuning_changes: Any,
    ) -> None:
        unknown = sorted(set(tuning_changes) - set(TUNING_FIELDS))
        if unknown:
            raise TypeError(f"SEOptions got unexpected keyword argument(s) {', '.join(map(repr, unknown))}")
        if tuning is not None and not isinstance(tuning, Tuning):
            raise ValueError(f"tuning must be a Tuning or None (got {tuning!r})")
        tuning = tuning if tuning is not None else Tuning()
        if tuning_changes:
            tuning = dataclasses.replace(tuning, **tuning_changes)
        values = dict(
            tol=tol,
            max_iter=max_iter,
            damping=damping,
            n_points=n_points,
            n_scrambles=n_scrambles,
            node_seed=node_seed,
            draws=draws,
            sample_dim=sample_dim,
            sample_draws=sample_draws,
            sample_extrapolate=sample_extrapolate,
            sample_seed=sample_seed,
            draw_errors=draw_errors,
            method=method,
            continuation=continuation,
            max_evals=max_evals,
            prox_branch=prox_branch,
            exact_jacobian=exact_jacobian,
            ansatz=ansatz,
            threads=threads,
            tuning=tuning,
        )
        for name, value in values.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        # the tuning constants read as options too (``options.thin_factor`` is ``options.tuning.thin_factor``)
        if name in TUNING_FIELDS:
            return getattr(object.__getattribute__(self, "tuning"), name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __post_init__(self) -> None:
        _check(self.tol is None or (_finite(self.tol) and self.tol > 0), "tol", "> 0 or None", self.tol)
        _check(
            self.max_iter is None or (_is_int(self.max_iter) and self.max_iter >= 1),
            "max_iter",
            "an integer >= 1 or None",
            self.max_iter,
        )
        _check(self.ansatz is None or self.ansatz in ANSATZE, "ansatz", f"None or one of {ANSATZE}", self.ansatz)
        _check(
            self.threads is None or (_is_int(self.threads) and self.threads >= 1),
            "threads",
            "None or an integer >= 1",
            self.threads,
        )
        _check(_finite(self.damping) and 0 < self.damping <= 1, "damping", "in (0, 1]", self.damping)
        _check(
            self.n_points is None or (_is_int(self.n_points) and self.n_points >= 16),
            "n_points",
            "an integer >= 16 or None",
            self.n_points,
        )
        _check(_is_int(self.sample_dim) and self.sample_dim >= 4, "sample_dim", "an integer >= 4", self.sample_dim)
        _check(
            self.sample_draws is None or (_is_int(self.sample_draws) and self.sample_draws >= 1),
            "sample_draws",
            "an integer >= 1 or None",
            self.sample_draws,
        )
        _check(
            self.sample_extrapolate is None or isinstance(self.sample_extrapolate, bool),
            "sample_extrapolate",
            "True, False or None",
            self.sample_extrapolate,
        )
        _check(
            not self.sample_extrapolate or self.sample_dim >= 8,
            "sample_dim",
            "an integer >= 8 with sample_extrapolate (its half is the coarse size)",
            self.sample_dim,
        )
        _check(
            self.sample_seed is None or (_is_int(self.sample_seed) and self.sample_seed >= 0),
            "sample_seed",
            "an integer >= 0 or None",
            self.sample_seed,
        )
        _check(isinstance(self.draw_errors, bool), "draw_errors", "True or False", self.draw_errors)
        _check(_is_int(self.n_scrambles) and self.n_scrambles >= 1, "n_scrambles", "an integer >= 1", self.n_scrambles)
        _check(_is_int(self.node_seed) and self.node_seed >= 0, "node_seed", "an integer >= 0", self.node_seed)
        _check(_is_int(self.draws) and self.draws >= 1, "draws", "an integer >= 1", self.draws)
        _check(self.method in SE_METHODS, "method", f"one of {SE_METHODS}", self.method)
        _check(self.prox_branch in PROX_BRANCHES, "prox_branch", f"one of {PROX_BRANCHES}", self.prox_branch)
        _check(isinstance(self.exact_jacobian, bool), "exact_jacobian", "True or False", self.exact_jacobian)
        _check(_is_int(self.max_evals) and self.max_evals >= 1, "max_evals", "an integer >= 1", self.max_evals)

    def flat(self) -> dict[str, Any]:
        """Every setting by its keyword name, the tuning constants included (``SEOptions(**o.flat()) == o``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "tuning"}
        out.update({name: getattr(self.tuning, name) for name in TUNING_FIELDS})
        return out

    @property
    def instance_seed(self) -> int:
        """The seed a sampled prior side's instances are drawn with: ``sample_seed``, or ``node_seed`` if it is
        ``None``."""
        return self.node_seed if self.sample_seed is None else self.sample_seed

    def replace(self, **changes: Any) -> SEOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def resolved(self, defaults: dict[str, Any]) -> SEOptions:
        """A copy with the fields that are ``None`` and named in ``defaults`` (a model's) set to their value."""
        changes = {k: v for k, v in defaults.items() if getattr(self, k) is None}
        return self.replace(**changes) if changes else self

    def refuse(self, allowed: Any, model: str, why: str) -> None:
        """Raise ``ValueError`` naming the first option (a field or a tuning constant) set away from its default
        that is not in ``allowed``: it does not apply to ``model`` (``why`` says what the model takes instead)."""
        default = SEOptions().flat()
        for name, value in self.flat().items():
            if name not in allowed and value != default[name]:
                raise ValueError(
                    f"options.{name} does not apply to the {model}: {why} (got {value!r}; leave it "
                    f"at {default[name]!r})"
                )

    def quick_attempt(self) -> SEOptions:
        """The settings of the quick first attempt from a warm start (see ``Tuning.quick_*``)."""
        t = self.tuning
        return self.replace(
            max_evals=min(self.max_evals, t.quick_max_evals),
            continuation=False,
            fallback_iter=min(t.fallback_iter, t.quick_max_iter),
            union_max_evals=t.quick_union_max_evals,
        )

    def thinned(self, quad: OutputQuadrature | None) -> OutputQuadrature | None:
        """``quad`` thinned by ``thin_factor``: the first nodes of each scramble (at least one)."""
        if quad is None:
            return None
        return OutputQuadrature(quad.nodes[:, : max(1, quad.nodes.shape[1] // self.tuning.thin_factor)], quad.seed)

    def points(self, problem: Problem) -> int:
        """Sobol nodes per scramble for ``problem``: ``n_points``, or the student's default when it is ``None``.

        The default is the student's ``quadrature_points`` up to the fields of ``T = 8``; for longer sequences it
        shrinks in proportion to the fields per sequence (``fields`` ``K``), rounded down to a power of two and at
        least ``MIN_LONG_POINTS``: the output-side averages are sums over ``K`` weakly dependent fields, so their
        quadrature error is set by ``nodes x K`` (measured in ``benchmarks/bench_long_sequences.py``), and the cost
        and memory of a point grow with it. A point that stalls at its quadrature floor is refined (4x the nodes).
        """
        base = self.points_for(problem.student)
        if self.n_points is not None:
            return base
        fields = sum(b.size(problem.T) for b in problem.student.field_blocks())
        ref = sum(b.size(LONG_SEQUENCE_T) for b in problem.student.field_blocks())
        if fields <= ref:
            return base
        return max(MIN_LONG_POINTS, 2 ** int(math.floor(math.log2(base * ref / fields))))

    def points_for(self, student: Any) -> int:
        """Sobol nodes per scramble for ``student``: ``n_points``, or the student's ``quadrature_points``."""
        return int(self.n_points) if self.n_points is not None else int(student.quadrature_points)

    def quadrature(self, problem: Problem) -> OutputQuadrature | None:
        """The output-side node set for ``problem`` (``None`` for the closed-form linear channel).

        Its dimension is twice the student's fields per sequence (teacher and student field of each)."""
        if not problem.channel.needs_quadrature:
            return None
        fields = sum(b.size(problem.T) for b in problem.student.field_blocks())
        return OutputQuadrature.sobol(2 * fields, self.points(problem), self.n_scrambles, self.node_seed)


#: options of a sampled prior side (non-symmetric students only)
_SAMPLED_PRIOR_OPTIONS = ("sample_dim", "sample_draws", "sample_extrapolate", "sample_seed", "draw_errors")


def check_symmetric_options(options: SEOptions, student: Any) -> None:
    """Raise ``ValueError`` naming an option of the sampled prior side set away from its default for a
    symmetric student, whose prior side is exact (free probability or a finite-``d`` spectrum).

    Examples
    --------
    >>> from singlehead.model.students import get_student
    >>> check_symmetric_options(SEOptions(), get_student("factorized"))  # defaults: nothing to refuse
    >>> check_symmetric_options(SEOptions(sample_dim=50), get_student("factorized"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: options.sample_dim does not apply to the factorized student: ...
    """
    defaults = SEOptions()
    for name in _SAMPLED_PRIOR_OPTIONS:
        if getattr(options, name) != getattr(defaults, name):
            raise ValueError(
                f"options.{name} does not apply to the {student.name} student: its prior side is "
                f"computed from the target's spectral law, not from sampled instances "
                f"(got {getattr(options, name)!r})"
            )


@dataclass(frozen=True)
class WarmStart:
    """Where a solve may start: a fixed point ``(q, m, Sigma)``, the root finder's Jacobian there,
    and the prox branches (the end points of each Newton start, one ``(R N, K)`` array per
    branch, on the same quadrature nodes) that the output side tracks.

    :func:`~singlehead.theory_curve` passes one from each converged point to the next; the branches make the
    first SE map evaluation of the next point a warm one (a cold one runs Newton from scratch), and
    the tangent ``du_dlog_alpha`` predicts where the next point's fixed point lies.

    Examples
    --------
    >>> from singlehead import Problem, theory
    >>> from singlehead.state_evolution import WarmStart
    >>> first = theory(Problem(T=2, alpha=1.0, noise=0.5))
    >>> start = WarmStart(x=(first["q"], first["m"], first["Sigma"]))
    >>> theory(Problem(T=2, alpha=1.1, noise=0.5), init=start).converged
    True
    """

    x: tuple[float, float, float]
    jacobian: np.ndarray | None = None
    branches: tuple[np.ndarray, ...] | None = None
    #: ``du/dlog alpha`` at ``x``, ``u = (log q, atanh(m/sqrt(Q0 q)), log Sigma)``: the fixed point's
    #: tangent along ``alpha`` (from the exact Jacobian), for the predictor of an ``alpha`` sweep
    du_dlog_alpha: np.ndarray | None = None
    #: the branches of the ``Sigmahat`` control variate's prox at small ``q`` (``OutputSide.branches_cv``)
    branches_cv: tuple[np.ndarray, ...] | None = None
    #: a sampled block prior side's estimators at ``x`` (non-symmetric students): the next point's prior side
    #: starts its iterative solves from them (a start only: any array of the instances' shape is valid)
    prior_solutions: Any = None
