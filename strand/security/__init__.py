"""Transport security shared by the services, the SDK and the launcher."""
