"""Strand's Kubernetes operator (kopf): turns ``Topic`` resources into topics and
``StrandUser`` resources into users (a SCRAM credential and its Secret, ACLs, quotas).

Run as ``python -m strand_operator --bootstrap HOST:PORT --namespace NS --cluster NAME``
(cli.py). The kopf side is thin (handlers.py: which Topics, when to reconcile, the
finalizer, kopf's settings); the rest is plain code, one concept per module:

* topic_spec: what a Topic asks for, its labels and annotations;
* observed: a topic as Strand has it; strand_gateway: the SDK's Admin calls to get it
  and change it, off the event loop;
* placement_requests: new placements from strand.cluster.placement (the controller's
  own function); config_drift: config changes; decisions: the plan for one topic;
* conflicts: which Topic owns a topic name; status: the Topic's status;
* reconciler: one pass (decide, act, report status and Events).

StrandUsers, the same way (user_handlers.py the kopf side):

* user_spec: what a StrandUser asks for; user_secret: the Secret holding its password;
* user_plan: credential, ACL and quota changes; conflicts: which StrandUser owns a name;
* kube_secrets: Secrets through kopf's API client; strand_gateway: the Admin's calls;
* user_reconciler: one pass, and the deletion.
"""
