"""The TUI's widgets: the queue and candidate tables, the counts bar, the query, chunk-preview and
diagnosis panels, the gold-journey strip, the monitor panel and the metric plot.
"""
