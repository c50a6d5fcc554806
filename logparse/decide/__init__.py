"""Observations to a verdict: one module per question a report answers (candidates and echoes,
classification, the choice of root cause, where it failed, at which stage, what to do), and the
verdict that builds the Report. Nothing after this package changes a verdict."""
