"""Query time: the stage interfaces (`types`), the pipeline that runs them in order (`pipeline`), and
the built-in stages: rewrite, production engines as routes, fusion, rerank with its features and
cross-encoders, lexical support and refusal. `factory` assembles a pipeline from one profile's settings.
"""
