"""`ragtriage demo` and the Debian documentation helpers: a ready home with a KB, traffic, diagnoses and an
eval run over the Debian FAQ and Reference. Not part of the headless core; the core never imports it.
"""
