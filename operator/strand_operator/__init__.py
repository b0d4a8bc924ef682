"""Strand's Kubernetes operator (kopf): turns ``Topic`` resources into topics."""
