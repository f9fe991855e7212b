"""singlehead: the high-dimensional theory of single-head tied attention as a working instrument.

Source: *Single-Head Attention in High Dimensions: A Theory of Generalization, Weights
Spectra, and Scaling Laws* (arXiv 2509.24914). Conventions: see :class:`Problem` and
the docs page :ref:`theory`.

The public API is what this module exports (``__all__``) and the public subpackages the API
reference (``docs/api.rst``) documents; every other module is internal and may change.

Public names (the heavy ones are imported on first use)::

    Problem, MPTarget, PowerLawTarget, CustomTarget, UntiedMPTarget, Result
    SEOptions, TrainOptions, AMPOptions  the settings of theory, simulate and amp (``options=``)
    simulate(problem, seed)              ERM simulation (torch, cpu/cuda)
    theory(problem), theory_curve        state evolution of the ERM minimiser
    stability(problem, result)           its replica-symmetry check
    amp(problem, seed)                   GAMP on an instance (ERM or Bayes)
    bayes_optimal(problem)               Bayes-optimal baseline
    interpolation_threshold(problem), perfect_recovery_threshold(problem), ...
    reproduce(mode, out)                 the paper's figures and an HTML report
    tune(problem), tune_curve, alpha_for_error   the weight decay of lowest predicted test error
    phase_diagram(problem, x, y)         regions and thresholds over two parameters (PhaseDiagram)

The extension API (a new channel, student or target is one registered subclass)::

    Channel, register_channel, get_channel, channel_names
    Student, register_student, get_student, student_names
    Target, SpectralTarget, TargetParam, register_target, get_target, target_names, target_from_dict
"""

from __future__ import annotations

__version__ = "0.1.0"

from importlib import import_module
from typing import Any

from singlehead.model.channels import Channel, channel_names, get_channel, register_channel  # noqa: E402
from singlehead.model.problem import CustomTarget, MPTarget, PowerLawTarget, Problem  # noqa: E402
from singlehead.model.results import Result  # noqa: E402
from singlehead.model.students import Student, get_student, register_student, student_names  # noqa: E402
from singlehead.model.targets import (  # noqa: E402
    SpectralTarget,
    Target,
    TargetParam,
    UntiedMPTarget,
    get_target,
    register_target,
    target_from_dict,
    target_names,
)

_LAZY = {
    "SEOptions": "singlehead.state_evolution",
    "TrainOptions": "singlehead.sim.simulation",
    "AMPOptions": "singlehead.amp",
    "simulate": "singlehead.sim.simulation",
    "theory": "singlehead.state_evolution",
    "theory_curve": "singlehead.state_evolution",
    "stability": "singlehead.state_evolution",
    "amp": "singlehead.amp",
    "bayes_optimal": "singlehead.bayes",
    "interpolation_threshold": "singlehead.thresholds",
    "untied_interpolation_threshold": "singlehead.thresholds",
    "untied_perfect_recovery_threshold": "singlehead.thresholds",
    "perfect_recovery_threshold": "singlehead.thresholds",
    "bayes_perfect_recovery_threshold": "singlehead.thresholds",
    "solve_reference": "singlehead.sim.convex",
    "reproduce": "singlehead.figures.reproduce",
    "tune": "singlehead.analysis.tuning",
    "tune_curve": "singlehead.analysis.tuning",
    "alpha_for_error": "singlehead.analysis.tuning",
    "phase_diagram": "singlehead.analysis.phase",
    "PhaseDiagram": "singlehead.analysis.phase",
}

# The extension API: base classes and registries of channels, students and targets.
_EXTENSION = [
    "Channel",
    "register_channel",
    "get_channel",
    "channel_names",
    "Student",
    "register_student",
    "get_student",
    "student_names",
    "Target",
    "SpectralTarget",
    "TargetParam",
    "register_target",
    "get_target",
    "target_names",
    "target_from_dict",
]

__all__ = [
    "Problem",
    "MPTarget",
    "PowerLawTarget",
    "CustomTarget",
    "UntiedMPTarget",
    "Result",
    "__version__",
    *_LAZY,
    *_EXTENSION,
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'singlehead' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
