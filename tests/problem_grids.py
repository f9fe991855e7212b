"""The random grids of valid problems used by the tests and benchmarks.

The grid is library API, :func:`singlehead.runs.random_problems`; this module keeps the
import ``from problem_grids import random_problems`` of the tests and benchmarks working.
"""

from singlehead.runs.grid import random_problems

__all__ = ["random_problems"]
