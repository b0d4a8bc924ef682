"""Strand's tests. A package, so that every module imports by its full name
(``tests.integration.test_sdk_admin``) and shared helpers come from ``tests.support``."""
