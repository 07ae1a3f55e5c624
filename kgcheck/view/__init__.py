"""The run explorer (``kgcheck view``): runs, paged facts, each fact's steps, and diffs."""
