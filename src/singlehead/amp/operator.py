"""The sensing operator of the attention-indexed model and its adjoint (see ``singlehead.amp``)."""

from __future__ import annotations

import math

import numpy as np
import torch

from singlehead.numerics.prox import (
    mat_to_vec,
    vec_to_mat,
)


class SensingOperator:
    """The linear map ``S -> (v_{mu k})`` (``n x K``) of the equivalent matrix-sensing problem.

    Parameters
    ----------
    X : (n, T, d) array
        Tokens.

    Notes
    -----
    ``forward(S)[mu] = mat_to_vec(h_mu(S))`` with ``h_ab(S) = (x_a^T S x_b - delta_ab Tr S)/sqrt d``
    (diagonal divided by ``sqrt 2``, ``singlehead.numerics.prox.mat_to_vec``);
    ``adjoint(g) = sum_mu (X_mu^T B_mu X_mu - Tr(B_mu) I)/sqrt d`` with ``B_mu = M(g_mu)/2``,
    so that ``<forward(S), g> = <S, adjoint(g)>_F`` for symmetric ``S``.

    Examples
    --------
    >>> from singlehead import Problem
    >>> from singlehead.sim.data import sample_sequences
    >>> problem = Problem(d=30, T=2, alpha=0.5, noise=0.5, lam=0.01)
    >>> S0 = problem.target.sample(problem.d, seed=0)
    >>> data = sample_sequences(problem, S0, problem.n, seed=1)
    >>> import numpy as np
    >>> from singlehead.amp import SensingOperator
    >>> op = SensingOperator(data.X)
    >>> op.forward(np.eye(problem.d)).shape             # n samples x K = T(T+1)/2 logits
    (450, 3)
    """

    def __init__(self, X: np.ndarray | torch.Tensor) -> None:
        # The dense algebra runs in torch (float64, CPU): mixing torch's OpenMP pool with
        # OpenBLAS threads from numpy makes both spin against each other on few cores.
        self.Xt = torch.as_tensor(X, dtype=torch.float64).contiguous()
        self.n, self.T, self.d = self.Xt.shape
        self.K = self.T * (self.T + 1) // 2
        self.X = self.Xt.numpy()
        self._Xf = self.Xt.reshape(-1, self.d)

    def logits(self, S: np.ndarray) -> np.ndarray:
        """``(n, T, T)`` logit matrices ``h_mu(S)``."""
        St = torch.as_tensor(S, dtype=torch.float64)
        XS = (self._Xf @ St).reshape(self.n, self.T, self.d)
        H = (XS @ self.Xt.transpose(1, 2)).numpy()
        idx = np.arange(self.T)
        H[:, idx, idx] -= float(torch.trace(St))
        return H / math.sqrt(self.d)

    def forward(self, S: np.ndarray) -> np.ndarray:
        """``(n, K)`` logit vectors."""
        return mat_to_vec(self.logits(S))

    def adjoint(self, g: np.ndarray) -> np.ndarray:
        """``sum_{mu k} g_{mu k} A_{mu k}`` as a symmetric ``d x d`` matrix."""
        B = torch.as_tensor(0.5 * vec_to_mat(g, self.T))  # (n, T, T)
        BX = (B @ self.Xt).reshape(-1, self.d)
        out = (self._Xf.T @ BX).numpy()
        out = 0.5 * (out + out.T)
        out[np.diag_indices(self.d)] -= float(torch.diagonal(B, dim1=1, dim2=2).sum())
        return out / math.sqrt(self.d)


def sym_eigh(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric eigendecomposition (ascending), in torch for the thread-pool reason above."""
    nu, U = torch.linalg.eigh(torch.as_tensor(0.5 * (R + R.T), dtype=torch.float64))
    return nu.numpy(), U.numpy()
