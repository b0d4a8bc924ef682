"""What the SDK knows of the mirror (spark-on-k8s/jobs/mirror.py): its offset map and
the translation of consumer-group offsets from the source cluster to the target."""
