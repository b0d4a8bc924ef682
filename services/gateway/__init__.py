"""The gateway: the client-facing API, stateless, routing to partition leaders."""
