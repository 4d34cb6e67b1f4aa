"""analysis/read"""
