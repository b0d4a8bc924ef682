"""The controller: broker membership, topic and partition metadata, placement, elections."""
