"""Stage 1, the IR: avals, shardings and meshes as data, values/ops/programs, primitives and their
typed traits, factor rules, the text printer, parser and verifier. Imports nothing above it."""
