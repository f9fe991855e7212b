"""Judging theory against simulation and writing it up: tidy tables and agreement rows (``compare``),
the verdict rule (``verdict``: a declared tolerance per check, difference and equivalence tests, Holm per figure
at 5 %, four verdicts) and the self-contained HTML report
(``write``, ``html``).
"""
