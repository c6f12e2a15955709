"""Terminal rendering (Rich) shared by the CLI; no Textual."""
