"""The Textual face: `TriageApp` (`ragtriage tui`) with its screens and widgets.

Screens run the headless core in workers (`case_data` gathers what the case screen shows) and get the
results back as messages; no core package imports this one.
"""
