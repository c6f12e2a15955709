"""Settings, replay profiles and their presets: one strict TOML file plus `RAGTRIAGE_…` environment variables.

`settings` holds every section (`Settings`, `load_settings`); `sources` reads files and the environment
and words their errors; `profiles` resolves a named profile (one per production `pipeline_version`).
"""
