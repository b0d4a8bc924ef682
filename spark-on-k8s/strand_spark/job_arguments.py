"""Argument types the jobs' command lines share (mirror and audit): each checks one
value and raises argparse's ArgumentTypeError with a message naming what is wrong,
so a bad argument exits 2 before Spark starts."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from strand_spark.naming import naming_policy
from strand_spark.provenance import validate_cluster_name

DEFAULT_MASTER = "local[2]"
_HOST_PORT = re.compile(r"^(?P<host>\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):(?P<port>[0-9]{1,5})$")


def host_port(text: str) -> str:
    """``HOST:PORT`` with a port from 1 to 65535."""
    match = _HOST_PORT.match(text)
    if not match or not 0 < int(match["port"]) < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (a gateway's address, "
                                         "e.g. 127.0.0.1:7070)")
    return text


def cluster_name(text: str) -> str:
    try:
        return validate_cluster_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def topic_list(text: str) -> tuple[str, ...]:
    topics = tuple(t.strip() for t in text.split(","))
    if not all(topics):
        raise argparse.ArgumentTypeError(f"{text!r}: name topics separated by commas, "
                                         "without empty names")
    if len(set(topics)) != len(topics):
        raise argparse.ArgumentTypeError(f"{text!r} names a topic twice")
    return topics


def pattern(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression: {exc}"
                                         ) from None
    return text


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return value


def add_cluster_pair(parser: argparse.ArgumentParser, verb: str) -> None:
    """The arguments both jobs take: the source and target clusters, which source
    topics (``verb``: what the job does to them) and how copies are named."""
    parser.add_argument("--source-bootstrap", required=True, type=host_port,
                        metavar="HOST:PORT", help="a gateway of the source cluster")
    parser.add_argument("--source-cluster", required=True, type=cluster_name,
                        metavar="NAME", help="the source cluster's name (the mirror writes "
                        "it in the provenance headers and, by default, the copies' names)")
    parser.add_argument("--target-bootstrap", required=True, type=host_port,
                        metavar="HOST:PORT", help="a gateway of the target cluster")
    parser.add_argument("--target-cluster", required=True, type=cluster_name,
                        metavar="NAME", help="the target cluster's name")
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--topics", type=topic_list, metavar="A,B",
                       help=f"the source topics to {verb}")
    which.add_argument("--topics-pattern", type=pattern, metavar="REGEX",
                       help=f"{verb} the source topics whose whole name matches (new ones "
                            "are followed)")
    parser.add_argument("--naming", default="prefix", type=naming,
                        metavar="prefix|identity|module:Class",
                        help="how the mirror names copies on the target (default prefix)")


@dataclass(frozen=True)
class ClusterPair:
    """What both jobs' settings start with (:func:`add_cluster_pair`'s arguments)."""

    source_bootstrap: str
    source_cluster: str
    target_bootstrap: str
    target_cluster: str
    topics: tuple[str, ...]
    topics_pattern: str | None
    naming: str


def cluster_pair_fields(parser: argparse.ArgumentParser, args: argparse.Namespace
                        ) -> dict[str, Any]:
    """:class:`ClusterPair`'s fields from the parsed arguments, checked together: the
    two clusters differ and the naming policy loads (else exit 2 through ``parser``)."""
    if args.source_cluster == args.target_cluster:
        parser.error(f"--source-cluster and --target-cluster must differ (both are "
                     f"{args.source_cluster!r})")
    try:
        naming_policy(args.naming)
    except ValueError as exc:
        parser.error(f"argument --naming: {exc}")
    return {"source_bootstrap": args.source_bootstrap, "source_cluster": args.source_cluster,
            "target_bootstrap": args.target_bootstrap, "target_cluster": args.target_cluster,
            "topics": args.topics or (), "topics_pattern": args.topics_pattern,
            "naming": args.naming}


def naming(text: str) -> str:
    """prefix, identity or module:Class. A policy of one's own is loaded when the job
    starts: its module may come with spark-submit's --py-files."""
    if text in ("prefix", "identity") or re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", text):
        return text
    raise argparse.ArgumentTypeError(f"naming policy {text!r}: use 'prefix', 'identity' "
                                     "or 'module:Class'")
