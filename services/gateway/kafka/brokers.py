"""What Kafka clients are told the brokers are: the gateways, as ONE logical broker.

Kafka clients connect to the brokers Metadata lists and send each partition's requests
to its leader. Strand's leaders are storage nodes, which clients never reach: the
gateways route every request. So every gateway answers Metadata with the same single
broker — id :data:`~services.gateway.kafka.call.GATEWAY_BROKER_ID`, at the address of
``--kafka-advertise`` — leading every partition and coordinating every group and
transactional id; that broker is also the controller (admin clients send topic
changes there).

Why one logical broker rather than each gateway registering its own address in etcd
and partitions' leaders spread over them: gateways are stateless and interchangeable
(any gateway serves any partition), and clients reach them the way they reach them
today, through one address — in Kubernetes a Service in front of N gateways, from
outside a load balancer or ingress for that Service. Per-gateway addresses would have
to be reachable one by one from wherever the client runs (pod IPs are not, outside the
cluster), would change as gateways come and go (each change a metadata refresh and a
reconnect for every client), and would spread a client's partitions over gateways
that all do the same work anyway. With one address, the Service spreads clients'
connections over the gateways (one connection per client and broker, as Kafka clients
keep), and a gateway going away costs its clients a reconnect to another, nothing
more. Fetch sessions (KIP-227) live in the gateway a connection reached: after a
reconnect to another gateway the client is told FETCH_SESSION_ID_NOT_FOUND and starts
a new session, as with a Kafka broker restart.

The partitions' replica and ISR lists are Strand's own storage node ids (tools show the
replication factor and the in-sync count from them); replicas whose node is not
registered are the offline replicas.
"""

from __future__ import annotations

from types import ModuleType

from services.gateway.kafka.call import KafkaCall
from services.gateway.kafka.messages import build

__all__ = ["NO_LEADER", "broker_entries"]

NO_LEADER = -1


def broker_entries(module: ModuleType, class_name: str, call: KafkaCall) -> tuple[object, ...]:
    """The one broker a response lists, as ``module.class_name`` entries."""
    return (build(module, class_name, node_id=call.broker_id, host=call.advertised_host,
                  port=call.advertised_port, rack=None),)
