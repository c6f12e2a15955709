"""The TUI's screens: the queue, the case (replay, diagnosis, labelling), the eval runs, the monitor,
the help screen, and the modals for notes, confirmations and gold search.
"""
