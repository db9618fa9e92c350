"""SASL mechanisms in process: JAAS parsing, PLAIN, and SCRAM against RFC 7677's test vector.

The wire (SaslHandshake, SaslAuthenticate, real clients) is tested in tests/broker/test_sasl_listeners.py
and tests/integration/test_sasl_clients.py.
"""

from __future__ import annotations

import base64

import pytest

from broker.config.sasl_config import listener_sasl_config
from broker.security.credential_cache import CredentialCache, ScramCredentialsFile
from broker.security.sasl_server import PlainSaslServer, SaslAuthenticationError, SaslError, ScramSaslServer
from client.jaas_config import JaasConfigError, parse_jaas_config, single_login_module
from client.sasl import PlainSaslClient, SaslSettings, ScramSaslClient
from client.scram import ScramCredential, ScramMechanism

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')

# RFC 7677 section 3.
RFC_USER, RFC_PASSWORD = "user", "pencil"
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


# -- JAAS -------------------------------------------------------------------------------------
def test_jaas_entries_with_quoted_and_bare_values() -> None:
    entry = single_login_module(PLAIN_JAAS)
    assert entry.login_module == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert entry.control_flag == "required"
    assert entry.options == {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
                             "user_alice": "alice-secret"}
    two = parse_jaas_config('a.B Optional k=v x="a;b \\" c"; c.D required;')
    assert [(e.login_module, e.control_flag, e.options) for e in two] == [
        ("a.B", "optional", {"k": "v", "x": 'a;b " c'}), ("c.D", "required", {})]
    assert "secret" not in repr(entry)


@pytest.mark.parametrize(("text", "message"), [
    ("a.B required user=\"x\"", "not terminated by semi-colon"),
    ("a.B;", "control flag not specified"),
    ("a.B always;", "Invalid login module control flag"),
    ("a.B required user=;", "Value not specified for key 'user'"),
    ("a.B required password=\"secret", "unterminated"),
])
def test_bad_jaas_is_refused_without_quoting_values(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message) as raised:
        parse_jaas_config(text)
    assert "secret" not in str(raised.value)


def test_broker_jaas_needs_one_module() -> None:
    with pytest.raises(JaasConfigError, match="contains 2 login modules"):
        single_login_module("a.B required; c.D required;")


def test_listener_settings_follow_kafkas_prefix_rules() -> None:
    extra = {"listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
             "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN,GSSAPI,SCRAM-SHA-512"}
    config = listener_sasl_config(["GSSAPI"], extra, "SASL_SSL")
    assert config.mechanisms == ("PLAIN", "SCRAM-SHA-512")  # GSSAPI is not served: never offered
    assert dict(config.plain_users) == {"admin": "admin-secret", "alice": "alice-secret"}
    assert config.credentials_of_broker("PLAIN") == ("admin", "admin-secret")
    assert "secret" not in repr(config)
    # Another listener has the broker-wide mechanisms and no JAAS of its own.
    assert listener_sasl_config(["SCRAM-SHA-256"], extra, "OTHER").mechanisms == ("SCRAM-SHA-256",)
    # A bare sasl.jaas.config names no mechanism: ignored by a broker, as by Kafka.
    with pytest.raises(ValueError, match="PLAIN without a PlainLoginModule"):
        listener_sasl_config(["PLAIN"], {"sasl.jaas.config": PLAIN_JAAS}, "SASL_PLAINTEXT")


# -- PLAIN ------------------------------------------------------------------------------------
def test_plain_accepts_known_users_only() -> None:
    users = {"alice": "alice-secret"}
    server = PlainSaslServer(users)
    token = PlainSaslClient("alice", "alice-secret").evaluate(b"")
    assert token is not None
    assert server.evaluate_response(token) == b""
    assert server.complete and server.authorization_id == "alice"
    for user, password in (("alice", "wrong"), ("mallory", "alice-secret")):
        with pytest.raises(SaslAuthenticationError, match=r"^Authentication failed: Invalid username or password$"):
            PlainSaslServer(users).evaluate_response(b"\0" + user.encode() + b"\0" + password.encode())
    with pytest.raises(SaslError, match="expected 3 tokens, got 2"):
        PlainSaslServer(users).evaluate_response(b"alice\0alice-secret")
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        PlainSaslServer(users).evaluate_response(b"bob\0alice\0alice-secret")


# -- SCRAM ------------------------------------------------------------------------------------
def test_scram_client_reproduces_rfc_7677() -> None:
    client = ScramSaslClient(ScramMechanism.SCRAM_SHA_256, RFC_USER, RFC_PASSWORD, nonce=RFC_CLIENT_NONCE)
    assert client.evaluate(b"") == RFC_CLIENT_FIRST
    assert client.evaluate(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    assert client.evaluate(RFC_SERVER_FINAL) is None
    assert client.complete


def test_scram_server_reproduces_rfc_7677(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("broker.security.sasl_server.secure_random_string", lambda: RFC_SERVER_NONCE)
    credential = ScramCredential.generate(ScramMechanism.SCRAM_SHA_256, RFC_PASSWORD, 4096, salt=RFC_SALT)
    server = ScramSaslServer(ScramMechanism.SCRAM_SHA_256, lambda m, user: credential if user == RFC_USER else None)
    assert server.evaluate_response(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.authorization_id == RFC_USER


def _scram_exchange(mechanism: ScramMechanism, stored: ScramCredential | None, password: str) -> ScramSaslServer:
    server = ScramSaslServer(mechanism, lambda m, user: stored if user == "alice" else None)
    client = ScramSaslClient(mechanism, "alice", password)
    token = client.evaluate(b"")
    while token is not None and not server.complete:
        token = client.evaluate(server.evaluate_response(token))
    return server


@pytest.mark.parametrize("mechanism", list(ScramMechanism))
def test_scram_round_trip_and_wrong_password(mechanism: ScramMechanism) -> None:
    credential = ScramCredential.generate(mechanism, "alice-secret", 8192)
    assert _scram_exchange(mechanism, credential, "alice-secret").complete
    with pytest.raises(SaslError, match="Invalid client credentials"):
        _scram_exchange(mechanism, credential, "wrong")
    with pytest.raises(SaslError, match="Invalid user credentials"):
        _scram_exchange(mechanism, None, "alice-secret")
    too_few = ScramCredential.generate(mechanism, "alice-secret", 1000)
    with pytest.raises(SaslError, match=f"Iterations 1000 is less than the minimum 4096 for {mechanism}"):
        _scram_exchange(mechanism, too_few, "alice-secret")


def test_scram_refuses_tampered_final_message() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = ScramCredential.generate(mechanism, "alice-secret")
    server = ScramSaslServer(mechanism, lambda m, user: credential)
    client = ScramSaslClient(mechanism, "alice", "alice-secret")
    first = client.evaluate(b"")
    assert first is not None
    final = client.evaluate(server.evaluate_response(first))
    assert final is not None
    with pytest.raises(SaslError, match="Invalid client nonce"):
        server.evaluate_response(final.replace(b",p=", b"x,p="))
    with pytest.raises(SaslError, match="Invalid SCRAM client first message format"):
        ScramSaslServer(mechanism, lambda m, user: credential).evaluate_response(b"garbage")


@pytest.mark.parametrize("bad", [b"c=biws,r={nonce},p=abc", b"c=abc,r={nonce},p=", b"c=biws,r={nonce},p=YQ"])
def test_scram_refuses_undecodable_base64_as_a_malformed_message(bad: bytes) -> None:
    # The message patterns admit base64 characters, not only decodable strings of them; an undecodable
    # proof or channel binding once escaped as binascii.Error (a traceback, not a failed authentication).
    mechanism = ScramMechanism.SCRAM_SHA_256
    credential = ScramCredential.generate(mechanism, "alice-secret")
    server = ScramSaslServer(mechanism, lambda m, user: credential)
    server_first = server.evaluate_response(b"n,,n=alice,r=abc").decode()
    nonce = server_first.split(",")[0][2:]
    with pytest.raises(SaslError, match="Invalid SCRAM client final message format"):
        server.evaluate_response(bad.replace(b"{nonce}", nonce.encode()))


def test_credentials_in_kafkas_string_form(tmp_path: pytest.TempPathFactory) -> None:
    mechanism = ScramMechanism.SCRAM_SHA_512
    credential = ScramCredential.generate(mechanism, "pw", 4096)
    text = credential.to_config_string()
    assert text.startswith("salt=") and ",stored_key=" in text and ",server_key=" in text
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_config_string(text) == credential
    cache = CredentialCache()
    cache.update_user("alice", {"SCRAM-SHA-512": text, "producer_byte_rate": "1024"})
    assert cache.get(mechanism, "alice") == credential
    assert cache.user_config("alice") == {"SCRAM-SHA-512": text}
    store = ScramCredentialsFile(str(tmp_path))
    store.save({"alice": cache.user_config("alice")})
    assert store.load() == {"alice": {"SCRAM-SHA-512": text}}
    assert oct(store.path.stat().st_mode & 0o777) == "0o600"


def test_client_settings_from_properties() -> None:
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                 'username="alice" password="alice-secret";'}
    settings = SaslSettings.from_client_properties(props)
    assert settings == SaslSettings("SCRAM-SHA-256", "alice", "alice-secret")
    assert "alice-secret" not in repr(settings)
    assert SaslSettings.from_client_properties({"security.protocol": "SSL"}) is None
