"""Human review of a run: the session over the ``review`` graph, and its local page.

``session`` drives the graph (one paused thread per verdict), ``server`` serves the page from
``static/``; the decisions go to the run folder's ``labels.csv`` (``kgcheck.data.runfolder``).
"""
