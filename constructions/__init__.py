"""Transformer constructions: residual workspace, gadgets, one module per theorem,
the model and its assembly."""
