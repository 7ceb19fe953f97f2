"""The first stage: one walk of CPython's tree collects a file's facts (``facts.py``); rules
declare over them what a file must hold for them to fire (``triggers.py``)."""
