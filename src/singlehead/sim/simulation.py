"""``simulate(problem, seed, options=TrainOptions(...))``: draw a task, train a student by ERM,
measure the metrics of the docs (Theory, :ref:`theory-metrics`).

The returned :class:`~singlehead.model.results.Result` has the same metric fields as
``theory(problem)``, so theory and simulation line up field by field. The solver settings
(optimizer, precision, step cap, tolerance, test-set size, recording of the training
trajectory, ...) form one frozen, validated :class:`TrainOptions`.

Seeds: one integer ``seed`` per run is split (numpy ``SeedSequence``) into independent
streams for the target ``S0``, the training set, the test set and the initialisation.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from singlehead import __version__
from singlehead.model.attention_layers import DirectStudent, FixedMatrix, MultiHeadStudent, init_multihead, predict
from singlehead.model.channels import Channel, get_channel, squared_error
from singlehead.model.problem import Problem
from singlehead.model.results import Result
from singlehead.model.students import init_student
from singlehead.sim.data import Sequences, child_seeds, generator, sample_sequences, sample_teacher
from singlehead.sim.overlaps import head_overlaps, overlaps, spectrum_summary
from singlehead.sim.training import FitInfo, Objective, fit_adam, fit_lbfgs

OPTIMIZERS = ("lbfgs", "adam")
PRECISIONS = ("float64", "float32", "mixed")


def resolve_device(device: str | torch.device) -> torch.device:
    """Validate a device string; raises ``ValueError`` naming the valid choices."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]' (got {device!r})") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but CUDA is not available here; valid: cpu")
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:N]' (got {device!r})")
    return dev


def default_dtype(device: torch.device) -> torch.dtype:
    """float64 on CPU (reference precision), float32 on GPU (speed)."""
    return torch.float64 if device.type == "cpu" else torch.float32


def default_precision(device: torch.device | str) -> str:
    """Precision policy used when :attr:`TrainOptions.precision` is ``None``.

    ``"mixed"`` on CPU: float32 training, float64 polish. Verified against float64 training
    (L-BFGS on seq2lab d=100 T=2, seq2seq d=60 T=3, linear d=60 T=1 power law,
    4 seeds each, and Adam on seq2lab d=50, 3 seeds): test errors equal to within 0.003
    standard errors, objectives within 2e-7 (L-BFGS); about twice as fast on CPU.
    ``"float32"`` on GPU (unchanged; not yet verified there).
    """
    return "mixed" if torch.device(device).type == "cpu" else "float32"


def _check(cond: bool, name: str, valid: str, value: Any) -> None:
    if not cond:
        raise ValueError(f"{name} must be {valid} (got {value!r})")


def _int_or_none(x: Any, lo: int) -> bool:
    return x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= lo)


def _pos_float(x: Any) -> bool:
    try:
        return math.isfinite(float(x)) and float(x) > 0
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class TrainOptions:
    """Solver settings of :func:`~singlehead.simulate` (frozen; every field validated on construction).

    Parameters
    ----------
    optimizer : {"lbfgs", "adam"}
        L-BFGS (default) or the paper's full-batch Adam protocol (arXiv 2509.24914 App.).
    precision : {"float64", "float32", "mixed"} or None
        ``float64`` / ``float32``: train and measure in that dtype. ``mixed``: train in
        float32, then polish in float64 by L-BFGS (keeping the curvature pairs of an
        L-BFGS fit) until the relative objective change per iteration is below
        ``polish_rtol``; the student is measured in float64. ``None``: mixed on CPU,
        float32 on GPU (``default_precision``).
    max_steps : int or None
        Optimiser iteration cap (``None``: 5000 L-BFGS, 20000 Adam).
    tol : float or None
        Relative objective change that stops the optimiser (``None``: per L-BFGS iteration
        1e-9 in float64 and 1e-7 in float32, the float32 phase of ``mixed`` included, where a
        smaller change is below float32 resolution and only adds iterations before the
        float64 polish; 1e-7 per Adam step averaged over a 50-step window).
    polish_rtol : float
        Stopping tolerance of the float64 polish of ``mixed`` (relative objective change per
        iteration; 3e-8 leaves the objective within ~3e-7 of a float64 fit's).
    lr : float
        Adam learning rate (0.1, the paper's).
    batch_size : int or None
        Stream the training set to the device in chunks of this many sequences.
    n_test : int
        Fresh test sequences (>= 2) for the test errors and their standard errors.
    rank_tol : float
        Eigenvalues of ``S`` with ``|eig| <= rank_tol`` count as zero (eigenvalues are O(1)).
    record_every : int or None
        Record the trajectory every this many optimiser iterations (Adam steps / L-BFGS
        iterations): train and test error, objective and the top eigenvalues of ``S``
        (``extras["trajectory"]``). ``None``: no recording.
    record_top : int
        Number of top eigenvalues of ``S`` recorded.
    init_scale : float
        Scale of the initial weights (1: the paper's N(0, 1) ``W``; small values start near
        ``S = 0`` and make Adam learn the target's directions one after another).
    n_starts : int
        Independent initialisations of the student on the same data (>= 1). Where ERM is
        non-convex (the untied student, a rank cap, the softmax channels) the fit with the lowest
        training objective is kept; the first start is the single-start fit's (same seed). Not
        combinable with ``record_every``. :func:`~singlehead.simulate` reports every start's
        objective and test error (``start_objectives``, ``start_test_errors``), their spreads
        (``objective_spread``, ``test_error_spread``: largest minus smallest) and ``best_start``.
    """

    optimizer: str = "lbfgs"
    precision: str | None = None
    max_steps: int | None = None
    tol: float | None = None
    polish_rtol: float = 3e-8
    lr: float = 0.1
    batch_size: int | None = None
    n_test: int = 10000
    rank_tol: float = 1e-3
    record_every: int | None = None
    record_top: int = 10
    init_scale: float = 1.0
    n_starts: int = 1

    def __post_init__(self) -> None:
        _check(self.optimizer in OPTIMIZERS, "optimizer", f"one of {OPTIMIZERS}", self.optimizer)
        _check(
            self.precision is None or self.precision in PRECISIONS,
            "precision",
            f"one of {PRECISIONS} or None",
            self.precision,
        )
        _check(_int_or_none(self.max_steps, 1), "max_steps", "an integer >= 1 or None", self.max_steps)
        _check(self.tol is None or _pos_float(self.tol), "tol", "> 0 or None", self.tol)
        _check(_pos_float(self.polish_rtol), "polish_rtol", "> 0", self.polish_rtol)
        _check(_pos_float(self.lr), "lr", "> 0", self.lr)
        _check(_int_or_none(self.batch_size, 1), "batch_size", "an integer >= 1 or None", self.batch_size)
        _check(_int_or_none(self.n_test, 2) and self.n_test is not None, "n_test", "an integer >= 2", self.n_test)
        _check(_finite_nonneg(self.rank_tol), "rank_tol", ">= 0", self.rank_tol)
        _check(_int_or_none(self.record_every, 1), "record_every", "an integer >= 1 or None", self.record_every)
        _check(
            _int_or_none(self.record_top, 1) and self.record_top is not None,
            "record_top",
            "an integer >= 1",
            self.record_top,
        )
        _check(_pos_float(self.init_scale), "init_scale", "> 0", self.init_scale)
        _check(
            _int_or_none(self.n_starts, 1) and self.n_starts is not None, "n_starts", "an integer >= 1", self.n_starts
        )
        _check(
            self.n_starts == 1 or self.record_every is None,
            "record_every",
            "None when n_starts > 1 (a trajectory is one fit's)",
            self.record_every,
        )

    def replace(self, **changes: Any) -> TrainOptions:
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def resolved(self, device: torch.device | str = "cpu") -> TrainOptions:
        """A copy with ``precision`` resolved for ``device`` and ``tol`` for the optimiser and
        precision (never ``None``; the defaults are listed under ``tol``)."""
        o = self if self.precision is not None else self.replace(precision=default_precision(device))
        if o.tol is None:
            o = o.replace(tol=1e-7 if o.optimizer == "adam" or o.precision != "float64" else 1e-9)
        return o

    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON form; ``TrainOptions(**o.to_dict()) == o``."""
        return dataclasses.asdict(self)

    def key_fields(self, device: torch.device | str = "cpu") -> dict[str, Any]:
        """Everything that identifies a run's result: all fields, the precision resolved for
        ``device``, and the device type (``"cpu"`` / ``"cuda"``). Hash this with the problem
        and the seed for a cache key."""
        dev = torch.device(device)
        fields = self.resolved(dev).to_dict()
        if fields["n_starts"] == 1:
            del fields["n_starts"]  # one start is the fit these keys always described
        return {**fields, "device": dev.type}


def _finite_nonneg(x: Any) -> bool:
    try:
        return math.isfinite(float(x)) and float(x) >= 0
    except (TypeError, ValueError):
        return False


@torch.no_grad()
def evaluate(
    student: torch.nn.Module, data: Sequences, channel: Channel | str, beta: float, batch_size: int = 8192
) -> tuple[float, float, float, float]:
    """Mean and standard error of ``||yhat - y||_F^2`` per sequence, against noiseless and noisy labels.

    Returns ``(err_clean, se_clean, err_noisy, se_noisy)``.
    """
    param = next(student.parameters())
    channel = get_channel(channel)
    clean, noisy = [], []
    for i in range(0, len(data), batch_size):
        X = data.X[i : i + batch_size].to(param.device, param.dtype)
        yhat = predict(student, channel, beta, X)
        clean.append(squared_error(yhat, data.y_clean[i : i + batch_size].to(param.device, param.dtype)).double().cpu())
        noisy.append(squared_error(yhat, data.y[i : i + batch_size].to(param.device, param.dtype)).double().cpu())
    c, z = torch.cat(clean).numpy(), torch.cat(noisy).numpy()
    n = len(c)
    return (
        float(c.mean()),
        float(c.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
        float(z.mean()),
        float(z.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan,
    )


def measure_estimate(
    problem: Problem,
    S: np.ndarray,
    S0: np.ndarray,
    train: Sequences,
    test: Sequences,
    *,
    rank_tol: float = 1e-3,
    student: torch.nn.Module | None = None,
) -> tuple[dict[str, float], dict[str, Any]]:
    """The metrics (docs: Theory, :ref:`theory-metrics`) of an estimate ``S`` of ``S0``, shared by every route on
    instances.

    Returns ``(metrics, extras)``: ``metrics`` are the :class:`Result` metric fields
    (test errors on ``test``, train error against the noisy labels of ``train``, penalty,
    matrix error ``||S - S0||_F^2/d``, rank fraction); ``extras`` the spectrum summary
    (eigenvalues of a symmetric student's ``S``, singular values otherwise), the overlaps of
    ``singlehead.sim.overlaps.overlaps`` (``q = ||S||_F^2/d``, ``m = <S, S0>/d``,
    ``Q0 = ||S0||_F^2/d``, their symmetric/antisymmetric split ``q_s, q_a, m_s, m_a`` and the
    asymmetry ``||S - S^T||_F/||S||_F``) and the standard errors of the test errors. ``student``
    (the trained module) is used for the predictions when given, else ``S`` itself.

    With several heads (``problem.heads``, ``problem.teacher_heads``) ``S`` and ``S0`` are the means over
    heads ``S_eff = (1/H) sum_h S_h`` and ``S0_eff = (1/H0) sum_k S0_k``, ``student`` the multi-head
    module, and the penalty is ``lam sum_h Tr S_h/d = H lam Tr S_eff/d`` (the regulariser over ``d^2``).
    """
    symmetric = problem.student.symmetric
    if symmetric:
        # symmetric by construction (W W^T/sqrt(pd), or a symmetrised S); a GEMM's rounding can still leave
        # ~1e-17 relative asymmetry (seen with some BLAS kernels), which would show up as a nonzero q_a
        S = 0.5 * (S + S.T)
    if student is None:
        S_t = torch.as_tensor(S, dtype=torch.float64)
        student = DirectStudent(S_t) if symmetric else FixedMatrix(S_t)
    # The training loss is against the noisy labels: the third number evaluate() returns.
    _, _, train_err, _ = evaluate(student, train, problem.channel, problem.beta)
    te, te_se, ten, ten_se = evaluate(student, test, problem.channel, problem.beta)
    d = problem.d
    spec = spectrum_summary(S, rank_tol, symmetric)
    penalty = problem.heads * problem.student.penalty(problem.lam, S)
    metrics = {
        "test_error": te,
        "test_error_noisy": ten,
        "train_error": train_err,
        "penalty": penalty,
        "matrix_error": float(np.sum((S - S0) ** 2) / d),
        "rank_fraction": spec["rank"] / d,
    }
    extras = {**spec, **overlaps(S, S0), "test_error_se": te_se, "test_error_noisy_se": ten_se}
    return metrics, extras


class _Recorder:
    """Trajectory of a fit, recorded every ``every`` optimiser iterations (train/test error,
    objective, penalty and the top eigenvalues of ``S``, or singular values for a student whose
    matrix is not symmetric: key ``top_singular_values``)."""

    def __init__(
        self, problem: Problem, student: torch.nn.Module | None, train: Sequences, test: Sequences, top: int
    ) -> None:
        self.problem, self.student, self.train, self.test, self.top = problem, student, train, test, top
        self.top_key = "top_eigenvalues" if problem.student.symmetric else "top_singular_values"
        self.rows: dict[str, list] = {
            "step": [],
            "objective": [],
            "train_error": [],
            "test_error": [],
            "test_error_se": [],
            "penalty": [],
            self.top_key: [],
        }
        self.t0 = time.perf_counter()
        self.rows["time_s"] = []

    def __call__(self, step: int, objective: float) -> None:
        p = self.problem
        _, _, train_err, _ = evaluate(self.student, self.train, p.channel, p.beta)
        te, te_se, _, _ = evaluate(self.student, self.test, p.channel, p.beta)
        with torch.no_grad():
            S = self.student.matrix().detach().to("cpu", torch.float64)
        values = torch.linalg.eigvalsh(S).flip(0) if p.student.symmetric else torch.linalg.svdvals(S)
        eig = values[: self.top].tolist()
        penalty = p.heads * p.student.penalty(p.lam, S.numpy())
        for k, v in (
            ("step", int(step)),
            ("objective", float(objective)),
            ("train_error", train_err),
            ("test_error", te),
            ("test_error_se", te_se),
            ("penalty", penalty),
            (self.top_key, eig),
            ("time_s", time.perf_counter() - self.t0),
        ):
            self.rows[k].append(v)


def _fit(
    student: torch.nn.Module,
    objective: Objective,
    opts: TrainOptions,
    hook: Callable[[int, float], None] | None,
    every: int,
    polish: torch.dtype | None,
) -> FitInfo:
    """Run the optimiser of ``opts`` (then, for Adam, an L-BFGS polish in ``polish``); ``hook``
    is called every ``every`` iterations, counted across the polish."""
    kw: dict[str, Any] = {"callback": hook, "callback_every": every}
    if opts.max_steps is not None:
        kw["max_steps"] = opts.max_steps
    if opts.optimizer != "adam":
        return fit_lbfgs(student, objective, polish_dtype=polish, polish_rtol=opts.polish_rtol, rtol=opts.tol, **kw)
    info = fit_adam(student, objective, lr=opts.lr, tol=opts.tol, **kw)  # tol resolved by opts.resolved
    if polish is None:
        return info
    done = info.steps
    sub = {**kw, "callback": (lambda s, v: hook(done + s, v)) if hook else None}
    student.to(polish)
    pol = fit_lbfgs(student, objective, rtol=opts.polish_rtol, **sub)
    return FitInfo(
        "adam",
        info.steps + pol.steps,
        info.converged and pol.converged,
        pol.objective,
        info.history + pol.history,
        pol.steps,
    )


def _fit_message(info: FitInfo) -> str:
    if info.converged:
        return f"{info.optimizer}: stopping rule fired after {info.steps} steps"
    return f"{info.optimizer}: step budget exhausted ({info.steps} steps) before the stopping rule fired"


def simulate(
    problem: Problem,
    seed: int = 0,
    *,
    options: TrainOptions | None = None,
    device: str | torch.device = "cpu",
    return_matrices: bool = False,
    callback: Callable[[int, float], None] | None = None,
) -> Result:
    """Train one student on one draw of the task and measure it.

    Parameters
    ----------
    problem : Problem
        Task, student and regularisation; its training set must hold ``n = round(alpha d^2) >= 1`` sequences
        (:meth:`~singlehead.Problem.check_training_set`: ``ValueError`` naming ``alpha`` and ``d``).
    seed : int
        Master seed (target, training set, test set and initialisation are derived from it).
    options : TrainOptions, optional
        Solver settings (default ``TrainOptions()``: L-BFGS, mixed precision on CPU).
    device : str
        ``"cpu"`` or ``"cuda[:N]"``. Data are drawn on the CPU, so results agree across devices
        up to floating-point precision.
    return_matrices : bool
        Add ``S`` and ``S0`` (numpy) to the extras.
    callback : callable, optional
        ``callback(iteration, objective)`` after each optimiser iteration.

    Returns
    -------
    Result
        ``source="simulation"``; extras: ``eigenvalues`` (``singular_values`` for a student whose
        matrix is not symmetric), ``rank``, ``zero_fraction``, ``objective`` (``L/n``), ``q``, ``m``,
        ``Q0`` (``||S||_F^2/d``, ``<S, S0>/d``, ``||S0||_F^2/d``), ``q_s``, ``q_a``, ``m_s``, ``m_a``,
        ``asymmetry`` (``singlehead.sim.overlaps.overlaps``),
        standard errors of the test errors, ``optimizer``, ``polish_steps``, ``seed``, ``version``,
        ``device``, ``dtype`` (of the measured student), ``precision``, ``options``
        (:meth:`~singlehead.sim.simulation.TrainOptions.key_fields`), and with ``record_every`` the ``trajectory``
        (lists keyed
        by ``step``, ``objective``, ``train_error``, ``test_error``, ``test_error_se``, ``penalty``,
        ``top_eigenvalues``, ``time_s``); standard fields ``converged``, ``iterations`` (optimiser
        steps, polish included), ``runtime_s``, ``message``.

        Several heads (``problem.heads`` or ``problem.teacher_heads`` above 1): every metric and overlap
        above is of the means ``S_eff = (1/H) sum_h S_h`` and ``S0_eff = (1/H0) sum_k S0_k`` (the penalty
        is ``lam sum_h Tr S_h/d``), and the extras add the matched per-head overlaps ``head_Q``
        (``H x H``, ``Tr(S_h S_h')/d``), ``head_M`` (``H x H0``, ``Tr(S_h S0_k)/d``), ``head_Q0``
        (``H0 x H0``) and the matching ``head_order``, ``teacher_head_order``
        (:func:`singlehead.sim.overlaps.head_overlaps`); with ``return_matrices`` also ``S_heads`` and
        ``S0_heads`` (``S`` and ``S0`` are the means).

    Examples
    --------
    >>> from singlehead import Problem, simulate
    >>> run = simulate(Problem(d=30, T=2, alpha=1.0, noise=0.5), seed=0)
    >>> run.converged, 0.0 < run.test_error < 0.1
    (True, True)
    """
    problem.check_training_set()
    opts = options or TrainOptions()
    dev = resolve_device(device)
    opts = opts.resolved(dev)
    train_dtype = torch.float64 if opts.precision == "float64" else torch.float32
    final_dtype = torch.float32 if opts.precision == "float32" else torch.float64
    t0 = time.perf_counter()
    s_target, s_train, s_test, s_init = child_seeds(seed, 4)
    S0 = sample_teacher(problem, s_target)  # (H0, d, d) with several teacher heads
    train = sample_sequences(problem, S0, problem.n, s_train)
    test = sample_sequences(problem, S0, opts.n_test, s_test)
    if opts.batch_size is None:
        train = train.to(dev, final_dtype)
    objective = Objective(train, problem.channel, problem.beta, problem.lam, batch_size=opts.batch_size)
    # the first start is the single-start fit's initialisation; the others have seeds of their own
    init_seeds = [s_init] + (list(child_seeds(s_init, opts.n_starts)[1:]) if opts.n_starts > 1 else [])

    recorder = None
    if opts.record_every is not None:
        recorder = _Recorder(problem, None, train, test, opts.record_top)  # its student: set per start below

    def hook(step: int, val: float) -> None:
        if recorder is not None and step % opts.record_every == 0:
            recorder(step, val)
        if callback is not None:
            callback(step, val)

    every = 1 if callback is not None else (opts.record_every or 1)
    fits = []
    for s_k in init_seeds:
        if problem.heads > 1:
            student_k = init_multihead(
                problem.heads, problem.d, problem.p, generator(s_k), train_dtype, dev, scale=opts.init_scale
            )
        else:
            student_k = init_student(
                problem.student, problem.d, problem.p, generator(s_k), train_dtype, dev, scale=opts.init_scale
            )
        if recorder is not None:
            recorder.student = student_k
        info_k = _fit(
            student_k,
            objective,
            opts,
            hook if (callback or recorder) else None,
            every,
            final_dtype if final_dtype != train_dtype else None,
        )
        fits.append((info_k, student_k))
    best = min(range(len(fits)), key=lambda k: fits[k][0].objective)
    info, student = fits[best]
    if recorder is not None and (not recorder.rows["step"] or recorder.rows["step"][-1] != info.steps):
        recorder(info.steps, info.objective)

    with torch.no_grad():
        S_np = student.matrix().detach().to("cpu", torch.float64).numpy()
    S0_np = S0.numpy()
    heads: dict[str, Any] = {}
    if problem.multihead:
        with torch.no_grad():
            S_heads = (
                (student.head_matrices() if isinstance(student, MultiHeadStudent) else student.matrix()[None])
                .detach()
                .to("cpu", torch.float64)
                .numpy()
            )
        S0_heads = S0_np if S0_np.ndim == 3 else S0_np[None]
        heads = head_overlaps(S_heads, S0_heads)
        if return_matrices:
            heads.update(S_heads=S_heads, S0_heads=S0_heads)
        S0_np = S0_heads.mean(axis=0)
    metrics, common = measure_estimate(problem, S_np, S0_np, train, test, rank_tol=opts.rank_tol, student=student)
    extras: dict[str, Any] = {
        **common,
        "objective": info.objective,
        "optimizer": info.optimizer,
        "polish_steps": info.polish_steps,
        "seed": int(seed),
        "version": __version__,
        "device": str(dev),
        "dtype": str(next(student.parameters()).dtype).replace("torch.", ""),
        "precision": opts.precision,
        "options": opts.key_fields(dev),
        "n": problem.n,
        "n_test": opts.n_test,
    }
    extras.update({} if recorder is None else {"trajectory": recorder.rows})
    if opts.n_starts > 1:
        objs = [f[0].objective for f in fits]
        # each start's test error on the same test set (the kept start's is ``test_error``)
        errs = [
            metrics["test_error"] if k == best else evaluate(f[1], test, problem.channel, problem.beta)[0]
            for k, f in enumerate(fits)
        ]
        extras.update(
            start_objectives=objs,
            best_start=int(best),
            objective_spread=float(max(objs) - min(objs)),
            start_test_errors=errs,
            test_error_spread=float(max(errs) - min(errs)),
        )
    extras.update(heads)
    extras.update({"S": S_np, "S0": S0_np} if return_matrices else {})
    return Result(
        "simulation",
        problem.to_dict(),
        **metrics,
        converged=bool(info.converged),
        iterations=int(info.steps),
        runtime_s=time.perf_counter() - t0,
        message=_fit_message(info),
        extras=extras,
    )
