"""Settings, replay profiles and their presets: one strict TOML file plus `RAGTRIAGE_…` environment variables.

`settings` holds every section (`Settings`); `sources` reads the environment and profile files, words
validation errors and edits the file; `profiles` resolves a named profile (one per production
`pipeline_version`); `loading.load_settings` puts them together and checks every profile.
"""
