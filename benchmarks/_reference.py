"""The reference workload every benchmark prints beside its timings (:func:`singlehead.runs.reference.reference_seconds`)."""

from singlehead.runs.reference import reference_seconds

__all__ = ["reference_seconds"]
