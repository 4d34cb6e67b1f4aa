"""Turn run directories (or W&B runs) of the fixed-code input study into tables, figures and a report.

Entry point: ``python -m analysis RUN_DIR [RUN_DIR ...] --out REPORT_DIR``.
The run-directory contract is SCHEMA.md at the repository root.
"""
