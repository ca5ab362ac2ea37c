"""Attention helpers of the seed model (see ../model.py)."""
