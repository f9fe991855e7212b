"""The ERM objective of a student on one training set and its gradient, in closed form (torch).

Objective (docs: Theory, :ref:`theory-erm`), reported per sample:

    L(S)/n = (1/n) [ sum_mu ||chan_beta(h_mu(S)) - y_mu||_F^2 + R(S) ],

with ``R = lam d Tr S`` (factorized), ``lam d ||S||_F^2`` (direct) or, untied,
``(lam/sqrt(kappa)) (||W_Q||_F^2 + ||W_K||_F^2)/2`` (``= lam d ||M||_*`` at balanced factors). Dividing by ``n``
only rescales the objective; it keeps gradients O(1) for the optimisers' tolerances.

The objective and its gradient are computed in closed form by :class:`Objective`
(no autograd; a student module of another type — a registered new student — goes through the
channel's logit gradient pulled back by autograd): for the factorized student ``S = W W^T / sqrt(p d)``, with
``Z = X W``
(``n T x p``, never ``S X``) and ``c = 1/(d sqrt(p))``,

    h_ab       = c Z_a . Z_b - delta_ab Tr S / sqrt(d)
    G          = dL/dh   (softmax Jacobian applied to 2 (yhat - y); ``2 (h - y)`` for linear)
    dL/dZ      = c (G + G^T) Z
    dL/dW      = X^T dL/dZ + 2 W (lam d - sum_a G_aa / sqrt(d)) / sqrt(p d).

The untied student ``M = W_Q W_K^T/sqrt(p d)`` has ``Z_Q = X W_Q``, ``Z_K = X W_K`` and

    h_ab       = c Z_Q,a . Z_K,b - delta_ab Tr M / sqrt(d)
    dL/dZ_Q    = c G Z_K,       dL/dZ_K = c G^T Z_Q
    dL/dW_Q    = X^T dL/dZ_Q + (lam sqrt(d/p) W_Q - W_K sum_a G_aa / (d sqrt(p))),  and Q <-> K.

FLOPs of one full-batch step: ``4 n T d p`` in the two GEMMs ``X W`` and ``X^T dL/dZ``,
plus ``O(n T^2 p)`` for the per-sequence logits (see :func:`step_flops`). On CPU the
data are processed in cache-sized chunks so that the backward GEMM reuses the chunk of
``X`` the forward one just read; this is what brings a step to the machine's GEMM rate.

The multi-head student (``H`` heads ``S_h = W_h W_h^T/sqrt(p d)``, output the mean over heads of the
channel outputs) has the factorized formulas per head, with ``G_h = dL/dh_h`` the derivative of the loss of
the mean output ``mean_h chan_beta(h_h)`` (the channel's attention map differentiated by autograd per
head, the loss in closed form in the mean attention matrix) and the weight decay
``lam d sum_h Tr S_h``.

For the ``seq2seq`` channel, ``||A X/sqrt(d) - y||_F^2 = tr(A M A^T) - 2 <A, Y> + ||y||^2``
with the per-dataset constants ``M = X X^T/d`` and ``Y = y X^T/sqrt(d)`` (``T x T`` per
sequence), computed once when the :class:`Objective` is built.

Data larger than memory on the device are streamed: the full-batch gradient is
accumulated over chunks of ``batch_size`` sequences moved to the device one at a time
(the optimiser still sees the exact full-batch objective).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from singlehead.model.attention_layers import (
    DirectStudent,
    FactorizedStudent,
    MultiHeadStudent,
    UntiedStudent,
    predict,
)
from singlehead.model.channels import Channel, get_channel, squared_error
from singlehead.model.students import Student, get_student
from singlehead.sim.data import Sequences

__all__ = ["Objective", "step_flops", "objective_and_grad", "reference_objective_and_grad", "CHUNK_BYTES"]

CHUNK_BYTES = 1 << 21
"""Target size of one single-threaded CPU chunk of ``X`` (times threads^2 with several threads)."""


def step_flops(n: int, T: int, d: int, p: int, student: str | Student = "factorized") -> float:
    """Floating-point operations of one full-batch objective + gradient evaluation.

    Counts the GEMMs only (multiply-add = 2 FLOPs): factorized ``X W`` and ``X^T dZ``
    (``2 x 2 n T d p``) plus the logits ``Z Z^T`` and ``G Z`` (``2 x 2 n T^2 p``); direct
    the same with ``p = d`` and ``X^T (G X)``.
    """
    width = get_student(student).width(d, p)
    return 4.0 * n * T * d * width + 4.0 * n * T * T * width


class Objective:
    """Per-sample ERM objective ``L/n`` of a student on one training set, with its gradient.

    Parameters
    ----------
    data : Sequences
        Training set. Kept where it is; chunks not on the student's device are moved there
        one at a time (streaming).
    channel : Channel or str
        Output channel (a registered name is resolved with :func:`~singlehead.model.channels.get_channel`).
    beta : float
        Student inverse temperature.
    lam : float
        Regularisation ``lambda`` (docs: Theory, :ref:`theory-erm`).
    batch_size : int, optional
        Sequences moved to the device at a time (streaming); ``None`` = all at once.
    chunk : int, optional
        Sequences per compute chunk (default: about 2 MiB of ``X`` per thread^2 on CPU, everything on GPU).

    Notes
    -----
    Calling ``obj(student)`` writes the exact full-batch gradient into the parameter's
    ``.grad`` (replacing it) and returns the objective as a 0-dim float64 tensor on the
    student's device (sums are accumulated in float64 also for a float32 student), without a
    host synchronisation.
    """

    def __init__(
        self,
        data: Sequences,
        channel: Channel | str,
        beta: float,
        lam: float,
        *,
        batch_size: int | None = None,
        chunk: int | None = None,
    ) -> None:
        channel = get_channel(channel)
        if batch_size is not None and int(batch_size) < 1:
            raise ValueError(f"batch_size must be an integer >= 1 (got {batch_size!r})")
        self.data, self.channel, self.beta, self.lam = data, channel, float(beta), float(lam)
        self.n = len(data)
        self.batch_size = self.n if batch_size is None else int(batch_size)
        self.chunk = chunk
        self._cache: dict[tuple, tuple] = {}
        # per-dataset constants of the channel's loss (seq2seq: T x T Gram matrices, float64)
        self._target, self._M, self._yy = channel.training_constants(data.X, data.y)

    # ---- data on the device ------------------------------------------------
    def _batches(self, device: torch.device, dtype: torch.dtype):
        """``(X, target, M)`` per streamed batch; converted copies are cached when nothing is streamed."""
        key = (str(device), dtype)
        streamed = self.batch_size < self.n
        if not streamed and key in self._cache:
            yield self._cache[key]
            return
        for i in range(0, self.n, self.batch_size):
            j = min(i + self.batch_size, self.n)
            X = self.data.X[i:j].to(device, dtype, non_blocking=True).contiguous()
            tgt = self._target[i:j].to(device, dtype, non_blocking=True)
            M = None if self._M is None else self._M[i:j].to(device, dtype, non_blocking=True)
            if not streamed:
                self._cache = {key: (X, tgt, M)}  # one resident copy (the latest dtype/device)
            yield X, tgt, M

    def _chunks(self, device: torch.device, dtype: torch.dtype):
        """``(X chunk (k, T, d), the same as (k T, d), target chunk, M chunk or None)`` over all batches."""
        for X, tgt, M in self._batches(device, dtype):
            m, T, d = X.shape
            step = self._chunk_len(X)
            for i in range(0, m, step):
                Xc = X[i : i + step]
                yield Xc, Xc.reshape(Xc.shape[0] * T, d), tgt[i : i + step], None if M is None else M[i : i + step]

    def _chunk_len(self, X: torch.Tensor) -> int:
        if self.chunk is not None:
            return max(1, int(self.chunk))
        if X.device.type != "cpu":
            return X.shape[0]
        # With several threads every op is a parallel region ending in a barrier: fewer, larger
        # chunks (on a loaded machine small parallel regions cost more than the cache misses).
        per_seq = X.shape[1] * X.shape[2] * X.element_size()
        return max(64, CHUNK_BYTES * torch.get_num_threads() ** 2 // per_seq)

    # ---- closed-form pieces -------------------------------------------------
    def _dlogits(self, h: torch.Tensor, tgt: torch.Tensor, M: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
        """Data loss (summed, 0-dim) and ``G = dL/dh`` for logits ``h`` of a chunk: the channel's closed
        form, or autograd through its attention map."""
        out = self.channel.loss_and_logit_grad(h, tgt, M, self.beta)
        if out is not None:
            return out
        with torch.enable_grad():
            hh = h.detach().requires_grad_(True)
            r = self.channel.attention(hh, self.beta) - tgt
            loss = (r * r).sum(dtype=torch.float64)
            (G,) = torch.autograd.grad(loss, hh)
        return loss.detach(), G

    def _factorized(self, W: torch.Tensor, trace: torch.Tensor, gW: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d, p = W.shape
        c = 1.0 / (d * math.sqrt(p))  # scale / sqrt(d) with scale = 1/sqrt(p d)
        shift = trace / math.sqrt(d)
        loss = W.new_zeros((), dtype=torch.float64)  # accumulated in float64 whatever W's dtype
        gdiag = W.new_zeros(())
        for Xc, X2, tgt, M in self._chunks(W.device, W.dtype):
            k, T = Xc.shape[0], Xc.shape[1]
            Z = (X2 @ W).view(k, T, p)
            h = torch.bmm(Z, Z.transpose(1, 2)).mul_(c)
            h.diagonal(dim1=-2, dim2=-1).sub_(shift)
            lc, G = self._dlogits(h, tgt, M)
            loss += lc
            gdiag += G.diagonal(dim1=-2, dim2=-1).sum()
            Gs = (G + G.transpose(1, 2)).mul_(c)
            gW.addmm_(X2.T, torch.bmm(Gs, Z).view(k * T, p))
        return loss, gdiag

    def _dlogits_heads(
        self, h: torch.Tensor, tgt: torch.Tensor, M: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Data loss (summed, float64) of the mean over heads of the attention matrices of logits ``h``
        (``(k, H, T, T)``) and ``G = dL/dh`` per head (autograd through the channel's attention map)."""
        with torch.enable_grad():
            hh = h.detach().requires_grad_(True)
            A = self.channel.attention(hh, self.beta).mean(dim=1)
            if M is None:  # ||A - y||^2
                R = A - tgt
                loss = (R * R).sum(dtype=torch.float64)
            else:  # seq2seq: <A M, A> - 2 <A, Y> (+ ||y||^2, added once per dataset)
                loss = ((A @ M) * A).sum(dtype=torch.float64) - 2.0 * (A * tgt).sum(dtype=torch.float64)
            (G,) = torch.autograd.grad(loss, hh)
        return loss.detach(), G

    def _multihead(self, W: torch.Tensor, traces: torch.Tensor, gW: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        H, d, p = W.shape
        c = 1.0 / (d * math.sqrt(p))
        shift = traces / math.sqrt(d)
        Wf = W.permute(1, 0, 2).reshape(d, H * p)  # the heads side by side: one GEMM for X W_h, every h
        gWf = W.new_zeros(d, H * p)
        loss = W.new_zeros((), dtype=torch.float64)
        gdiag = W.new_zeros(H)
        for Xc, X2, tgt, M in self._chunks(W.device, W.dtype):
            k, T = Xc.shape[0], Xc.shape[1]
            Z = (X2 @ Wf).view(k, T, H, p).transpose(1, 2)  # (k, H, T, p)
            h = (Z @ Z.transpose(-1, -2)).mul_(c)
            h.diagonal(dim1=-2, dim2=-1).sub_(shift[:, None])
            lc, G = self._dlogits_heads(h, tgt, M)
            loss += lc
            gdiag += G.diagonal(dim1=-2, dim2=-1).sum(dim=(0, 2))
            Gs = (G + G.transpose(-1, -2)).mul_(c)
            gWf.addmm_(X2.T, (Gs @ Z).transpose(1, 2).reshape(k * T, H * p))
        gW.copy_(gWf.view(d, H, p).permute(1, 0, 2))
        return loss, gdiag

    def _multihead_total(self, student: MultiHeadStudent, backward: bool) -> torch.Tensor:
        W = student.W
        _, d, p = W.shape
        scale = 1.0 / math.sqrt(p * d)
        traces = (W * W).sum(dim=(1, 2)) * scale
        gW = torch.zeros_like(W)
        loss, gdiag = self._multihead(W, traces, gW)
        total = (loss + self._yy + self.lam * d * traces.sum()) / self.n
        if backward:
            coef = 2.0 * scale * (self.lam * d - gdiag / math.sqrt(d))
            gW.add_(W * coef[:, None, None]).div_(self.n)
            W.grad = gW
        return total

    def _untied(self, W: torch.Tensor, trace: torch.Tensor, gW: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        _, d, p = W.shape
        c = 1.0 / (d * math.sqrt(p))
        shift = trace / math.sqrt(d)
        loss = W.new_zeros((), dtype=torch.float64)
        gdiag = W.new_zeros(())
        for Xc, X2, tgt, M in self._chunks(W.device, W.dtype):
            k, T = Xc.shape[0], Xc.shape[1]
            ZQ = (X2 @ W[0]).view(k, T, p)
            ZK = (X2 @ W[1]).view(k, T, p)
            h = torch.bmm(ZQ, ZK.transpose(1, 2)).mul_(c)
            h.diagonal(dim1=-2, dim2=-1).sub_(shift)
            lc, G = self._dlogits(h, tgt, M)
            loss += lc
            gdiag += G.diagonal(dim1=-2, dim2=-1).sum()
            gW[0].addmm_(X2.T, torch.bmm(G, ZK).view(k * T, p), alpha=c)
            gW[1].addmm_(X2.T, torch.bmm(G.transpose(1, 2), ZQ).view(k * T, p), alpha=c)
        return loss, gdiag

    def _direct(self, S: torch.Tensor, gS: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = S.shape[0]
        c = 1.0 / math.sqrt(d)
        shift = torch.trace(S) * c
        loss = S.new_zeros((), dtype=torch.float64)
        gdiag = S.new_zeros(())
        for Xc, X2, tgt, M in self._chunks(S.device, S.dtype):
            k, T = Xc.shape[0], Xc.shape[1]
            Z = (X2 @ S).view(k, T, d)
            h = torch.bmm(Z, Xc.transpose(1, 2)).mul_(c)
            h.diagonal(dim1=-2, dim2=-1).sub_(shift)
            lc, G = self._dlogits(h, tgt, M)
            loss += lc
            gdiag += G.diagonal(dim1=-2, dim2=-1).sum()
            gS.addmm_(X2.T, torch.bmm(G, Xc).view(k * T, d), alpha=c)
        return loss, gdiag

    # ---- public --------------------------------------------------------------
    @torch.no_grad()
    def __call__(self, student: nn.Module, backward: bool = True) -> torch.Tensor:
        """Objective ``L/n`` (0-dim tensor); with ``backward`` the gradient is written to ``.grad``."""
        n = self.n
        if type(student) is FactorizedStudent:  # subclasses may change the regulariser: generic path
            W = student.W
            d, p = W.shape
            scale = 1.0 / math.sqrt(p * d)
            trace = (W * W).sum() * scale
            gW = torch.zeros_like(W)
            loss, gdiag = self._factorized(W, trace, gW)
            total = (loss + self._yy + self.lam * d * trace) / n
            if backward:
                coef = 2.0 * scale * (self.lam * d - gdiag / math.sqrt(d))
                gW.add_(W * coef).div_(n)
                W.grad = gW
            return total
        if type(student) is UntiedStudent:
            return self._untied_total(student, backward)
        if type(student) is MultiHeadStudent:
            return self._multihead_total(student, backward)
        if type(student) is DirectStudent:
            S = student.matrix()
            d = S.shape[0]
            gS = torch.zeros_like(S)
            loss, gdiag = self._direct(S, gS)
            total = (loss + self._yy + self.lam * d * (S * S).sum()) / n
            if backward:
                gS.diagonal().sub_(gdiag / math.sqrt(d))
                gS.add_(S, alpha=2.0 * self.lam * d)
                student.A.grad = (0.5 * (gS + gS.T)).div_(n)
            return total
        return self._generic(student, backward)

    def _untied_total(self, student: UntiedStudent, backward: bool) -> torch.Tensor:
        W = student.W
        _, d, p = W.shape
        scale = 1.0 / math.sqrt(p * d)
        trace = (W[0] * W[1]).sum() * scale
        gW = torch.zeros_like(W)
        loss, gdiag = self._untied(W, trace, gW)
        reg_coef = self.lam * math.sqrt(d / p)
        total = (loss + self._yy + 0.5 * reg_coef * (W * W).sum()) / self.n
        if backward:
            cross = -scale * gdiag / math.sqrt(d)  # d(Tr M)/dW_Q = scale W_K and Q <-> K
            gW[0].add_(W[1] * cross)
            gW[1].add_(W[0] * cross)
            gW.add_(W, alpha=reg_coef).div_(self.n)
            W.grad = gW
        return total

    def _generic(self, student: nn.Module, backward: bool) -> torch.Tensor:
        """Any student module with ``logits(X)`` and ``regulariser(lam)``: the channel's logit
        gradient pulled back by autograd, chunk by chunk (no fast closed form)."""
        params = [p for p in student.parameters() if p.requires_grad]
        p0 = params[0]
        for p in params:
            p.grad = None
        loss = p0.new_zeros((), dtype=torch.float64)
        with torch.enable_grad():
            for Xc, _, tgt, M in self._chunks(p0.device, p0.dtype):
                h = student.logits(Xc)
                lc, G = self._dlogits(h.detach(), tgt, M)
                loss += lc
                if backward:
                    h.backward(G / self.n)
            reg = student.regulariser(self.lam)
            if backward:
                (reg / self.n).backward()
        return (loss + self._yy + reg.detach()) / self.n


def reference_objective_and_grad(
    student: nn.Module, data: Sequences, channel: Channel | str, beta: float, lam: float, backward: bool = True
) -> float:
    """Autograd evaluation of the same objective from the channel definitions (for tests)."""
    param = next(student.parameters())
    X = data.X.to(param.device, param.dtype)
    y = data.y.to(param.device, param.dtype)
    loss = (squared_error(predict(student, get_channel(channel), beta, X), y).sum() + student.regulariser(lam)) / len(
        data
    )
    if backward:
        loss.backward()
    return float(loss.detach())


def objective_and_grad(
    student: nn.Module,
    data: Sequences,
    channel: Channel | str,
    beta: float,
    lam: float,
    batch_size: int | None = None,
    backward: bool = True,
) -> float:
    """Per-sample objective ``L/n``; if ``backward``, writes its gradient into ``.grad``.

    Convenience wrapper building a one-off :class:`Objective`; optimisers build it once.
    """
    return float(Objective(data, channel, beta, lam, batch_size=batch_size)(student, backward))
