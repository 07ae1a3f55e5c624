"""Data access, the lowest layer: facts, datasets, recorded answers, a user's triples.

Facts and verdicts, the upstream FactCheck layout, datasets with gold labels, the study's
recorded answers, and the triple files of a user's own KG.

Nothing here imports from the layers above (providers, retrievers, graphs, evals, the shell).
"""
