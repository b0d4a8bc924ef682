"""The gateway's Kafka listener flags: off by default, the advertised address, and the
clear refusals (an unreachable advertised address), and the gateway's TLS served on
the Kafka port too."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.gateway.__main__ import parse_args
from services.gateway.kafka.listener import KafkaListenerSettings

TLS = Path(__file__).resolve().parents[2] / "support" / "tls"


def test_off_unless_asked_for() -> None:
    assert parse_args([]).kafka is None


def test_the_advertised_address_defaults_to_the_listen_address() -> None:
    settings = parse_args(["--kafka-listen", "10.0.0.5:9093"]).kafka
    assert settings == KafkaListenerSettings("10.0.0.5:9093", "10.0.0.5:9093")
    settings = parse_args(["--kafka-listen", "0.0.0.0:9093", "--kafka-advertise",
                           "strand-gateway.strand.svc:9093",
                           "--kafka-max-request-bytes", "1024"]).kafka
    assert settings is not None and settings.advertise == "strand-gateway.strand.svc:9093"
    assert settings.max_request_bytes == 1024


@pytest.mark.parametrize(("argv", "message"), [
    (["--kafka-listen", "0.0.0.0:9093"], "set --kafka-advertise"),
    (["--kafka-listen", "nohost"], "expected HOST:PORT"),
    (["--kafka-listen", "h:1", "--kafka-advertise", "h:port"], "expected HOST:PORT"),
    (["--kafka-advertise", "h:1"], "needs --kafka-listen"),
    (["--kafka-listen", "h:1", "--kafka-max-request-bytes", "0"], "must be positive"),
])
def test_refusals(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert message in capsys.readouterr().err


def test_a_tls_gateway_serves_its_tls_on_the_kafka_port() -> None:
    settings = parse_args(["--kafka-listen", "127.0.0.1:9093", "--tls-cert",
                           str(TLS / "service.pem"), "--tls-key", str(TLS / "service-key.pem"),
                           "--tls-ca", str(TLS / "ca.pem"), "--tls-client-auth", "required",
                           "--tls-service-names", "strand-*"]).kafka
    assert settings is not None and settings.tls is not None
    assert (settings.tls.cert, settings.tls.key, settings.tls.ca) == (
        TLS / "service.pem", TLS / "service-key.pem", TLS / "ca.pem")
    assert settings.tls.require_client_cert and settings.service_names == ("strand-*",)
    assert parse_args(["--kafka-listen", "127.0.0.1:9093"]).kafka == KafkaListenerSettings(
        "127.0.0.1:9093", "127.0.0.1:9093", tls=None)
