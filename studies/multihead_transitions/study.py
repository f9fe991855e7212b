"""Multi-head attention: where the heads specialise, against lam and H != H0, and ERM at three sizes (README.md).

Parts, each cached point by point in the result cache (an interrupted run resumes):

* ``theory`` -- seq2lab, ``T = 2``, MP teachers ``kappa0 = 0.5``, noise 0.5. ``H = H0 = 2`` at
  ``lam = 1e-3, 1e-2, 0.1, 1``: on an ``alpha`` grid the unspecialised fixed point (followed up in ``alpha``), the
  specialised one (followed down from a strongly specialised start at the largest ``alpha``), and the
  specialisation eigenvalue of the unspecialised point (``specialisation_eigenvalue``, ``eps = 0.02``); then
  bisection of the two transitions (objective crossing, eigenvalue crossing 1) between the grid points that bracket
  them. ``H != H0`` (``(2, 3), (3, 2), (2, 1)``, ``lam = 1e-2``): the symmetric fixed point (every student head
  alike, ``M = m 11^T``; the library's general ansatz projected onto that subspace after every evaluation), the
  general ansatz from a symmetry-broken start followed down in ``alpha``, and the largest eigenvalue of the map's
  Jacobian at the symmetric point in the symmetry-breaking directions (central differences).
  With ``--only 2,2,0.01`` also the checks: the full breaking Jacobian of the unspecialised point against
  ``specialisation_eigenvalue``, the general ansatz started along its leading mode ("escape") and that fixed point
  followed in ``alpha``, and both ansaetze on other prior draws and nodes.
* ``erm`` -- ``H = H0 = 2``, ``lam = 1e-2``: multi-start L-BFGS (float64, 3 starts, the lowest objective kept) at
  ``d = 20, 30, 40`` on both sides of the transitions; per task the matched per-head overlaps and the
  specialisation index.
* ``tables`` (default) -- ``results/`` rewritten from what is cached.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from pathlib import Path

import numpy as np

from singlehead import MPTarget, Problem, SEOptions, TrainOptions, simulate
from singlehead.runs import Cache, cached, reference_seconds
from singlehead.state_evolution.multihead_se import (
    MultiHeadSEMap,
    default_start,
    match_heads,
    multihead_options,
    multihead_theory,
    project,
    solve_multihead,
    specialisation_eigenvalue,
    specialisation_index,
)
from studies import study_parser

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
KAPPA0, NOISE, T = 0.5, 0.5, 2

#: ERM: the transition checked, its alphas and sizes (``d: seeds``)
ERM_LAM = 1e-2
ERM_ALPHAS = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5)
ERM_SIZES = {20: 8, 30: 6, 40: 4}
#: further seeds around the jump (``d: seeds`` in all, at these alphas)
ERM_MORE_ALPHAS, ERM_MORE = (0.75, 1.0, 1.25, 1.5, 1.75, 2.0), {30: 10, 40: 8}
ERM_STARTS = 3


def problem_for(H: int, H0: int, lam: float, alpha: float, d: int = 100) -> Problem:
    return Problem(
        d=d,
        T=T,
        channel="seq2lab",
        alpha=alpha,
        noise=NOISE,
        lam=lam,
        target=MPTarget(kappa0=KAPPA0),
        heads=H,
        teacher_heads=H0,
    )


def asym_index(M: np.ndarray, Q0: np.ndarray) -> float:
    """The heads' symmetry breaking: ``||M - mean(M)||_F`` over ``||Q0 - mean(Q0)||_F`` (``H0 >= 2``), or over
    ``sqrt(H) mean(M)`` with one teacher head. Equals ``|specialisation_index|`` for ``M = a I + b 11^T``."""
    M, Q0 = np.asarray(M, float), np.asarray(Q0, float)
    num = float(np.linalg.norm(M - M.mean()))
    if Q0.shape[0] >= 2:
        return num / float(np.linalg.norm(Q0 - Q0.mean()))
    return num / (math.sqrt(M.shape[0]) * float(M.mean()))


# ---- ERM ------------------------------------------------------------------------------------------------------


def erm_task(alpha: float, d: int, seed: int, lam: float = ERM_LAM) -> dict:
    t0 = time.perf_counter()
    r = simulate(
        problem_for(2, 2, lam, alpha, d=d),
        seed=seed,
        options=TrainOptions(optimizer="lbfgs", precision="float64", n_starts=ERM_STARTS),
    )
    M, Q0 = np.asarray(r.extras["head_M"], float), np.asarray(r.extras["head_Q0"], float)
    return dict(
        alpha=alpha,
        lam=lam,
        d=d,
        seed=seed,
        test=r.test_error,
        train=r.train_error,
        objective=r.train_error + r.penalty / alpha,
        converged=bool(r.converged),
        head_M=M.tolist(),
        head_Q=np.asarray(r.extras["head_Q"]).tolist(),
        head_Q0=Q0.tolist(),
        index=specialisation_index(M, Q0),
        seconds=time.perf_counter() - t0,
    )


def run_erm(
    store: Cache,
    alphas,
    sizes: dict[int, int],
    lam: float = ERM_LAM,
    run: bool = True,
    more: dict[int, int] | None = None,
    more_alphas=(),
) -> list[dict]:
    """ERM tasks: seeds ``0..sizes[d]-1`` at every alpha, then up to ``more[d]`` seeds at ``more_alphas``."""
    out = []
    plan = [(d, a, range(n)) for d, n in sizes.items() for a in alphas]
    plan += [(d, a, range(sizes.get(d, 0), n)) for d, n in (more or {}).items() for a in more_alphas]
    for d, a, seeds in plan:
        for s in seeds:
            spec = {
                "stage": "mht-erm",
                "H": 2,
                "H0": 2,
                "lam": lam,
                "alpha": a,
                "d": d,
                "seed": s,
                "starts": ERM_STARTS,
            }
            r = cached(store, spec, (lambda: erm_task(a, d, s, lam)) if run else None)
            if r is not None:
                out.append(r)
                if run:
                    print(
                        f"erm lam={lam:g} alpha={a} d={d} seed={s}: index {r['index']:.3f} test {r['test']:.4f} "
                        f"obj {r['objective']:.5f} {r['seconds']:.1f} s",
                        flush=True,
                    )
    return out


# ---- theory: H = H0 (library ansaetze and specialisation_eigenvalue) ----------------------------------------

#: the eigenvalue's perturbation sizes (the response is not linear on the scale of the map's own asymmetry)
EPS = (0.02, 0.05)
#: an H = H0 specialised solve counts as on the specialised branch when its index is above this
BRANCH_INDEX = 0.15
#: H = H0 = 2: the coarse grid, its extension when the transitions lie above it, and the bisection steps
GRID = (1.0, 1.5, 2.0, 2.5, 3.0)
GRID_MORE = (4.0, 5.0, 6.0)
BISECT = 2
LAMS = (1e-3, 1e-2, 1e-1, 1.0)
#: H != H0 at lam = 1e-2
UNEQUAL = ((2, 3), (3, 2), (2, 1))
UNEQUAL_GRID = (0.5, 1.0, 2.0, 3.0, 4.0)
UNEQUAL_LAM = 1e-2


def rounded(x: tuple | None) -> list | None:
    return None if x is None else [np.round(np.asarray(a, float), 8).tolist() for a in x]


def start_of(rec: dict | None) -> tuple | None:
    return None if rec is None else tuple(np.asarray(rec[k], float) for k in ("head_Q", "head_M", "head_Sigma"))


def summary(r) -> dict:
    e = r.extras
    M, Q0 = np.asarray(e["head_M"], float), np.asarray(e["head_Q0"], float)
    return dict(
        objective=float(e["objective"]),
        objective_se=float(e["objective_se"]),
        test=r.test_error,
        train=r.train_error,
        converged=bool(r.converged),
        iterations=r.iterations,
        seconds=r.runtime_s,
        index=specialisation_index(M, Q0) if M.shape == Q0.shape else math.nan,
        asym=asym_index(M, Q0),
        head_M=M.tolist(),
        head_Q=np.asarray(e["head_Q"]).tolist(),
        head_Sigma=np.asarray(e["head_Sigma"]).tolist(),
        head_Q0=Q0.tolist(),
    )


def se_equal(H: int, lam: float, alpha: float, ansatz: str, start: tuple | None, seed: int = 0) -> dict:
    """One fixed point of the ``H = H0`` state evolution in ``ansatz`` (from ``start``; ``None``: the generic one;
    ``seed``: the prior draws' and the nodes' seed); with ``ansatz="unspecialised"`` also the specialisation
    eigenvalue at it, for each of ``EPS``."""
    p = problem_for(H, H, lam, alpha)
    r = multihead_theory(p, SEOptions(ansatz=ansatz, sample_seed=seed, node_seed=seed), start=start)
    out = summary(r)
    if ansatz == "unspecialised":
        st = start_of(out)
        out["eigen"] = {}
        for eps in EPS:
            try:
                e = specialisation_eigenvalue(p, SEOptions(sample_seed=seed, node_seed=seed), start=st, eps=eps)
            except np.linalg.LinAlgError as exc:  # the perturbed overlaps leave the fields' covariance not PD
                out["eigen"][str(eps)] = dict(value=math.nan, error=f"{type(exc).__name__}: {exc}")
                continue
            out["eigen"][str(eps)] = dict(
                value=e["lambda"], gap_at_fixed_point=e["gap_at_fixed_point"], gap_in=list(e["gap_in"])
            )
    return out


# ---- theory: H != H0 (the symmetric point, its Jacobian in the symmetry-breaking directions) ---------------------


def sym_project(Q: np.ndarray, M: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Onto the subspace where every student head is alike and every teacher head too: ``Q``, ``Sigma`` of the
    form ``a I + b 11^T``, ``M = m 11^T`` (the library's unspecialised projection, for any ``H, H0``)."""
    Qs, _, Ss = project("unspecialised", Q, np.zeros((Q.shape[0], Q.shape[0])), S)
    return Qs, np.full_like(M, float(np.mean(M))), Ss


class SymmetricMap:
    """The library's map in its general ansatz followed by :func:`sym_project` (delegating everything else)."""

    def __init__(self, base: MultiHeadSEMap) -> None:
        self.base = base

    def __getattr__(self, name: str):
        return getattr(self.base, name)

    def __call__(self, Q, M, Sigma, ansatz, residual=None):
        new, out, pr = self.base(Q, M, Sigma, "general", residual=residual)
        new = sym_project(*new)
        last = self.base.last
        self.base.last = (new, last[1], last[2], sym_project(*last[3]))
        return new, out, pr


def pack(Q, M, S) -> np.ndarray:
    iu = np.triu_indices(Q.shape[0])
    return np.concatenate([Q[iu], M.ravel(), S[iu]])


def unpack(v: np.ndarray, H: int, H0: int) -> tuple:
    iu, n = np.triu_indices(H), H * (H + 1) // 2
    out = []
    for part in (v[:n], v[n + H * H0 :]):
        A = np.zeros((H, H))
        A[iu] = part
        out.append(A + np.triu(A, 1).T)
    return out[0], v[n : n + H * H0].reshape(H, H0), out[1]


def breaking_basis(H: int, H0: int) -> np.ndarray:
    """Orthonormal columns spanning the complement of the symmetric subspace in the packed ``(Q, M, Sigma)``."""
    dim = H * (H + 1) + H * H0
    P = np.stack([pack(*sym_project(*unpack(e, H, H0))) for e in np.eye(dim)], axis=1)
    U, s, _ = np.linalg.svd(np.eye(dim) - P)
    return U[:, s > 1e-8]


def group_average(J: np.ndarray, H: int, H0: int) -> np.ndarray:
    """The breaking Jacobian ``J`` (in :func:`breaking_basis`) averaged over the heads' symmetry group (every
    permutation of the student heads times every permutation of the teacher heads). The exact map commutes with that
    group; the sampled one does not (its nodes and draws), and the average removes that part of ``J``, so its
    eigenvectors fall into the group's irreducible subspaces."""
    B = breaking_basis(H, H0)
    dim = B.shape[0]
    Jf = B @ np.asarray(J, float) @ B.T
    acc = np.zeros_like(Jf)
    perms = [
        (np.eye(H)[list(a)], np.eye(H0)[list(b)])
        for a in itertools.permutations(range(H))
        for b in itertools.permutations(range(H0))
    ]
    for P, R in perms:
        G = np.stack(
            [pack(*(lambda Q, M, S: (P @ Q @ P.T, P @ M @ R.T, P @ S @ P.T))(*unpack(e, H, H0))) for e in np.eye(dim)],
            axis=1,
        )
        acc += G @ Jf @ G.T
    return B.T @ (acc / len(perms)) @ B


def lead_vector(J: np.ndarray, H: int, H0: int) -> np.ndarray:
    """The packed unit eigenvector of :func:`group_average` of ``J`` with the largest real eigenvalue."""
    w, V = np.linalg.eig(group_average(J, H, H0))
    v = breaking_basis(H, H0) @ V[:, int(np.argmax(w.real))].real
    return v / np.linalg.norm(v)


def modes(J: np.ndarray, H: int, H0: int) -> list[dict]:
    """Eigenvalues of :func:`group_average` of ``J`` (largest real part first), each with its eigenvector's
    shares (squared norms, summing to 1) in ``Q``, ``M``, ``Sigma``, and in the specialisation direction
    ``M = I - 11^T/H`` (``H = H0``; else ``nan``) and in the student-difference directions (the parts of the
    eigenvector that differ between student heads but are alike for every teacher head: head norms, ``Sigma``'s
    diagonal, ``M``'s row means)."""
    B = breaking_basis(H, H0)
    w, V = np.linalg.eig(group_average(J, H, H0))
    out = []
    n = H * (H + 1) // 2
    spec = None
    if H == H0:
        spec = pack(np.zeros((H, H)), np.eye(H) - np.ones((H, H)) / H, np.zeros((H, H)))
        spec /= np.linalg.norm(spec)
    for k in np.argsort(-w.real):
        v = B @ V[:, k].real
        v /= np.linalg.norm(v)
        Q, M, S = unpack(v, H, H0)
        stud = pack(np.diag(np.diag(Q)), np.repeat(M.mean(axis=1, keepdims=True), H0, axis=1), np.diag(np.diag(S)))
        stud = B @ (B.T @ stud)
        out.append(
            dict(
                value=float(w[k].real),
                imag=float(w[k].imag),
                Q=float(np.sum(v[:n] ** 2)),
                M=float(np.sum(v[n : n + H * H0] ** 2)),
                Sigma=float(np.sum(v[n + H * H0 :] ** 2)),
                specialisation=float(v @ spec) ** 2 if spec is not None else math.nan,
                student_difference=float(v @ stud) ** 2 / max(float(stud @ stud), 1e-300)
                if float(stud @ stud) > 1e-12
                else 0.0,
            )
        )
    return out


def solution_record(problem: Problem, se_map: MultiHeadSEMap, sol, t0: float) -> dict:
    """What :func:`multihead_theory` reports, for a solve of ``solve_multihead`` on ``se_map``."""
    from singlehead.state_evolution.multihead_se import multihead_test_errors

    Q, M, S, _ = match_heads(sol.Q, sol.M, sol.Sigma)
    te = multihead_test_errors(Q, M, problem=problem, Q0=se_map.Q0, quad=se_map.quad)
    penalty = problem.lam * float(np.sum(sol.prior.traces))
    tr = sol.prior.per_draw["traces"].sum(axis=1)
    pen_se = problem.lam * float(tr.std(ddof=1) / math.sqrt(tr.size))
    Q0 = se_map.Q0
    return dict(
        objective=sol.out.train_error + penalty / problem.alpha,
        objective_se=math.hypot(sol.out.err["train_error"], pen_se / problem.alpha),
        test=te["test_error"],
        train=sol.out.train_error,
        converged=bool(sol.converged),
        iterations=sol.evaluations,
        seconds=time.perf_counter() - t0,
        index=specialisation_index(M, Q0) if M.shape == Q0.shape else math.nan,
        asym=asym_index(M, Q0),
        head_M=M.tolist(),
        head_Q=Q.tolist(),
        head_Sigma=S.tolist(),
        head_Q0=Q0.tolist(),
    )


def se_symmetric(H: int, H0: int, lam: float, alpha: float, start: tuple | None, eps: float = EPS[0]) -> dict:
    """The symmetric fixed point (:class:`SymmetricMap`) and the eigenvalues of the map's Jacobian there in the
    symmetry-breaking directions (central differences, steps ``eps m`` along orthonormal directions)."""
    t0 = time.perf_counter()
    p = problem_for(H, H0, lam, alpha)
    o = multihead_options(SEOptions(ansatz="general"))
    base = MultiHeadSEMap(p, o)
    x0 = start if start is not None else sym_project(*default_start(p, base.Q0, "general"))
    sol = solve_multihead(
        SymmetricMap(base), "general", x0, damping=o.damping, tol=o.tol, max_iter=o.max_iter, history=o.history
    )
    rec = solution_record(p, base, sol, t0)
    # the fixed point itself, not the matched one (it is symmetric up to the draws)
    xs = (sol.Q, sol.M, sol.Sigma)
    B = breaking_basis(H, H0)
    h = eps * float(np.mean(sol.M))
    x = pack(*xs)
    J = np.zeros((B.shape[1], B.shape[1]))
    f0 = pack(*base(*xs, "general")[0])
    for j in range(B.shape[1]):
        fp = pack(*base(*unpack(x + h * B[:, j], H, H0), "general")[0])
        fm = pack(*base(*unpack(x - h * B[:, j], H, H0), "general")[0])
        J[:, j] = B.T @ (fp - fm) / (2 * h)
    ev = np.linalg.eigvals(J)
    ev = ev[np.argsort(-ev.real)]
    rec.update(
        jac_eigs_real=ev.real.tolist(),
        jac_eigs_imag=ev.imag.tolist(),
        jac=J.tolist(),
        asym_at_fixed_point=float(np.linalg.norm(B.T @ (f0 - x))),
        step=h,
        eps=eps,
        sym_Q=sol.Q.tolist(),
        sym_M=sol.M.tolist(),
        sym_Sigma=sol.Sigma.tolist(),
        seconds=time.perf_counter() - t0,
    )
    return rec


def broken_start(p: Problem, Q0: np.ndarray) -> tuple:
    """A start with the student heads' symmetry broken: head ``h`` at ``0.6`` of teacher head ``h`` (``h < H0``), the
    further heads at ``0.6`` of the teachers' mean; with one teacher head the two students at ``(1.2, 0.8) 0.6 Q0``."""
    H, H0 = p.heads, p.teacher_heads
    Q, M, S = default_start(p, Q0, "general")
    if H0 == 1:
        M = 0.6 * float(Q0[0, 0]) * np.linspace(1.2, 0.8, H)[:, None]
    else:
        rows = [Q0[h] if h < H0 else Q0.mean(axis=0) for h in range(H)]
        M = 0.6 * np.array(rows)
    return Q, M, S


def se_general(H: int, H0: int, lam: float, alpha: float, start: tuple | None) -> dict:
    """The general ansatz from ``start`` (``None``: :func:`broken_start`)."""
    p = problem_for(H, H0, lam, alpha)
    if start is None:
        start = broken_start(p, MultiHeadSEMap(p, SEOptions(ansatz="general")).Q0)
    return summary(multihead_theory(p, SEOptions(ansatz="general"), start=start))


# ---- theory: sweeps and bisection ---------------------------------------------------------------------------


def lam_of(rec: dict, eps: float = EPS[0]) -> float:
    """The instability measure of a symmetric point: ``specialisation_eigenvalue`` (H = H0) or the largest real part
    of the breaking Jacobian's eigenvalues (H != H0)."""
    if "eigen" in rec:
        v = rec["eigen"][str(eps)]["value"]
        return math.nan if v is None else float(v)
    H, H0 = np.asarray(rec["head_M"]).shape
    return modes(rec["jac"], H, H0)[0]["value"]


class Sweep:
    """The fixed points of one ``(H, H0, lam)`` along ``alpha``: the symmetric one (unspecialised) followed up, the
    broken one (specialised / general) followed down; every point cached (``spec`` includes its start)."""

    def __init__(self, store: Cache, H: int, H0: int, lam: float, run: bool, branch: float) -> None:
        self.store, self.H, self.H0, self.lam, self.run, self.branch = store, H, H0, lam, run, branch
        self.sym: dict[float, dict] = {}
        self.brk: dict[float, dict] = {}
        self.log: list[str] = []

    def _get(self, kind: str, alpha: float, start: tuple | None) -> dict | None:
        H, H0, lam = self.H, self.H0, self.lam
        spec = {"stage": "mht-se", "H": H, "H0": H0, "lam": lam, "alpha": alpha, "kind": kind, "start": rounded(start)}
        if H == H0:

            def fn(H=H, lam=lam, alpha=alpha, kind=kind, start=start):
                return se_equal(H, lam, alpha, "unspecialised" if kind == "sym" else "specialised", start)

        else:
            fn = (
                (lambda: se_symmetric(H, H0, lam, alpha, start))
                if kind == "sym"
                else (lambda: se_general(H, H0, lam, alpha, start))
            )
        r = cached(self.store, spec, fn if self.run else None)
        if r is not None and self.run:
            extra = f"lambda {f(lam_of(r))}" if kind == "sym" else f"index {f(r['index'])} asym {r['asym']:.3f}"
            print(
                f"SE H={H} H0={H0} lam={lam:g} alpha={alpha:.4g} {kind}: obj {r['objective']:.5f} test "
                f"{r['test']:.4f} {extra} conv {r['converged']} {r['seconds']:.0f} s",
                flush=True,
            )
        return r

    def on_branch(self, r: dict | None) -> bool:
        return r is not None and r["asym"] > self.branch

    def sym_at(self, alpha: float) -> dict | None:
        if alpha not in self.sym:
            below = [a for a in self.sym if a < alpha]
            r = self._get("sym", alpha, start_of(self.sym[max(below)]) if below else None)
            if r is None:
                return None
            self.sym[alpha] = r
        return self.sym[alpha]

    def brk_at(self, alpha: float) -> dict | None:
        if alpha not in self.brk:
            above = [a for a in self.brk if a > alpha and self.on_branch(self.brk[a])]
            r = self._get("brk", alpha, start_of(self.brk[min(above)]) if above else None)
            if r is None:
                return None
            self.brk[alpha] = r
        return self.brk[alpha]

    def f_cross(self, alpha: float) -> float:
        """Broken minus symmetric objective (``+inf`` where the broken branch is absent)."""
        s, b = self.sym_at(alpha), self.brk_at(alpha)
        if s is None or b is None:
            return math.nan
        return b["objective"] - s["objective"] if self.on_branch(b) else math.inf

    def g_stab(self, alpha: float) -> float:
        s = self.sym_at(alpha)
        return math.nan if s is None else lam_of(s) - 1.0

    def grid(self, grid: tuple, more: tuple = ()) -> list[float]:
        """The symmetric points up ``grid`` (and on up ``more`` until the eigenvalue exceeds 1), then the broken
        branch down from the top; the grid actually used."""
        used = []
        for a in list(grid) + list(more):
            if a in more and used and not (self.g_stab(used[-1]) < 0):
                break
            if self.sym_at(a) is None:
                break
            used.append(a)
        for a in reversed(used):
            if self.brk_at(a) is None:
                break
        return used

    def bisect(self, which: str, used: list[float], steps: int) -> dict:
        """The transition ``which`` ("cross": objectives; "stab": eigenvalue = 1) bracketed on ``used`` and bisected
        ``steps`` times; its estimate by linear interpolation inside the last bracket."""
        f = self.f_cross if which == "cross" else self.g_stab
        vals = [(a, f(a)) for a in used]
        if any(math.isnan(v) for _, v in vals):
            return dict(status="not computed")
        if which == "cross":  # from the top down: the first alpha where the broken branch is not lower
            lo = next((i for i in range(len(vals) - 1, -1, -1) if vals[i][1] >= 0), None)
            if vals[-1][1] >= 0:
                return dict(status=f"broken branch not lower up to alpha = {used[-1]}", values=vals)
            if lo is None:
                return dict(status=f"broken branch lower down to alpha = {used[0]}", values=vals)
        else:  # from the bottom up: the first alpha where the eigenvalue exceeds 1
            hi = next((i for i, (_, v) in enumerate(vals) if v > 0), None)
            if hi is None:
                return dict(status=f"stable up to alpha = {used[-1]}", values=vals)
            if hi == 0:
                return dict(status=f"unstable from alpha = {used[0]}", values=vals)
            lo = hi - 1
        a_lo, a_hi = vals[lo][0], vals[lo + 1][0]
        f_lo, f_hi = vals[lo][1], vals[lo + 1][1]
        for _ in range(steps):
            mid = round(0.5 * (a_lo + a_hi), 6)
            fm = f(mid)
            if math.isnan(fm):
                return dict(status="not computed", bracket=[a_lo, a_hi])
            vals.append((mid, fm))
            if fm >= 0 if which == "cross" else fm <= 0:
                a_lo, f_lo = mid, fm
            else:
                a_hi, f_hi = mid, fm
        if math.isfinite(f_lo):
            est = a_lo + (a_hi - a_lo) * f_lo / (f_lo - f_hi)
        else:
            est = 0.5 * (a_lo + a_hi)
        return dict(status="bracketed", bracket=[a_lo, a_hi], estimate=est, values=sorted(vals))

    def record(self) -> dict:
        return dict(
            H=self.H,
            H0=self.H0,
            lam=self.lam,
            sym={str(a): r for a, r in sorted(self.sym.items())},
            brk={str(a): r for a, r in sorted(self.brk.items())},
        )


#: H = H0 = 2, lam = ERM_LAM: the breaking Jacobian at these alphas (against specialisation_eigenvalue), and the
#: two branches with other prior draws and nodes (the paired error of the objective difference)
CHECK_JAC_ALPHAS = (1.5, 2.0, 1.0, 1.25, 1.75, 2.5)
#: the general ansatz from the unspecialised point moved along the leading breaking mode (step ESCAPE m)
ESCAPE_ALPHAS, ESCAPE = (1.5,), 0.3
#: the fixed point the escape reaches, followed in alpha (general ansatz, each point from its neighbour)
ASYM_DOWN, ASYM_UP = (1.25, 1.0, 0.75), (1.75, 2.0, 2.5)
CHECK_SEED_ALPHA, CHECK_SEEDS = 1.75, (1, 2)


def checks(store: Cache, sw: Sweep, run: bool) -> dict:
    out: dict = {"jac": {}, "seeds": {}}
    for a in CHECK_JAC_ALPHAS:
        st = start_of(sw.sym_at(a))
        spec = {"stage": "mht-check-jac", "alpha": a, "lam": sw.lam, "start": rounded(st)}
        r = cached(store, spec, (lambda: se_symmetric(2, 2, sw.lam, a, st)) if run and st is not None else None)
        if r is not None:
            out["jac"][str(a)] = r
            if run:
                print(
                    f"check jac alpha={a}: eigs {np.round(r['jac_eigs_real'], 3).tolist()} obj {r['objective']:.5f}",
                    flush=True,
                )
    out["escape"] = {}
    for a in ESCAPE_ALPHAS:
        j = out["jac"].get(str(a))
        if j is None:
            continue
        x = pack(*(np.asarray(j[k], float) for k in ("sym_Q", "sym_M", "sym_Sigma")))
        st = unpack(x + ESCAPE * float(np.mean(j["sym_M"])) * lead_vector(j["jac"], 2, 2), 2, 2)
        spec = {"stage": "mht-escape", "alpha": a, "lam": sw.lam, "start": rounded(st)}
        r = cached(
            store,
            spec,
            (lambda: summary(multihead_theory(problem_for(2, 2, sw.lam, a), SEOptions(ansatz="general"), start=st)))
            if run
            else None,
        )
        if r is not None:
            out["escape"][str(a)] = r
            if run:
                print(
                    f"escape alpha={a}: obj {r['objective']:.5f} (sym {j['objective']:.5f}) index {r['index']:.3f} "
                    f"asym {r['asym']:.3f} Q {np.round(r['head_Q'], 3).tolist()} conv {r['converged']}",
                    flush=True,
                )
    out["asym_branch"] = {}
    a0 = ESCAPE_ALPHAS[0]
    if str(a0) in out["escape"]:
        out["asym_branch"][str(a0)] = out["escape"][str(a0)]
        for chain in (ASYM_DOWN, ASYM_UP):
            prev = out["escape"][str(a0)]
            for a in chain:
                st = start_of(prev)
                spec = {"stage": "mht-asym-branch", "alpha": a, "lam": sw.lam, "start": rounded(st)}
                r = cached(
                    store,
                    spec,
                    (
                        lambda: summary(
                            multihead_theory(problem_for(2, 2, sw.lam, a), SEOptions(ansatz="general"), start=st)
                        )
                    )
                    if run
                    else None,
                )
                if r is None:
                    break
                out["asym_branch"][str(a)] = prev = r
                if run:
                    print(
                        f"asym branch alpha={a}: obj {r['objective']:.5f} index {r['index']:.3f} Q "
                        f"{np.round(r['head_Q'], 3).tolist()} conv {r['converged']} {r['seconds']:.0f} s",
                        flush=True,
                    )
    a = CHECK_SEED_ALPHA
    s0, b0 = sw.sym_at(a), sw.brk_at(a)
    for seed in CHECK_SEEDS:
        rows = {}
        for kind, base, ansatz in (("sym", s0, "unspecialised"), ("brk", b0, "specialised")):
            if base is None:
                continue
            st = start_of(base)
            spec = {
                "stage": "mht-check-seed",
                "alpha": a,
                "lam": sw.lam,
                "seed": seed,
                "kind": kind,
                "start": rounded(st),
            }
            r = cached(store, spec, (lambda: se_equal(2, sw.lam, a, ansatz, st, seed)) if run else None)
            if r is not None:
                rows[kind] = r
        if len(rows) == 2:
            out["seeds"][str(seed)] = rows
            if run:
                print(
                    f"check seed {seed} alpha={a}: diff {rows['brk']['objective'] - rows['sym']['objective']:+.2e} "
                    f"index {rows['brk']['index']:.3f} lambda {f(lam_of(rows['sym']))}",
                    flush=True,
                )
    return out


CONFIGS = [(2, 2, lam) for lam in LAMS] + [(H, H0, UNEQUAL_LAM) for H, H0 in UNEQUAL]


def run_theory(store: Cache, run: bool, quick: bool = False, only: list[tuple] | None = None) -> list[dict]:
    """Every configuration's sweep and transitions (computing only those in ``only``, default all, when ``run``;
    the others from the cache)."""
    out = []
    for H, H0, lam in CONFIGS[1:2] if quick else CONFIGS:
        here = run and (only is None or (H, H0, lam) in only)
        sw = Sweep(store, H, H0, lam, here, BRANCH_INDEX if H0 > 1 else 0.05)
        grid = GRID if H == H0 else UNEQUAL_GRID
        used = sw.grid(grid[:2] if quick else grid, () if quick or H != H0 else GRID_MORE)
        if not used:
            continue
        rec = sw.record()
        rec["grid"] = used
        rec["stab"] = sw.bisect("stab", used, 0 if quick else BISECT)
        rec["cross"] = sw.bisect("cross", used, 0 if quick else BISECT)
        if H == H0 and lam == ERM_LAM and not quick:  # the SE at the ERM alphas, for the overlap comparison
            for a in ERM_ALPHAS:
                sw.sym_at(a), sw.brk_at(a)
        if H == H0 == 2 and lam == ERM_LAM and not quick:
            rec["checks"] = checks(store, sw, here)
        rec.update(sw.record())
        out.append(rec)
        print(
            f"H={H} H0={H0} lam={lam:g}: stab {rec['stab'].get('estimate', rec['stab']['status'])}, cross "
            f"{rec['cross'].get('estimate', rec['cross']['status'])}",
            flush=True,
        )
    return out


# ---- tables ---------------------------------------------------------------------------------------------------

#: an ERM task counts as specialised when its index is above this (between the two fixed points' indices)
ERM_SPECIALISED = 0.4


def f(x: float | None, nd: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{nd}f}"


def mean_se(v) -> tuple[float, float]:
    v = np.asarray(v, float)
    return float(v.mean()), (float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else math.nan)


def half_point(alphas: list[float], frac: list[float]) -> float:
    """The smallest ``alpha`` where the fraction crosses 1/2 upward (linear interpolation; ``nan`` if none)."""
    for i in range(1, len(alphas)):
        if frac[i - 1] < 0.5 <= frac[i]:
            return alphas[i - 1] + (alphas[i] - alphas[i - 1]) * (0.5 - frac[i - 1]) / (frac[i] - frac[i - 1])
    return alphas[0] if frac and frac[0] >= 0.5 else math.nan


def erm_jump(rows: list[dict], d: int, rng: np.random.Generator, boots: int = 400) -> tuple[float, float]:
    """Where the fraction of specialised ERM tasks at size ``d`` crosses 1/2, and its bootstrap standard error
    (tasks resampled within each ``alpha``)."""
    alphas = sorted({r["alpha"] for r in rows if r["d"] == d})
    by = {a: np.array([r["index"] > ERM_SPECIALISED for r in rows if r["d"] == d and r["alpha"] == a]) for a in alphas}
    est = half_point(alphas, [float(by[a].mean()) for a in alphas])
    bs = [half_point(alphas, [float(rng.choice(by[a], by[a].size).mean()) for a in alphas]) for _ in range(boots)]
    bs = np.array([b for b in bs if math.isfinite(b)])
    return est, (float(bs.std(ddof=1)) if bs.size > 1 else math.nan)


def mode_text(rec: dict, H: int, H0: int, k: int = 2) -> str:
    out = []
    for m in modes(rec["jac"], H, H0)[:k]:
        lab = f"spec {m['specialisation']:.2f}, " if H == H0 else ""
        im = "" if abs(m["imag"]) < 1e-9 else f"{m['imag']:+.2f}i"
        out.append(
            f"{m['value']:.2f}{im} ({lab}stud-diff "
            f"{m['student_difference']:.2f}; Q/M/Sigma {m['Q']:.2f}/{m['M']:.2f}/{m['Sigma']:.2f})"
        )
    return ", ".join(out)


def transition_text(t: dict) -> str:
    if t.get("status") != "bracketed":
        return t.get("status", "-")
    lo, hi = t["bracket"]
    return f"{t['estimate']:.3f} [{lo:.4g}, {hi:.4g}]"


def write_tables(theory: list[dict], erm: list[dict], ref: float) -> str:
    L = [
        "# Multi-head attention: specialisation transitions",
        "",
        f"seq2lab, T = {T}, MP teachers kappa0 = {KAPPA0}, noise {NOISE}, factorized students kappa = 1. SE: D = 100, "
        "4 draws, 4 x 1024 nodes (the library's defaults). Reference workload (five 1000^3 float64 products) on the "
        f"shared machine: {ref:.2f} s.",
        "",
    ]
    if theory:
        L += [
            "## Transitions (state evolution)",
            "",
            "stability: the symmetric point's eigenvalue crosses 1 (eps = 0.02; H = H0: specialisation_eigenvalue, "
            "otherwise the largest real part of the breaking Jacobian); crossing: the broken branch's objective "
            "drops below the symmetric one's. Estimate by linear interpolation in the last bracket [lo, hi].",
            "",
            "| H | H0 | lam | grid | stability: alpha [bracket] | eigenvalue at grid points (eps 0.02 / 0.05) | "
            "objective crossing: alpha [bracket] | broken - symmetric objective at grid points | "
            "broken branch index (asym) at grid points |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for t in theory:
            g = t["grid"]
            eig = ", ".join(
                f"{a:g}: "
                + (
                    f"{f(lam_of(t['sym'][str(a)], 0.02), 2)}/{f(lam_of(t['sym'][str(a)], 0.05), 2)}"
                    if "eigen" in t["sym"][str(a)]
                    else f"{lam_of(t['sym'][str(a)]):.2f}"
                )
                for a in g
            )
            dif = ", ".join(
                f"{a:g}: {1e4 * (t['brk'][str(a)]['objective'] - t['sym'][str(a)]['objective']):+.1f}"
                for a in g
                if str(a) in t["brk"]
            )
            idx = ", ".join(f"{a:g}: {t['brk'][str(a)]['asym']:.2f}" for a in g if str(a) in t["brk"])
            L.append(
                f"| {t['H']} | {t['H0']} | {t['lam']:g} | {g[0]:g}..{g[-1]:g} | {transition_text(t['stab'])} | "
                f"{eig} | {transition_text(t['cross'])} | {dif} (1e-4) | {idx} |"
            )
        L += [
            "",
            "Every SE point (sym: the symmetric / unspecialised fixed point; brk: the broken / specialised one):",
            "",
        ]
        for t in theory:
            L.append(f"- H = {t['H']}, H0 = {t['H0']}, lam = {t['lam']:g}:")
            for a in sorted(set(map(float, t["sym"])) | set(map(float, t["brk"]))):
                s, b = t["sym"].get(str(a)), t["brk"].get(str(a))
                txt = f"  - alpha {a:g}:"
                if s:
                    txt += (
                        f" sym obj {s['objective']:.5f} +- {s['objective_se']:.5f}, test {s['test']:.4f}, "
                        f"eigenvalue {f(lam_of(s))}{'' if s['converged'] else ' (not converged)'};"
                    )
                if b:
                    txt += (
                        f" brk obj {b['objective']:.5f}, test {b['test']:.4f}, index {f(b['index'])}, asym "
                        f"{b['asym']:.3f}, M {np.round(b['head_M'], 3).tolist()}"
                        f"{'' if b['converged'] else ' (not converged)'}"
                    )
                if s and "jac" in s:
                    txt += " breaking modes: " + mode_text(s, t["H"], t["H0"])
                L.append(txt)
        L.append("")
        for t in theory:
            c = t.get("checks")
            if not c:
                continue
            L += [
                f"## Checks, H = H0 = 2, lam = {t['lam']:g}",
                "",
                "Breaking Jacobian of the unspecialised point (every symmetry-breaking direction, central differences, "
                "step 0.02 m; eigenvalues after averaging over the heads' symmetry group; per mode its shares in "
                "the specialisation direction and in the student-difference directions) against "
                "specialisation_eigenvalue (eps 0.02) at the same point; ||breaking part of F(x*) - x*|| is the "
                "sampled map's own asymmetry at the fixed point:",
                "",
            ]
            for a in sorted(c["jac"], key=float):
                j = c["jac"][a]
                lib = t["sym"].get(a)
                L.append(
                    f"- alpha {float(a):g}: {mode_text(j, 2, 2, 3)}; raw (not averaged) "
                    f"{np.round(j['jac_eigs_real'][:3], 3).tolist()}; specialisation_eigenvalue "
                    f"{f(lam_of(lib)) if lib else '-'}; asymmetry at x* {j['asym_at_fixed_point']:.3f} "
                    f"(step {j['step']:.3f})"
                )
            for a, r in c.get("escape", {}).items():
                j = c["jac"][a]
                L.append(
                    f"- escape, alpha {float(a):g}: general ansatz from x* + {ESCAPE} m v (v the leading mode): "
                    f"objective {r['objective']:.5f} (unspecialised {j['objective']:.5f}), index {f(r['index'])}, "
                    f"asym {r['asym']:.3f}, Q {np.round(r['head_Q'], 3).tolist()}, M "
                    f"{np.round(r['head_M'], 3).tolist()}, converged {r['converged']}"
                )
            if c.get("asym_branch"):
                L += [
                    "",
                    "The fixed point the escape reaches (specialised heads that differ from each other: outside "
                    "both ansaetze), followed in alpha by the general ansatz, against the two ansaetze (objective "
                    "differences in 1e-4):",
                    "",
                    "| alpha | objective | minus unspecialised | minus specialised ansatz | "
                    "index | Q diag | M | converged |",
                    "|---|---|---|---|---|---|---|---|",
                ]
                for a in sorted(c["asym_branch"], key=float):
                    r = c["asym_branch"][a]
                    su, sb = t["sym"].get(a), t["brk"].get(a)
                    du = f"{1e4 * (r['objective'] - su['objective']):+.1f}" if su else "-"
                    db = f"{1e4 * (r['objective'] - sb['objective']):+.1f}" if sb else "-"
                    L.append(
                        f"| {float(a):g} | {r['objective']:.5f} | {du} | {db} | {f(r['index'])} | "
                        f"{np.round(np.diag(r['head_Q']), 3).tolist()} | {np.round(r['head_M'], 3).tolist()} | "
                        f"{r['converged']} |"
                    )
                L.append("")
            for seed, rows in c.get("seeds", {}).items():
                L.append(
                    f"- other draws and nodes (seed {seed}), alpha {CHECK_SEED_ALPHA:g}: specialised minus "
                    f"unspecialised objective {rows['brk']['objective'] - rows['sym']['objective']:+.2e} (index "
                    f"{rows['brk']['index']:.3f}), specialisation_eigenvalue {f(lam_of(rows['sym']))}"
                )
            L.append("")
    if erm:
        sizes = sorted({r["d"] for r in erm})
        alphas = sorted({r["alpha"] for r in erm})
        th = next((t for t in theory if t["H"] == t["H0"] == 2 and t["lam"] == ERM_LAM), None)
        L += [
            f"## ERM, H = H0 = 2, lam = {ERM_LAM:g}",
            "",
            f"L-BFGS float64, {ERM_STARTS} starts per task (the lowest objective kept); the student heads matched to "
            "the teacher heads (largest matched overlap); index = (mean diag M - mean off-diag M)/(same of Q0). "
            f"Mean +- s.e. over tasks (seeds 0..n-1); in parentheses the fraction of tasks with index > "
            f"{ERM_SPECIALISED}.",
            "",
            "| alpha | "
            + " | ".join(f"d = {d}: index (frac.), n" for d in sizes)
            + " | SE unspec. / spec. test | "
            + " | ".join(f"d = {d}: test" for d in sizes)
            + " |",
            "|---" * (2 + 2 * len(sizes)) + "|",
        ]
        for a in alphas:
            cells, tests = [], []
            for d in sizes:
                xs = [r for r in erm if r["d"] == d and r["alpha"] == a]
                if not xs:
                    cells.append("-"), tests.append("-")
                    continue
                m, se = mean_se([r["index"] for r in xs])
                fr = np.mean([r["index"] > ERM_SPECIALISED for r in xs])
                cells.append(f"{m:.3f} +- {se:.3f} ({fr:.2f}), {len(xs)}")
                m, se = mean_se([r["test"] for r in xs])
                tests.append(f"{m:.4f} +- {se:.4f}")
            se_txt = "-"
            if th and str(a) in th["sym"]:
                b = th["brk"].get(str(a))
                se_txt = f"{th['sym'][str(a)]['test']:.4f} / " + (
                    f"{b['test']:.4f} (index {b['index']:.2f})" if b else "-"
                )
            L.append(f"| {a:g} | " + " | ".join(cells) + f" | {se_txt} | " + " | ".join(tests) + " |")
        rng = np.random.default_rng(0)
        L += [
            "",
            "Where ERM's fraction of specialised tasks crosses 1/2 (linear interpolation between alphas; "
            "bootstrap s.e. over tasks):",
            "",
        ]
        for d in sizes:
            est, se = erm_jump(erm, d, rng)
            L.append(f"- d = {d}: alpha_1/2 = {f(est, 2)} +- {f(se, 2)}")
        L += [
            "",
            "Matched per-head overlaps M (mean over tasks, specialised tasks only / all) against the SE's head_M:",
            "",
        ]
        for a in alphas:
            parts = []
            for d in sizes:
                xs = [
                    np.asarray(r["head_M"])
                    for r in erm
                    if r["d"] == d and r["alpha"] == a and r["index"] > ERM_SPECIALISED
                ]
                if xs:
                    parts.append(f"d = {d} ({len(xs)} spec.): {np.round(np.mean(xs, axis=0), 3).tolist()}")
            if th and str(a) in th["sym"]:
                parts.append(f"SE unspec. {np.round(th['sym'][str(a)]['head_M'], 3).tolist()}")
                if str(a) in th["brk"]:
                    parts.append(f"SE spec. {np.round(th['brk'][str(a)]['head_M'], 3).tolist()}")
            L.append(f"- alpha {a:g}: " + "; ".join(parts))
        L += [
            "",
            "Difference between the two matched student heads (the specialised ansatz forces them equal): "
            "|M11 - M22| and |Q11 - Q22|, mean +- s.e. over the specialised tasks (index > "
            f"{ERM_SPECIALISED}); the SE's specialised point has 0 by construction.",
            "",
            "| alpha | " + " | ".join(f"d = {d}: abs(M11 - M22), abs(Q11 - Q22)" for d in sizes) + " |",
            "|---" * (1 + len(sizes)) + "|",
        ]
        for a in alphas:
            cells = []
            for d in sizes:
                xs = [r for r in erm if r["d"] == d and r["alpha"] == a and r["index"] > ERM_SPECIALISED]
                if len(xs) < 2:
                    cells.append("-")
                    continue
                dm = mean_se([abs(r["head_M"][0][0] - r["head_M"][1][1]) for r in xs])
                dq = mean_se([abs(r["head_Q"][0][0] - r["head_Q"][1][1]) for r in xs])
                cells.append(f"{dm[0]:.3f} +- {dm[1]:.3f}, {dq[0]:.3f} +- {dq[1]:.3f}")
            L.append(f"| {a:g} | " + " | ".join(cells) + " |")
        L.append("")
        secs = {d: np.mean([r["seconds"] for r in erm if r["d"] == d]) for d in sizes}
        L.append("ERM seconds per task (3 starts), mean: " + ", ".join(f"d = {d}: {v:.1f}" for d, v in secs.items()))
        L.append("")
    text = "\n".join(L) + "\n"
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tables.md").write_text(text)
    return text


# ---- main -----------------------------------------------------------------------------------------------------


def main(
    quick: bool = False,
    parts: list[str] | None = None,
    *,
    cache: str | Path | None = None,
    only: list[tuple] | None = None,
) -> int:
    """Run the named ``parts`` (``theory``: the configurations in ``only``, default all) and rewrite ``results/`` from
    everything cached (with ``quick``: small sizes, nothing written); 0."""
    parts = list(parts or ["tables"])
    root = Path(cache or Path("runs", "studies", HERE.name + ("-quick" if quick else "")))
    store = Cache(root)
    ref = reference_seconds()
    print(f"reference workload: {ref:.2f} s", flush=True)
    th = run_theory(store, "theory" in parts, quick, only)
    erm = run_erm(
        store,
        ERM_ALPHAS[:2] if quick else ERM_ALPHAS,
        {12: 1} if quick else ERM_SIZES,
        run="erm" in parts,
        more=None if quick else ERM_MORE,
        more_alphas=ERM_MORE_ALPHAS,
    )
    if not quick:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "theory.json").write_text(json.dumps(th))
        (RESULTS / "erm.json").write_text(json.dumps(erm))
        print(write_tables(th, erm, ref))
    return 0


def cli(argv: list[str] | None = None) -> int:
    ap = study_parser(HERE, __doc__)
    ap.add_argument("parts", nargs="*", default=["tables"], help="theory, erm, tables (only what is cached)")
    ap.add_argument("--quick", action="store_true", help="small sizes, few points; writes no results")
    ap.add_argument("--cache", default=None, help="result cache (default runs/studies/multihead_transitions)")
    ap.add_argument(
        "--only",
        action="append",
        default=None,
        metavar="H,H0,LAM",
        help="theory: compute only this configuration (repeatable; the others from the cache)",
    )
    a = ap.parse_args(argv)
    only = (
        None
        if a.only is None
        else [(int(x.split(",")[0]), int(x.split(",")[1]), float(x.split(",")[2])) for x in a.only]
    )
    return main(a.quick, a.parts, cache=a.cache, only=only)


if __name__ == "__main__":
    raise SystemExit(cli())
