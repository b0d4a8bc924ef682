"""Strand's services: one package per service, domain modules free of gRPC."""
