"""Terminal rendering (Rich) shared by the CLI and the TUI's widgets: tables fitted to the screen,
traces, logged-vs-replayed views, gold journeys, KB chunks and the monitor. No Textual.
"""
