"""What a problem is: the frozen, validated ``Problem``; its channel, student and target, each an object
in a registry; and the ``Result`` every route returns.

A new channel, student or target is one class registered here; the routes above (state evolution,
simulation, AMP, Bayes) take a ``Problem`` and never name a particular one.
"""
