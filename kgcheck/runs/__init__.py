"""Running checks over many facts.

``runner`` is the batch runner (resumable, bounded concurrency, progress); ``engines`` and
``ray_engine`` are where graphs execute (this process or a Ray cluster); ``concurrency``
adapts how many facts are in flight; ``consensus`` runs multi-model votes; ``dry_run``
estimates a run before it starts; ``importing`` turns verdicts made elsewhere into a run;
``grid`` and ``sweeps`` run every cell of a sweep.
"""
