"""What a model call carries in its metadata: which fact is being asked, and how.

Graph nodes set these keys on every call (``kgcheck.graphs.calls``); replay reads them to
find the recorded answer, and traces and callbacks see them. They live here, below both, so
that neither has to import the other.
"""

from __future__ import annotations

FACT_ID = "kgcheck_fact_id"
DATASET = "kgcheck_dataset"
# The label of the strategy asking (its verdicts' ``method``), for traces.
METHOD = "kgcheck_method"
# Which of the study's recorded answers replay serves the call (a strategy's ``REPLAYS``);
# absent for strategies the study did not run.
RECORDED_METHOD = "kgcheck_recorded"
STEP = "kgcheck_step"
# Which of k independent draws of the same call this is (self-consistency's sample index).
SAMPLE = "kgcheck_sample"
# Which repeat of a run with --repeats asks (0, 1, ...); absent in a run without repeats.
REPEAT = "kgcheck_repeat"
RUN_ID = "kgcheck_run_id"
