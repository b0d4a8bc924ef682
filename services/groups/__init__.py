"""The group coordinator service: consumer groups and their committed offsets."""
