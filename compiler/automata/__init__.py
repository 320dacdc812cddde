"""The automaton IR and its algebra: the bottom layer, which imports nothing above it.

``spec`` (the :class:`~compiler.automata.spec.Semiautomaton` data type), ``catalog``
(named automata), ``load`` (one entry point for dicts, JSON files and catalog names),
``errors``, the transformation ``semigroup``, permutation ``groups``, the ``holonomy``
decomposition and the verified Krohn-Rhodes ``cascade`` it yields (``decompose``),
line/box-world detection (``gridworld_detect``) and faithful scan representations
(``representation``).  Nothing here imports torch.
"""
