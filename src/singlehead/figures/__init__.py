"""The reproduction's figures: each a frozen spec and four functions (grid -> run -> plot -> caption)
registered in ``figspec``; ``reproduce`` runs them through the runner and writes the report.
"""
