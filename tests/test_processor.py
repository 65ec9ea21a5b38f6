"""Processor behaviour that needs an injected failure (no sockets)."""

from __future__ import annotations

import time
from pathlib import Path

from namesrv.config import NamesrvConfig
from namesrv.kvconfig import KVConfig
from namesrv.processor import NameServerProcessor
from remoting import requests as rq
from remoting.codec import decode_frame
from remoting.codes import ResponseCode


async def test_unpersisted_kv_write_is_refused_and_rolled_back(tmp_path: Path) -> None:
    fail = False

    async def persist(path: str, data: bytes) -> None:
        if fail:
            raise OSError(28, "No space left on device")

    kv = KVConfig(str(tmp_path / "kv.json"))
    proc = NameServerProcessor(NamesrvConfig(), kv, clock=time.monotonic, persist=persist)
    ok = decode_frame(await proc.handle_async(rq.put_kv("ns", "k", "old"), "c") or b"")
    assert ok.code == ResponseCode.SUCCESS
    fail = True
    resp = decode_frame(await proc.handle_async(rq.put_kv("ns", "k", "new"), "c") or b"")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "No space left" in (resp.remark or "")
    assert kv.get("ns", "k") == "old"
    resp = decode_frame(await proc.handle_async(rq.put_kv("other", "k", "v"), "c") or b"")
    assert resp.code == ResponseCode.SYSTEM_ERROR and "other" not in kv.table
    resp = decode_frame(await proc.handle_async(rq.update_namesrv_config({"enableTopicList": "false"}), "c") or b"")
    assert resp.code == ResponseCode.SYSTEM_ERROR and proc.config.enableTopicList is True
