"""Click commands, one module per command group. `ragtriage.cli` assembles them."""
