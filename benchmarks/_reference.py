"""The reference workload every benchmark prints beside its timings (:func:`singlehead.reference.reference_seconds`)."""

from singlehead.reference import reference_seconds

__all__ = ["reference_seconds"]
