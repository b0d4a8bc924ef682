"""The TLS flags every service takes (strand.service.entry): --tls-health-port gives
the service's TLS a plaintext health port, and only with a certificate."""

from __future__ import annotations

import pytest

from strand.security.tls import ServiceTls
from strand.service.entry import new_parser, service_tls
from tests.support.tls import CA, cert, key

FILES = ["--tls-cert", str(cert("service")), "--tls-key", str(key("service")),
         "--tls-ca", str(CA)]


def _tls(argv: list[str]) -> ServiceTls | None:
    parser = new_parser("strand-test", None, "127.0.0.1:9090")
    return service_tls(parser, parser.parse_args(argv))


def test_the_health_port_is_part_of_the_service_tls() -> None:
    with_port, without = _tls([*FILES, "--tls-health-port", "9091"]), _tls(FILES)
    assert with_port is not None and with_port.plaintext_health_port == 9091
    assert without is not None and without.plaintext_health_port == 0


def test_the_health_port_comes_from_the_environment_too(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRAND_TLS_HEALTH_PORT", "9191")
    tls = _tls(FILES)
    assert tls is not None and tls.plaintext_health_port == 9191


@pytest.mark.parametrize("argv", [["--tls-health-port", "9091"],
                                  [*FILES, "--tls-health-port", "70000"]])
def test_a_health_port_that_cannot_work_is_refused(
        argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _tls(argv)
    assert exited.value.code == 2
    assert "--tls-health-port" in capsys.readouterr().err
