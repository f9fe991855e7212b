"""Mathematics that knows no ``Problem``: the channel's output prox and its Newton steps, the attention
maps, the free-probability engine (``spectra``), seeded random streams, and where on-disk caches live.

Everything above (``model``, ``state_evolution``, ``sim``) builds on these; nothing here imports them.
"""
