"""analysis/stats"""
