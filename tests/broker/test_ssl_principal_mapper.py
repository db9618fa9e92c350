"""ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) and the RFC 2253 subject it maps."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.security.distinguished_name import rfc2253_name
from broker.security.ssl_principal_mapper import NoMatchingRule, SslPrincipalMapper
from pytest_pafka.tls import _openssl

#: The rules of Kafka's documentation ("Customizing SSL User Name"), as one config value.
DOCUMENTED_RULES = ("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
                    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,"
                    "DEFAULT")


@pytest.mark.parametrize(("dn", "name"), [
    # Kafka's documented examples.
    ("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "serviceuser"),
    ("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown", "adminuser@admin"),
    # The third rule: any name with a CN, lower-cased.
    ("OU=Other,CN=Some.Host", "some.host"),
    # No rule but DEFAULT applies: the name as it is.
    ("OU=NoCommonName,O=Unknown", "OU=NoCommonName,O=Unknown"),
])
def test_documented_rules(dn: str, name: str) -> None:
    assert SslPrincipalMapper.from_rules(DOCUMENTED_RULES).get_name(dn) == name


def test_rules_on_separate_lines_and_upper_case() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U\n  DEFAULT")
    assert mapper.get_name("cn=duke,ou=javasoft,dc=mycompany,dc=com") == "DUKE@JAVASOFT"
    assert mapper.get_name("CN=x") == "CN=x"


def test_default_is_the_name_itself() -> None:
    dn = "CN=Kafka\\,Server,O=Example"
    assert SslPrincipalMapper.from_rules(None).get_name(dn) == dn
    assert SslPrincipalMapper.from_rules("DEFAULT").get_name(dn) == dn


def test_no_matching_rule_fails_authentication() -> None:
    mapper = SslPrincipalMapper.from_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/")
    with pytest.raises(NoMatchingRule, match="No rules apply to CN=x,OU=Admin"):
        mapper.get_name("CN=x,OU=Admin")


def test_group_references_beyond_the_groups_stay_literal() -> None:
    mapper = SslPrincipalMapper.from_rules(r"RULE:^CN=(.*)$/$1-$2-\$1/")
    assert mapper.get_name("CN=a") == "a-$2-$1"


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1/L/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/L",
    "RULE:CN=(.*?),OU=ServiceUsers.*/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/LU",
    "RULE:CN=(unclosed/$1/",
])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError, match="Invalid rule"):
        SslPrincipalMapper.from_rules(rules)


def _certificate(directory: Path, subject: str, *extra: str) -> bytes:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "k.pem", "-out", "c.pem", "-days", "1", "-subj", subject, *extra, cwd=directory)
    return ssl.PEM_cert_to_DER_cert((directory / "c.pem").read_text())


def test_subject_in_rfc2253_form(tmp_path: Path) -> None:
    der = _certificate(tmp_path, "/C=US/O=Example, Inc./OU=a\\+b=c/CN=\\ \\ padded #1\\ ")
    # Java's X500Principal escapes = and # anywhere, and each leading and trailing blank.
    assert rfc2253_name(der) == "CN=\\ \\ padded \\#1\\ ,OU=a\\+b\\=c,O=Example\\, Inc.,C=US"


def test_multi_valued_rdn_and_attributes_without_keyword(tmp_path: Path) -> None:
    der = _certificate(tmp_path, "/DC=com/DC=example/CN=alice+UID=a1/emailAddress=a@example.com", "-multivalue-rdn")
    # emailAddress has no RFC 2253 keyword: its OID and the DER of its IA5String value, as Java writes it.
    email = "1.2.840.113549.1.9.1=#16" + f"{len('a@example.com'):02x}" + b"a@example.com".hex()
    assert rfc2253_name(der) == f"{email},CN=alice+UID=a1,DC=example,DC=com"
