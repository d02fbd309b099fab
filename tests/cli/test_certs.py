"""`gpu-admission certs generate`, and what `certs rotate` refuses before it reaches a cluster.

The commands run in-process through a parser built with ``add_certs_commands``, the
way ``gpu-admission`` builds its own; one test runs the installed command. Every file
goes to tmp_path. What `rotate` checks before it talks to a cluster is tested here; its
runs against a cluster are end-to-end tests on a real kube-apiserver
(tests/e2e/test_certs_rotate_command.py, test_cert_rotation.py and test_install.py).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import ssl
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from webhook.cli.certs import add_certs_commands
from webhook.tls.files import write_key_pair
from webhook.tls.pki import (
    CertificateAuthority,
    certificates_from_pem,
    create_ca,
    is_issued_by,
    subject_alt_names,
)

REPOSITORY = Path(__file__).resolve().parents[2]
SERVICE_NAMES = [
    "hook",
    "hook.gpu",
    "hook.gpu.svc",
    "hook.gpu.svc.cluster.local",
]


def certs_command(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="gpu-admission")
    add_certs_commands(parser.add_subparsers())
    args = parser.parse_args(["certs", *argv])
    code: int = args.run(args)
    return code


def generate(out: Path, *extra: str) -> int:
    return certs_command(
        "generate", "--service", "hook", "--namespace", "gpu", "--out", str(out), *extra
    )


def read(path: Path) -> x509.Certificate:
    return certificates_from_pem(path.read_bytes())[0]


def lifetime(certificate: x509.Certificate) -> dt.timedelta:
    return certificate.not_valid_after_utc - certificate.not_valid_before_utc


# --- generate -----------------------------------------------------------------------------------


def test_generate_writes_a_ca_and_a_serving_pair_with_private_keys(tmp_path: Path) -> None:
    out = tmp_path / "certs"

    assert generate(out) == 0

    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "ca.crt",
        "ca.key",
        "tls.crt",
        "tls.key",
    ]
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for key in ("ca.key", "tls.key"):
        assert stat.S_IMODE((out / key).stat().st_mode) == 0o600
    assert is_issued_by(read(out / "tls.crt"), read(out / "ca.crt"))


def test_generate_covers_the_service_names_and_the_extra_ones(tmp_path: Path) -> None:
    generate(tmp_path, "--dns", "hook.example.com", "--ip", "10.1.2.3", "--ip", "::1")

    names, addresses = subject_alt_names(read(tmp_path / "tls.crt"))

    assert names == [*SERVICE_NAMES, "hook.example.com"]
    assert addresses == ["10.1.2.3", "::1"]


def test_generate_gives_the_ca_ten_years_and_the_leaf_one_by_default(tmp_path: Path) -> None:
    generate(tmp_path)

    ca_life = lifetime(read(tmp_path / "ca.crt"))
    leaf_life = lifetime(read(tmp_path / "tls.crt"))
    assert dt.timedelta(days=3650) <= ca_life <= dt.timedelta(days=3650, minutes=5)
    assert dt.timedelta(days=365) <= leaf_life <= dt.timedelta(days=365, minutes=5)


def test_generate_honours_days_and_ca_days(tmp_path: Path) -> None:
    generate(tmp_path, "--days", "30", "--ca-days", "90")

    assert lifetime(read(tmp_path / "tls.crt")).days == 30
    assert lifetime(read(tmp_path / "ca.crt")).days == 90


def test_generate_prints_only_the_ca_bundle_on_stdout_and_where_the_files_are_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path)

    printed = capsys.readouterr()
    assert base64.b64decode(printed.out.strip()) == (tmp_path / "ca.crt").read_bytes()
    assert printed.out.count("\n") == 1
    assert f"CA (created): {tmp_path / 'ca.crt'}, {tmp_path / 'ca.key'}" in printed.err
    assert f"serving certificate: {tmp_path / 'tls.crt'}, {tmp_path / 'tls.key'}" in printed.err
    assert "hook.gpu.svc.cluster.local" in printed.err


def test_a_second_generate_reuses_the_ca_so_the_ca_bundle_stays_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    generate(tmp_path)
    first_bundle = capsys.readouterr().out
    first_leaf = read(tmp_path / "tls.crt")

    generate(tmp_path)

    printed = capsys.readouterr()
    assert printed.out == first_bundle
    assert "CA (reused)" in printed.err
    assert read(tmp_path / "tls.crt").serial_number != first_leaf.serial_number


def test_generate_writes_to_certs_dev_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    assert certs_command("generate", "--service", "hook", "--namespace", "gpu") == 0

    assert (tmp_path / "certs" / "dev" / "tls.crt").exists()


def test_the_generated_pair_serves_tls_to_a_client_trusting_the_ca(tmp_path: Path) -> None:
    generate(tmp_path)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    client_context = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))

    to_server, to_client = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_context.wrap_bio(to_client, to_server, server_hostname="hook.gpu.svc")
    server_in, server_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    server = server_context.wrap_bio(server_in, server_out, server_side=True)
    finished: set[str] = set()
    for _ in range(10):
        for name, side in (("client", client), ("server", server)):
            if name not in finished:
                try:
                    side.do_handshake()
                    finished.add(name)
                except ssl.SSLWantReadError:
                    pass
        server_in.write(to_server.read())
        to_client.write(server_out.read())

    assert finished == {"client", "server"}
    assert client.getpeercert()["subject"] == ((("commonName", "hook.gpu.svc"),),)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--service", "Hook"], "invalid service name 'Hook'"),
        (["--namespace", "a.b"], "invalid namespace name 'a.b'"),
        (["--ip", "10.0.0.300"], "invalid IP address '10.0.0.300'"),
        (["--dns", "10.0.0.1"], "is an IP address: pass it in ip_addresses"),
        (["--days", "0"], "--days must be at least 1, got 0"),
        (["--days", "400", "--ca-days", "365"], "--ca-days (365) must be more than --days (400)"),
    ],
)
def test_bad_input_exits_2_with_one_line_saying_why_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    out = tmp_path / "certs"
    values = {"--service": "hook", "--namespace": "gpu"}
    extra = []
    for flag, value in zip(arguments[::2], arguments[1::2], strict=True):
        if flag in values:
            values[flag] = value
        else:
            extra += [flag, value]
    named = [item for pair in values.items() for item in pair]

    code = certs_command("generate", *named, "--out", str(out), *extra)

    printed = capsys.readouterr()
    assert code == 2
    assert printed.out == ""
    assert printed.err.startswith("gpu-admission certs generate: ")
    assert message in printed.err
    assert printed.err.count("\n") == 1
    assert not out.exists()


def test_a_ca_certificate_without_its_key_is_refused_rather_than_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ca_cert, ca_key = write_key_pair(tmp_path, "ca", create_ca("kept CA"))
    ca_key.unlink()
    before = ca_cert.read_bytes()

    assert generate(tmp_path) == 2

    assert "ca.crt exists but" in capsys.readouterr().err
    assert ca_cert.read_bytes() == before
    assert not (tmp_path / "tls.crt").exists()


def test_an_expired_ca_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A CA that expired one day ago, made by hand since create_ca only makes valid ones.
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "old CA")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=10))
        .not_valid_after(now - dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    write_key_pair(tmp_path, "ca", CertificateAuthority(certificate, key))

    assert generate(tmp_path) == 2
    assert "the CA expired at" in capsys.readouterr().err


def test_missing_service_is_an_argparse_error_with_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        certs_command("generate", "--namespace", "gpu")

    assert exited.value.code == 2
    assert "--service" in capsys.readouterr().err


# --- rotate: what is checked before talking to a cluster ----------------------------------------


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--threshold", "1.5"], "threshold must be between 0 and 1, got 1.5"),
        (["--days", "4000"], "a CA outlives its leaves"),
    ],
)
def test_rotate_refuses_bad_settings_with_exit_2(
    capsys: pytest.CaptureFixture[str], arguments: list[str], message: str
) -> None:
    code = certs_command("rotate", "--namespace", "gpu", "--secret", "tls", *arguments)

    assert code == 2
    assert message in capsys.readouterr().err


def test_rotate_ca_and_drop_old_ca_cannot_be_asked_for_together(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        certs_command(
            "rotate", "--namespace", "gpu", "--secret", "tls", "--rotate-ca", "--drop-old-ca"
        )

    assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_rotate_with_a_missing_kubeconfig_exits_1_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.kubeconfig"

    code = certs_command(
        "rotate", "--kubeconfig", str(missing), "--namespace", "gpu", "--secret", "tls"
    )

    assert code == 1
    assert capsys.readouterr().err == (
        f"gpu-admission certs rotate: kubeconfig {missing}: no such file\n"
    )


def test_rotate_help_explains_the_two_steps_of_a_ca_rotation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        certs_command("rotate", "--help")

    text = capsys.readouterr().out
    assert "certs rotate --rotate-ca" in text
    assert "certs rotate --drop-old-ca" in text


# --- the installed command ----------------------------------------------------------------------


def test_gpu_admission_certs_generate_runs_as_a_command(tmp_path: Path) -> None:
    arguments = ["--service", "hook", "--namespace", "gpu", "--out", str(tmp_path / "out")]
    finished = subprocess.run(
        [sys.executable, "-m", "webhook.cli", "certs", "generate", *arguments],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert finished.returncode == 0, finished.stderr
    assert base64.b64decode(finished.stdout) == (tmp_path / "out" / "ca.crt").read_bytes()
