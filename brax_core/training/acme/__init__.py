"""Utilities adapted in spirit from Acme: running observation statistics."""
