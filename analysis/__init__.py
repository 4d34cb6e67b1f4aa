"""Checkout alias only: `python -m analysis ...` runs `fixedcode analyze ...`.

The analysis lives in the package, fixedcode_study/analysis (reading -> statistics -> tables ->
figures -> report); this folder is not installed, so no top-level `analysis` package is claimed
in site-packages.
"""
