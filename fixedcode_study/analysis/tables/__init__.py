"""analysis/tables"""
