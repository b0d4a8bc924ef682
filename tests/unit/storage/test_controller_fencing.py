"""Storage nodes ignore a deposed controller: an answer stamped with an older
controller epoch than the one in etcd is refused (docs/architecture.md §5), and answers' typed
errors come through as StrandErrors."""

from __future__ import annotations

import pytest

from services.storage.peers import PeerClients
from strand.cluster.cache import MetadataCache
from strand.cluster.keys import KeySpace
from strand.cluster.model import ControllerRecord
from strand.errors import ErrorCode, FencedLeaderEpochError, NotControllerError


def clients(controller_epoch: int) -> PeerClients:
    keys = KeySpace("t")
    cache = MetadataCache(keys)
    cache.apply(keys.controller, ControllerRecord("c1", "127.0.0.1:1").to_json(),
                create_revision=controller_epoch, revision=controller_epoch)
    return PeerClients(cache, node_id=1)


def test_an_answer_from_the_current_controller_is_accepted() -> None:
    peers = clients(controller_epoch=40)
    peers._check_controller(40, 40, ErrorCode.NONE, "")


def test_an_answer_from_a_deposed_controller_is_ignored() -> None:
    peers = clients(controller_epoch=40)
    with pytest.raises(NotControllerError, match="deposed"):
        peers._check_controller(40, 12, ErrorCode.NONE, "")


def test_an_election_seen_while_the_call_was_out_fences_its_answer() -> None:
    peers = clients(controller_epoch=40)
    keys = peers.cache.keys
    # A new controller won while the request was in flight to the old one.
    peers.cache.apply(keys.controller, ControllerRecord("c2", "127.0.0.1:2").to_json(),
                      create_revision=55, revision=55)
    with pytest.raises(NotControllerError):
        peers._check_controller(40, 40, ErrorCode.NONE, "")


def test_typed_errors_of_the_answer_are_raised() -> None:
    peers = clients(controller_epoch=40)
    with pytest.raises(FencedLeaderEpochError, match="old epoch"):
        peers._check_controller(40, 40, ErrorCode.FENCED_LEADER_EPOCH, "old epoch")


def test_no_controller_known_is_not_controller() -> None:
    keys = KeySpace("t")
    peers = PeerClients(MetadataCache(keys), node_id=1)
    with pytest.raises(NotControllerError, match="no active controller"):
        peers._controller()
