"""IR-to-IR transforms (autodiff), written against the ops' primitives."""
