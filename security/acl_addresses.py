"""Remote-address patterns of plain_acl.yml (``whiteRemoteAddress``, ``globalWhiteRemoteAddresses``).

The forms Java's RemoteAddressStrategyFactory accepts, for IPv4 and IPv6:

- blank: matches no one;
- ``*`` (or ``*.*.*.*``, ``*:*:*:*:*:*:*:*``): matches everyone;
- one address: ``192.168.0.1``, ``::1``;
- a list: ``192.168.0.1,192.168.0.2``, or a brace list in the last part,
  ``192.168.0.{1,2}``;
- ranges: each part a number, ``*`` or ``low-high``: ``192.168.1.*``,
  ``192.168.*.1-10``, ``2001:db8::1-ff``.

One deliberate difference: Java reads a range pattern only up to its first
``*`` or ``low-high`` part and ignores the parts after it, so its
``192.168.*.1-10`` admits 192.168.7.200. Here every part is checked, as the
pattern reads. A pattern that does not parse is an error (the accounts file
is then refused as a whole), never a pattern that matches nothing silently.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class AddressPatternError(ValueError):
    """A remote-address pattern that cannot be read; the text names it."""


def peer_ip(peer: str) -> str:
    """The address part of a reactor peer (``ip:port``; IPv6 as ``a:b::c:port``)."""
    host = peer.rpartition(":")[0] if ":" in peer else peer
    return host.strip("[]")


def _parsed(ip: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped  # a dual-stack listener's view of an IPv4 peer
    return addr


def _parts(ip: str) -> tuple[int, ...] | None:
    """An address as 4 octets or 8 groups (None: not an IP address)."""
    addr = _parsed(ip)
    if addr is None:
        return None
    if isinstance(addr, ipaddress.IPv4Address):
        return tuple(addr.packed)
    return tuple(int(g, 16) for g in addr.exploded.split(":"))


@dataclass(frozen=True, slots=True)
class AddressPattern:
    """One pattern: everyone, no one, a set of addresses, or a range per part."""

    text: str
    everyone: bool = False
    exact: frozenset[tuple[int, ...]] = frozenset()
    ranges: tuple[tuple[int, int], ...] = ()

    def matches(self, ip: str) -> bool:
        if self.everyone:
            return True
        if not self.exact and not self.ranges:
            return False  # blank: no one (and no address parse)
        parts = _parts(ip)
        if parts is None:
            return False
        if parts in self.exact:
            return True
        ranges = self.ranges
        return len(ranges) == len(parts) and all(lo <= p <= hi for p, (lo, hi) in zip(parts, ranges))


def _address(text: str, pattern: str) -> tuple[int, ...]:
    parts = _parts(text.strip())
    if parts is None or "%" in text:
        raise AddressPatternError(f"{pattern!r}: {text.strip()!r} is not an IP address")
    return parts


def _range_part(text: str, base: int, top: int, pattern: str) -> tuple[int, int]:
    text = text.strip()
    try:
        if text == "*":
            return 0, top
        if "-" in text:
            low_text, _, high_text = text.partition("-")
            low, high = int(low_text, base), int(high_text, base)
        else:
            low = high = int(text, base)
    except ValueError:
        raise AddressPatternError(f"{pattern!r}: {text!r} is not a number, '*' or 'low-high'") from None
    if not 0 <= low <= high <= top:
        raise AddressPatternError(f"{pattern!r}: {text!r} is not a range within 0-{top:x}" if base == 16
                                  else f"{pattern!r}: {text!r} is not a range within 0-{top}")
    return low, high


def _ipv6_groups(pattern: str) -> list[str]:
    """The 8 groups of an IPv6 range pattern, ``::`` expanded to zero groups."""
    if "::" in pattern:
        head, _, tail = pattern.partition("::")
        left = head.split(":") if head else []
        right = tail.split(":") if tail else []
        missing = 8 - len(left) - len(right)
        if missing < 1:
            raise AddressPatternError(f"{pattern!r}: too many groups for an IPv6 address")
        return left + ["0"] * missing + right
    return pattern.split(":")


def parse_pattern(text: str | None) -> AddressPattern:
    """Read one pattern (see the module docstring); AddressPatternError says what is wrong."""
    pattern = (text or "").strip()
    if not pattern:
        return AddressPattern(pattern)
    if pattern in ("*", "*.*.*.*", "*:*:*:*:*:*:*:*"):
        return AddressPattern(pattern, everyone=True)
    if pattern.endswith("}"):
        prefix, brace, listed = pattern.rpartition("{")
        if not brace or not prefix.endswith((".", ":")):
            raise AddressPatternError(f"{pattern!r}: a brace list must be the last part, as in 192.168.0.{{1,2}}")
        items = listed[:-1].split(",")
        return AddressPattern(pattern, exact=frozenset(_address(prefix + i.strip(), pattern) for i in items))
    if "," in pattern:
        return AddressPattern(pattern, exact=frozenset(_address(i, pattern) for i in pattern.split(",")))
    if "*" in pattern or "-" in pattern:
        if ":" in pattern:
            groups = _ipv6_groups(pattern)
            if len(groups) != 8:
                raise AddressPatternError(f"{pattern!r}: an IPv6 range pattern needs 8 groups (or '::')")
            return AddressPattern(pattern, ranges=tuple(_range_part(g, 16, 0xFFFF, pattern) for g in groups))
        octets = pattern.split(".")
        if len(octets) != 4:
            raise AddressPatternError(f"{pattern!r}: an IPv4 range pattern needs 4 parts, as in 192.168.1.*")
        return AddressPattern(pattern, ranges=tuple(_range_part(o, 10, 255, pattern) for o in octets))
    return AddressPattern(pattern, exact=frozenset({_address(pattern, pattern)}))


@dataclass(frozen=True, slots=True)
class AddressList:
    """Several patterns; a peer matches the list when it matches any of them."""

    patterns: tuple[AddressPattern, ...] = ()

    @classmethod
    def parse(cls, texts: list[str] | tuple[str, ...]) -> AddressList:
        return cls(tuple(p for p in (parse_pattern(t) for t in texts) if p.text))

    def matches(self, ip: str) -> bool:
        return any(p.matches(ip) for p in self.patterns)

    def __str__(self) -> str:
        return ";".join(p.text for p in self.patterns) or "(none)"


#: Everyone on this host: the default of the servers' adminAddressesWithoutAuth.
LOOPBACK_PATTERNS = "127.*.*.*;::1"


def parse_list(text: str) -> AddressList:
    """A ``;``-separated list of patterns, as the servers' properties keys hold them."""
    return AddressList.parse([t for t in text.split(";") if t.strip()])
