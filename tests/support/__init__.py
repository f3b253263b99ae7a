"""Helpers the tests share: real servers, processes, browsers, data homes and lake comparisons.

Test modules import helpers from here, never from one another or from a conftest."""
