"""Altair chart builders and the report template."""
