"""Rendering: the only layer that prints, imports rich, or words results for a person."""
