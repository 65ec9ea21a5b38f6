"""The mqadmin client's one path from an answer to a value or an error (mqadmin/client/errors.py)."""

from __future__ import annotations

import pytest

from mqadmin.client.errors import AdminError, ConsumerNotOnline, NotFound, check_answer, parse_answer
from remoting.codes import RequestCode, ResponseCode
from remoting.command import request, response_to


def answer(code: int, remark: str | None) -> object:
    return response_to(request(RequestCode.GET_BROKER_CONFIG), code, remark)


def test_success_is_the_answer_itself() -> None:
    resp = answer(ResponseCode.SUCCESS, None)
    assert check_answer("127.0.0.1:10911", resp, "broker config") is resp


@pytest.mark.parametrize(("code", "error"), [
    (ResponseCode.TOPIC_NOT_EXIST, NotFound),
    (ResponseCode.QUERY_NOT_FOUND, NotFound),
    (ResponseCode.CONSUMER_NOT_ONLINE, ConsumerNotOnline),
    (ResponseCode.SYSTEM_ERROR, AdminError),
])
def test_a_refusal_names_address_request_code_and_the_remarks_first_line(code: int, error: type) -> None:
    with pytest.raises(error) as caught:
        check_answer("127.0.0.1:10911", answer(code, "first line\nsecond line"), "reset offset of g")
    assert str(caught.value) == f"127.0.0.1:10911: reset offset of g failed: {ResponseCode(code).name} (first line)"


@pytest.mark.parametrize("remark", [None, "", "  \n "])
def test_a_blank_remark_is_left_out(remark: str | None) -> None:
    with pytest.raises(AdminError) as caught:
        check_answer("127.0.0.1:9876", answer(ResponseCode.SYSTEM_ERROR, remark), "update kv config")
    assert str(caught.value) == "127.0.0.1:9876: update kv config failed: SYSTEM_ERROR"


def test_a_body_a_decoder_cannot_read_is_a_malformed_answer() -> None:
    def decode(body: bytes) -> dict[str, int]:
        return {"n": int(body)}

    assert parse_answer("a:1", decode, b"7") == {"n": 7}
    with pytest.raises(AdminError, match=r"^a:1: malformed answer to GET_TOPIC_STATS_INFO: invalid literal"):
        parse_answer("a:1", decode, b"x", "GET_TOPIC_STATS_INFO")
    with pytest.raises(AdminError, match=r"^a:1: malformed answer: "):
        parse_answer("a:1", lambda b: b.keys(), b"{}")  # type: ignore[attr-defined]
