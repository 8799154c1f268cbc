"""The baseline: a minimal, typical Channels app, measured beside the product in the same run.

A plain Django view inserts a row and `group_send`s it; a tutorial-style consumer forwards each
group message to its socket. It is served by daphne like the product, on the same database
engine and channel layer, so the ratios compare the applications and nothing else.
"""
