"""The mirror job's parts (spark-on-k8s/jobs/mirror.py is its entry point): topics kept
in step on the target (topic_sync), the copy of one partition range in a prepared
transaction (copy_task), and the streaming query that commits each micro-batch exactly
once (job)."""
