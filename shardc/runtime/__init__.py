"""Stage 5, running: the one boundary to jaxlib (compile, execute, C++ dispatch), meshes and
devices, eager execution of single ops, multi-process set-up."""
