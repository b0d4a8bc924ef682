"""What a launcher reads of a running cluster's metadata straight from etcd, through
etcd's JSON gateway (``/v3/kv/range``): plain HTTP(S), so a test or a benchmark needs
no etcd client, no event loop and no service to ask."""

from __future__ import annotations

import base64
import json
import urllib.error
from typing import TYPE_CHECKING

from strand.cluster.keys import KeySpace
from strand.coordination.shards import GROUP_TOPIC, TRANSACTION_TOPIC, preferred_owner

if TYPE_CHECKING:
    from strand.security.tls import ClientTls

__all__ = ["EtcdUnreachable", "etcd_range", "shards_settled"]

EtcdUnreachable = (OSError, urllib.error.URLError)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def etcd_range(endpoint: str, key: str, prefix: bool = False,
               timeout: float = 2.0, tls: ClientTls | None = None) -> dict[str, bytes]:
    """Keys and values under ``key`` (or exactly ``key``), over HTTPS with ``tls``;
    raises one of ``EtcdUnreachable`` when etcd does not answer."""
    import ssl
    import urllib.request  # here: with http.client and email, 60 ms the CLI's start skips

    raw = key.encode()
    body: dict[str, str] = {"key": _b64(raw)}
    if prefix:
        end = bytearray(raw)
        end[-1] += 1  # keys here are ASCII paths: no 0xff byte to carry
        body["range_end"] = _b64(bytes(end))
    context = None
    if tls is not None:
        context = ssl.create_default_context(cafile=tls.ca)
        if tls.cert is not None and tls.key is not None:
            context.load_cert_chain(tls.cert, tls.key)
    scheme = "https" if tls is not None else "http"
    request = urllib.request.Request(f"{scheme}://{endpoint}/v3/kv/range",
                                     data=json.dumps(body).encode(), method="POST")
    with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
        answer = json.load(response)
    return {base64.b64decode(kv["key"]).decode(): base64.b64decode(kv.get("value", ""))
            for kv in answer.get("kvs", [])}


def shards_settled(endpoint: str, cluster: str, instances: set[str],
                   transactions: bool = False, tls: ClientTls | None = None) -> bool:
    """Whether exactly ``instances`` are registered as group coordinators (transaction
    coordinators with ``transactions``) and every shard of their internal topic is
    held by the instance rendezvous hashing gives it: until then shards still move
    (and with them a coordinator's in-memory state, such as the member ids a join
    handed out but no member has used yet)."""
    keys = KeySpace(cluster)
    topic_name, registrations, shard_keys = (
        (TRANSACTION_TOPIC, keys.txn_coordinators, keys.txn_shards) if transactions
        else (GROUP_TOPIC, keys.coordinators, keys.group_shards))
    try:
        topic = etcd_range(endpoint, keys.topic(topic_name), tls=tls).get(
            keys.topic(topic_name))
        registered = {key.rsplit("/", 1)[1]
                      for key in etcd_range(endpoint, registrations, prefix=True, tls=tls)}
        owners = {int(key.rsplit("/", 1)[1]): str(json.loads(value)["instance_id"])
                  for key, value in etcd_range(endpoint, shard_keys, prefix=True,
                                               tls=tls).items()}
    except EtcdUnreachable:
        return False
    if topic is None or registered != instances:
        return False
    shards = int(json.loads(topic)["partitions"])
    return all(owners.get(k) == preferred_owner(k, registered) for k in range(shards))
