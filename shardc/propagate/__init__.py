"""Stage 3, sharding propagation: a Program plus sources in, a sharding and its provenance per
value out; the passes around it and the explanation of its decisions."""
