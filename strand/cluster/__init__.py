"""Cluster metadata shared by the services: the etcd key layout, the records stored
there, and a metadata cache kept current by an etcd watch."""
