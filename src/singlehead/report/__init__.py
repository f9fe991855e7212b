"""Judging theory against simulation and writing it up: tidy tables and agreement rows (``compare``),
the verdict rule (``verdict``: one family per figure, Holm at 5 %) and the self-contained HTML report
(``write``, ``html``).
"""
