"""Best-of-K selection on frozen pools, one home: ``faithgrpo select``.

=====================  ===========================================================
module                 job
=====================  ===========================================================
``families``           held-out questions per task family; the gold graders
``pools``              frozen candidate pools: sampled once, keyed by content, stored
``grading``            what selectors read of a completion (features)
``selectors``          the selection rules and `run_selection` (accuracy, audit)
``report``             grading + selection + regime of one family, JSON / Markdown
``command``            the ``faithgrpo select`` settings and run
``judge``, ``page``    the judge selector's scores; the results page
=====================  ===========================================================

Like ``generation``, ``metrics`` and ``report``, the folder holds no names: import each from its module.
"""
