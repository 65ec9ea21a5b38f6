"""Java-compatible request signatures (remoting.acl).

The expected values were computed outside Python, with
``printf CONTENT | openssl dgst -sha1 -hmac SECRET -binary | base64``, from
the content string the rule in the module docstring gives by hand.
"""

from __future__ import annotations

import pytest

from remoting import acl
from remoting.codec import FrameDecoder, encode
from remoting.codes import SerializeType
from remoting.command import request

SECRET = "12345678"


def test_signature_matches_openssl_for_fields_then_body() -> None:
    # keys ordered AccessKey < Signature < topic; Signature left out; then the body
    fields = {"topic": "TopicTest", "AccessKey": "RocketMQ", "Signature": "ignored"}
    content = acl.signed_content(fields, b"hello")
    assert content == b"RocketMQTopicTesthello"
    assert acl.signature(SECRET, content) == "IlhJmDi56c1+sdRGdQLyYHpYz4g="


def test_no_fields_but_the_access_key_and_no_body() -> None:
    assert acl.signature(SECRET, acl.signed_content({"AccessKey": "rocketmq2"}, b"")) == "Ou1T58RIcyZWaTIwzkhJZWn/Zvs="


def test_non_ascii_secret_and_token_and_binary_body() -> None:
    fields = {"AccessKey": "RocketMQ", "SecurityToken": "tok", "topic": "TopicTest"}
    content = acl.signed_content(fields, b"\x00\x01\xff")
    assert acl.signature("sécret", content) == "cmV65TSfrwQ8oKnN4HGSV66Nz1I="


def test_keys_are_ordered_as_java_orders_strings() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which Java's TreeMap puts before U+FFFD.
    fields = {"\ufffd": "B", "\U0001f600": "A"}
    assert acl.signed_content(fields, b"") == b"AB"
    assert acl.signature("k", b"AB") == "rQ5D2F42T0nEXKw5SseBcSfFe1Q="


def test_unique_key_query_is_unsigned_only_for_clients_up_to_4_9_3() -> None:
    fields = {"AccessKey": "RocketMQ", "_UNIQUE_KEY_QUERY": "true", "topic": "TopicTest"}
    assert acl.signature(SECRET, acl.signed_content(fields, b"", version=401)) == "ZdiR1korMntc8xLq4+f2OdEHGQM="
    assert acl.signature(SECRET, acl.signed_content(fields, b"", version=399)) == "0jiwhsaYp5ObE5GObbZH1I8/FT4="
    fields["_UNIQUE_KEY_QUERY"] = "false"
    assert acl.signature(SECRET, acl.signed_content(fields, b"")) == "X6W2w+jG7ibPLmj3gFZR/4eFa74="


def test_sign_adds_the_fields_and_verifier_accepts_it_through_both_encodings() -> None:
    creds = acl.Credentials("RocketMQ", SECRET, "tok")
    for serialize in (SerializeType.JSON, SerializeType.ROCKETMQ):
        cmd = acl.sign(request(105, {"topic": "TopicTest"}, b"body", serialize_type=serialize), creds)
        fields = cmd.ext_fields or {}
        assert fields["AccessKey"] == "RocketMQ" and fields["SecurityToken"] == "tok"
        assert fields["Signature"] == acl.signature(SECRET, b"RocketMQtokTopicTestbody")
        (decoded,) = FrameDecoder(1 << 20).feed(encode(cmd))
        assert acl.Verifier(SECRET).matches(decoded.ext_fields or {}, decoded.body, decoded.version)


@pytest.mark.parametrize(
    "tamper",
    [
        lambda f, b: ({**f, "topic": "Other"}, b),
        lambda f, b: ({**f, "extra": "x"}, b),
        lambda f, b: (f, b + b"!"),
        lambda f, b: ({**f, "Signature": ("B" if f["Signature"][0] == "A" else "A") + f["Signature"][1:]}, b),
        lambda f, b: ({k: v for k, v in f.items() if k != "Signature"}, b),
        lambda f, b: ({**f, "Signature": "é"}, b),
    ],
)
def test_any_change_breaks_the_signature(tamper) -> None:  # type: ignore[no-untyped-def]
    cmd = acl.sign(request(105, {"topic": "TopicTest"}, b"body"), acl.Credentials("RocketMQ", SECRET))
    fields, body = tamper(dict(cmd.ext_fields or {}), cmd.body)
    assert not acl.Verifier(SECRET).matches(fields, body, 479)
    assert acl.Verifier(SECRET).matches(cmd.ext_fields or {}, cmd.body, 479)
    assert not acl.Verifier("another-secret").matches(cmd.ext_fields or {}, cmd.body, 479)


def test_resigning_replaces_an_old_signature_and_secrets_stay_out_of_reprs() -> None:
    creds = acl.Credentials("RocketMQ", SECRET)
    cmd = acl.sign(request(105, {"topic": "T", "Signature": "stale"}), creds)
    assert acl.Verifier(SECRET).matches(cmd.ext_fields or {}, b"", 479)
    assert SECRET not in repr(creds) and SECRET not in repr(acl.Verifier(SECRET))
    with pytest.raises(ValueError):
        acl.Credentials("RocketMQ", "")
