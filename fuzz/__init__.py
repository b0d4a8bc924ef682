"""Coverage-guided fuzzing (atheris, libFuzzer) of every decoder that takes outside input.

``fuzz.harnesses`` holds one harness per decoder family, ``fuzz.engine`` runs one
under libFuzzer, ``fuzz.run`` runs them all and writes a JSON summary, and
``fuzz.make_corpus`` writes the kept seed corpus (``fuzz/corpus/<harness>/``) from
the real builders. See docs/fuzzing.md.
"""
