"""The simulation route: sampled sequences, the ERM objective, its training loops (torch), ``simulate``,
the overlaps of a learned matrix, and the convex reference solver.
"""
