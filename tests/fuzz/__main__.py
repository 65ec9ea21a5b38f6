"""Run the wire fuzzer against a real ``mqnamesrv`` and a real ``mqbroker-stub`` on loopback.

    python -m tests.fuzz --frames 20000 --seconds 60 --seed 1
    python -m tests.fuzz --only 1234 --seed 1          # replay one frame of a finding
    make fuzz                                           # the long mode

Exit status: 0 no finding, 1 a finding (each printed on one line with the
seed, frame index and the frame's bytes in hex), 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from tests.fuzz.campaign import CampaignResult, run_campaign


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=20_000, help="frames per server (default 20000)")
    parser.add_argument("--seconds", type=float, default=60.0, help="time bound per server (default 60)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--start", type=int, default=0, help="first frame index (to replay a range)")
    parser.add_argument("--only", type=int, default=None, help="send just this frame index")
    parser.add_argument("--server", choices=("namesrv", "broker", "both"), default="both")
    parser.add_argument("--workers", type=int, default=8, help="connections per server")
    parser.add_argument("--dir", type=Path, default=None, help="keep the servers' files and logs here")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.seconds <= 0 or args.workers < 1:
        parser.error("--frames, --seconds and --workers must be positive")
    if args.only is not None:
        args.start, args.frames, args.workers = args.only, 1, 1
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        result = _run(args, args.dir)
    else:
        with tempfile.TemporaryDirectory(prefix="wirefuzz-") as tmp:
            result = _run(args, Path(tmp))
    for line in result.lines():
        print(line)
    return 1 if result.findings else 0


def _run(args: argparse.Namespace, workdir: Path) -> CampaignResult:
    servers = ("namesrv", "broker") if args.server == "both" else (args.server,)
    return run_campaign(
        workdir, seed=args.seed, frames=args.frames, seconds=args.seconds, start=args.start,
        servers=servers, workers=args.workers, progress=sys.stderr if args.frames > 50_000 else None,
    )


if __name__ == "__main__":
    sys.exit(main())
