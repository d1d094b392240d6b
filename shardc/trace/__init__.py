"""Stage 2, tracing: Tracer, Builder and bind record user code into IR."""
